#include "broker/server/sample_watch.h"

#include "broker/server/convert.h"
#include "broker/server/queued_writer.h"
#include "rpc/status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace paddock::server {

// A server stream the poller feeds. It holds a reference to itself until gRPC is done with it
// (OnDone), and the poller holds another until it has finished the call.
class SampleWatches::Stream final : public QueuedWriter<v1::SandboxSamples>,
                                    public std::enable_shared_from_this<SampleWatches::Stream> {
public:
    static constexpr size_t kMaxQueued = 16;   // messages; a client that reads slower loses the oldest

    Stream(pool_client::PoolClient *client, std::string poolNameIn, std::string sandboxIdIn)
        : QueuedWriter(kMaxQueued, Overflow::DropOldest), pool(client), poolName(std::move(poolNameIn)),
          sandboxId(std::move(sandboxIdIn))
    {
    }
    void keepUntilDone(std::shared_ptr<Stream> self)
    {
        std::lock_guard lock(m_selfMutex);
        m_self = std::move(self);
    }

    pool_client::PoolClient *const pool;
    const std::string poolName;
    const std::string sandboxId;
    int64_t lastUnixMs = 0;   // poller only
    bool seen = false;        // poller only: a poll has answered
    bool polled = false;      // under SampleWatches::m_mutex: polled at least once

protected:
    void released() override
    {
        std::shared_ptr<Stream> self;
        {
            std::lock_guard lock(m_selfMutex);
            self.swap(m_self);
        }
        // self goes here, deleting this unless the poller still holds it: nothing after this line.
    }

private:
    std::mutex m_selfMutex;
    std::shared_ptr<Stream> m_self;
};

SampleWatches::SampleWatches(const placement::PoolSet &pools, int64_t intervalMs)
    : m_pools(pools), m_intervalMs(intervalMs), m_poller([this] { pollerLoop(); })
{
}

SampleWatches::~SampleWatches()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    m_poller.join();
    for (auto &stream : m_streams)
        stream->finish({grpc::StatusCode::UNAVAILABLE, "the broker is shutting down; watch the samples again once it is back"});
    m_streams.clear();
}

size_t SampleWatches::active() const
{
    std::lock_guard lock(m_mutex);
    return m_streams.size();
}

grpc::ServerWriteReactor<v1::SandboxSamples> *SampleWatches::watch(const v1::WatchSandboxSamplesRequest &request)
{
    pool_client::PoolClient *client = request.pool().empty() ? nullptr : m_pools.find(request.pool());
    auto stream = std::make_shared<Stream>(client, request.pool(), request.sandbox_id());
    stream->keepUntilDone(stream);
    if (request.sandbox_id().empty()) {
        stream->finish({grpc::StatusCode::INVALID_ARGUMENT,
                        "name the sandbox to watch (sandbox_id, from the session's sandbox.claimed event)"});
        return stream.get();
    }
    if (!client) {
        stream->finish({request.pool().empty() ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::NOT_FOUND,
                        (request.pool().empty() ? std::string("name the pool of the sandbox")
                                                : "no pool named '" + request.pool() + "'") +
                            "; the broker has: " + m_pools.names()});
        return stream.get();
    }
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping) {
            stream->finish({grpc::StatusCode::UNAVAILABLE, "the broker is shutting down"});
            return stream.get();
        }
        m_streams.push_back(stream);
    }
    m_cv.notify_all();   // the first poll at once
    return stream.get();
}

void SampleWatches::pollerLoop()
{
    std::unique_lock lock(m_mutex);
    auto next = std::chrono::steady_clock::now();
    auto unpolled = [&] {
        return std::any_of(m_streams.begin(), m_streams.end(), [](const auto &s) { return !s->polled; });
    };
    while (!m_stopping) {
        // Every stream once an interval; a new one at once.
        const auto now = std::chrono::steady_clock::now();
        const bool round = now >= next;
        if (round)
            next = now + std::chrono::milliseconds(m_intervalMs);
        std::vector<std::shared_ptr<Stream>> due;
        for (const auto &s : m_streams)
            if (round || !s->polled)
                due.push_back(s);
        lock.unlock();
        std::vector<Stream *> ended;
        for (auto &stream : due) {
            if (stream->broken()) {
                stream->finish(grpc::Status::CANCELLED);
                ended.push_back(stream.get());
                continue;
            }
            auto samples = stream->pool->samples(stream->sandboxId, stream->lastUnixMs);
            if (!samples) {
                if (samples.error().code == ErrorCode::NotFound && stream->seen) {
                    stream->finish(grpc::Status::OK);   // released
                } else {
                    spdlog::debug("sample watch of {} on {} ends: {}", stream->sandboxId, stream->poolName,
                                  samples.error().message);
                    stream->finish(rpc::toGrpcStatus(samples.error()));
                }
                ended.push_back(stream.get());
                continue;
            }
            stream->seen = true;
            if (samples->empty())
                continue;
            v1::SandboxSamples msg;
            for (const auto &s : *samples)
                toProto(s, msg.add_samples());
            stream->lastUnixMs = samples->back().timeUnixMs;
            if (!stream->push(std::move(msg))) {
                stream->finish(grpc::Status::CANCELLED);
                ended.push_back(stream.get());
            }
        }
        lock.lock();
        for (auto &s : due)
            s->polled = true;
        if (!ended.empty())
            std::erase_if(m_streams, [&](const std::shared_ptr<Stream> &s) {
                return std::find(ended.begin(), ended.end(), s.get()) != ended.end();
            });
        if (m_streams.empty())
            m_cv.wait(lock, [&] { return m_stopping || !m_streams.empty(); });
        else
            m_cv.wait_until(lock, next, [&] { return m_stopping || unpolled(); });
    }
}

} // namespace paddock::server
