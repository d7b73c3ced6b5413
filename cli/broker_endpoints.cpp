#include "cli/broker_endpoints.h"

#include <algorithm>
#include <thread>

namespace paddock::cli {

namespace {

// Between passes over endpoints that all refused: they may be starting.
constexpr auto kPassPause = std::chrono::milliseconds(100);

std::shared_ptr<grpc::Channel> makeChannel(const BrokerEndpoints::Endpoint &endpoint)
{
    grpc::ChannelArguments args;
    // A broker that comes back is seen within a second: gRPC's own reconnect backoff (up to two
    // minutes) would make a follow wait that long for a broker that is there again.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    return grpc::CreateCustomChannel(endpoint.address.target, endpoint.credentials, args);
}

} // namespace

BrokerEndpoints::BrokerEndpoints(std::vector<Endpoint> endpoints, double timeoutS) : m_timeoutS(timeoutS)
{
    for (auto &endpoint : endpoints) {
        auto channel = makeChannel(endpoint);
        m_endpoints.push_back({std::move(endpoint), std::move(channel)});
    }
    m_stubs = std::make_unique<rpc::BrokerStubs>(m_endpoints.front().channel);
}

void BrokerEndpoints::start()
{
    if (m_endpoints.size() < 2)
        return;   // one broker: its first call says whether it answers
    for (size_t i = 0; i < m_endpoints.size(); ++i) {
        if (answers(m_endpoints[i], std::chrono::system_clock::now() + std::chrono::milliseconds(kProbeMs))) {
            use(i);
            return;
        }
    }
}

bool BrokerEndpoints::failover(std::chrono::milliseconds wait)
{
    const auto deadline = std::chrono::system_clock::now() + wait;
    const size_t n = m_endpoints.size();
    for (;;) {
        for (size_t step = 1; step <= n; ++step) {
            const size_t index = (m_current + step) % n;
            const auto probeDeadline =
                std::min(deadline, std::chrono::system_clock::now() + std::chrono::milliseconds(kProbeMs));
            if (answers(m_endpoints[index], probeDeadline)) {
                use(index);
                return true;
            }
        }
        const auto now = std::chrono::system_clock::now();
        if (now >= deadline)
            return false;
        std::this_thread::sleep_for(std::min<std::chrono::system_clock::duration>(kPassPause, deadline - now));
    }
}

bool BrokerEndpoints::answers(Slot &slot, std::chrono::system_clock::time_point deadline)
{
    auto state = slot.channel->GetState(true);
    while (state != GRPC_CHANNEL_READY) {
        if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN)
            return false;   // refused (or its backoff after a refusal): the next pass asks again
        if (!slot.channel->WaitForStateChange(state, deadline))
            return false;   // no answer in time: a broker that accepts and hangs, or a lost host
        state = slot.channel->GetState(true);
    }
    return true;
}

void BrokerEndpoints::use(size_t index)
{
    if (index == m_current)
        return;
    m_current = index;
    *m_stubs = rpc::BrokerStubs(m_endpoints[index].channel);
}

void BrokerEndpoints::setDeadline(grpc::ClientContext &context) const
{
    context.set_deadline(std::chrono::system_clock::now()
                         + std::chrono::milliseconds(static_cast<int64_t>(m_timeoutS * 1000)));
}

bool BrokerEndpoints::connected() const
{
    return m_endpoints[m_current].channel->GetState(false) == GRPC_CHANNEL_READY;
}

} // namespace paddock::cli
