// Recovery of the real paddockd after kill -9: how long until it serves calls again, and whether any
// acknowledged event was lost. Prints figures; not a test.
//
//   broker_recovery_bench [cycles=100] [sessions=200]
//
// A client keeps pausing and resuming sessions (each acknowledged call is one committed event) while
// the broker is killed at random moments and restarted. At the end every acknowledged change must
// be in the logs. The broker's pool is a closed port, so sessions never leave the queue: only the
// log and the restart are measured.

#include "tests/integration/harness.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <thread>

using namespace paddock;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout)
{
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
}

double percentile(std::vector<double> values, double p)
{
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

} // namespace

int main(int argc, char **argv)
{
    const int cycles = argc > 1 ? std::atoi(argv[1]) : 100;
    const int sessionCount = argc > 2 ? std::atoi(argv[2]) : 200;
    test::TempDir dir("paddock-recovery-bench");
    const std::string socket = (dir / "broker.sock").string();
    auto start = [&] {
        return test::Daemon::start({test::binaryPath("paddockd").string(), "--data-dir", (dir / "data").string(),
                                    "--socket", socket, "--pool", "down=127.0.0.1:1", "--allow-local-execution",
                                    "--playbook-dir", test::playbookDir().string(), "--log-level", "warn"},
                                   dir / "broker.log");
    };
    auto broker = start();
    if (!broker || !test::waitForHealthy("unix:" + socket, 10s, &*broker)) {
        std::fprintf(stderr, "paddockd did not start; see %s\n", (dir / "broker.log").c_str());
        return 1;
    }
    auto stub = std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));

    std::vector<std::string> ids;
    for (int i = 0; i < sessionCount; ++i) {
        v1::SubmitSessionRequest request;
        request.set_playbook("hello-c");
        v1::Session session;
        if (stub->sessions->SubmitSession(context(5s).get(), request, &session).ok())
            ids.push_back(session.id());
    }

    // The client: pause/resume round-robin; counts the changes the broker acknowledged.
    std::atomic<bool> stop{false};
    std::atomic<int64_t> acknowledged{0};
    std::thread client([&] {
        grpc::ChannelArguments eager;   // reconnect within milliseconds, to keep writing through restarts
        eager.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        eager.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5);
        eager.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5);
        eager.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 20);
        auto clientStub = std::make_unique<rpc::BrokerStubs>(
            grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), eager));
        std::vector<bool> paused(ids.size(), false);
        for (size_t i = 0; !stop; i = (i + 1) % ids.size()) {
            v1::SessionActionRequest request;
            request.set_id(ids[i]);
            v1::Session out;
            const auto status = paused[i] ? clientStub->sessions->ResumeSession(context(2s).get(), request, &out)
                                          : clientStub->sessions->PauseSession(context(2s).get(), request, &out);
            if (status.ok()) {
                ++acknowledged;
                paused[i] = !paused[i];
            } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
                paused[i] = !paused[i];   // the call before the crash was committed but its answer was lost
            } else {
                std::this_thread::sleep_for(2ms);
            }
        }
    });

    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> pauseMs(20, 200);
    std::vector<double> restartMs;
    for (int cycle = 0; cycle < cycles; ++cycle) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs(random)));
        broker->kill9();
        broker->waitExit(10s);
        const auto restarted = Clock::now();
        broker = start();
        // Serving means answering a real call, not only the health check.
        v1::GetSessionRequest get;
        get.set_id(ids.front());
        while (true) {
            // A fresh channel with its own subchannel per attempt: channels share subchannels (and
            // their reconnect backoff, 1 s and growing) by default, which would measure gRPC's
            // client rather than the broker.
            grpc::ChannelArguments own;
            own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
            auto probe = std::make_unique<rpc::BrokerStubs>(
                grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), own));
            v1::Session out;
            if (probe->sessions->GetSession(context(200ms).get(), get, &out).ok())
                break;
            if (Clock::now() - restarted > 30s) {
                std::fprintf(stderr, "paddockd did not come back within 30 s; see %s\n", (dir / "broker.log").c_str());
                return 1;
            }
            std::this_thread::sleep_for(1ms);
        }
        restartMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - restarted).count());
    }
    stop = true;
    client.join();

    // Every acknowledged pause or resume is a state.changed event in some log.
    int64_t recorded = 0;
    for (const auto &id : ids) {
        v1::StreamEventsRequest request;
        request.set_session_id(id);
        auto ctx = context(30s);
        auto reader = stub->sessions->StreamEvents(ctx.get(), request);
        v1::EventBatch batch;
        int64_t expectedSeq = 1;
        while (reader->Read(&batch)) {
            for (const auto &event : batch.events()) {
                if (event.seq() != expectedSeq++)
                    std::printf("session %s: seq %lld where %lld was expected\n", id.c_str(),
                                static_cast<long long>(event.seq()), static_cast<long long>(expectedSeq - 1));
                recorded += event.kind() == "state.changed"
                    && (event.payload_json().find("\"paused\"") != std::string::npos
                        || event.payload_json().find("\"running\"") != std::string::npos);
            }
        }
        reader->Finish();
    }
    broker->terminate();

    std::printf("%d kill -9 cycles with %d sessions\n", cycles, sessionCount);
    std::printf("restart to first answered call: median %.0f ms, p99 %.0f ms, max %.0f ms (budget: within 1,000 ms)\n",
                percentile(restartMs, 0.5), percentile(restartMs, 0.99), percentile(restartMs, 1.0));
    std::printf("acknowledged changes %lld, recorded %lld: %s\n", static_cast<long long>(acknowledged.load()),
                static_cast<long long>(recorded), recorded >= acknowledged ? "none lost" : "LOST SOME");
    return recorded >= acknowledged ? 0 : 1;
}
