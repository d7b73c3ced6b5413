// Many concurrent sessions on one real broker and one real pool (bubblewrap sandboxes). Prints
// figures; not a test.
//
//   broker_scale_bench [sessions=500] [workers=128]
//
// Each session claims a sandbox, runs `sleep 2` and two short commands, and finishes, so every
// session holds a sandbox at the same time for a while. Reported: how many held a sandbox at once
// (peak), how long until all finished, how many failed, and the per-session wall time against the
// 2 s the commands themselves take.

#include "tests/integration/harness.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

using namespace paddock;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char *kPlaybook = R"(
name = "scale"
goal = "hold a sandbox for two seconds"
[[step]]
tool = "run_command"
command = "sleep 2"
[[step]]
tool = "run_command"
command = "echo done > marker && cat marker"
expect_stdout = "done"
)";

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout)
{
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
}

} // namespace

int main(int argc, char **argv)
{
    const int sessions = argc > 1 ? std::atoi(argv[1]) : 500;
    const int workers = argc > 2 ? std::atoi(argv[2]) : 128;
    test::TempDir dir("paddock-scale-bench");
    std::ofstream(dir / "pool.toml") << "[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\nwarm_count = 16\nmax_count = "
                                     << sessions + 32 << "\n";
    const int port = test::freeLoopbackPort();
    const std::string endpoint = "127.0.0.1:" + std::to_string(port);
    auto pool = test::Daemon::start({test::binaryPath("paddock-pool").string(), "--listen", endpoint, "--state-dir",
                                     (dir / "pool").string(), "--config", (dir / "pool.toml").string(),
                                     "--log-level", "warn"},
                                    dir / "pool.log");
    // The socket in a directory of its own: paddockd makes its socket's directory 0700, and the
    // pool's sandboxes (host uids of their own) must still pass through `dir` to their workspaces.
    const std::string socket = (dir / "run" / "broker.sock").string();
    auto broker = test::Daemon::start({test::binaryPath("paddockd").string(), "--data-dir", (dir / "data").string(),
                                       "--socket", socket, "--pool", "local=" + endpoint, "--allow-local-execution",
                                       "--workers", std::to_string(workers), "--log-level", "warn"},
                                      dir / "broker.log");
    if (!pool || !broker || !test::waitForHealthy(endpoint, 20s, &*pool)
        || !test::waitForHealthy("unix:" + socket, 20s, &*broker)) {
        std::fprintf(stderr, "the daemons did not start; logs in %s\n", dir.path().c_str());
        return 1;
    }
    auto stub = std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));

    const auto start = Clock::now();
    for (int i = 0; i < sessions; ++i) {
        v1::SubmitSessionRequest request;
        request.set_playbook_toml(kPlaybook);
        v1::Session session;
        if (!stub->sessions->SubmitSession(context(10s).get(), request, &session).ok()) {
            std::fprintf(stderr, "submit failed\n");
            return 1;
        }
    }
    const double submitSeconds = std::chrono::duration<double>(Clock::now() - start).count();

    int peakHolding = 0;
    int succeeded = 0;
    int failed = 0;
    while (Clock::now() - start < 600s) {
        v1::ListSessionsRequest request;
        request.set_page_size(1000);
        v1::ListSessionsResponse response;
        if (!stub->sessions->ListSessions(context(10s).get(), request, &response).ok())
            continue;
        int holding = 0;
        succeeded = failed = 0;
        for (const auto &s : response.sessions()) {
            holding += !s.sandbox_id().empty();
            succeeded += s.status() == v1::SESSION_STATUS_SUCCEEDED;
            failed += s.status() == v1::SESSION_STATUS_FAILED || s.status() == v1::SESSION_STATUS_CANCELLED;
        }
        peakHolding = std::max(peakHolding, holding);
        if (succeeded + failed == sessions)
            break;
        std::this_thread::sleep_for(100ms);
    }
    const double totalSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    broker->terminate();
    pool->terminate();

    std::printf("%d sessions, %d step workers, one broker, one pool (bubblewrap)\n", sessions, workers);
    std::printf("submitted in %.2f s (%.0f submits/s)\n", submitSeconds, sessions / submitSeconds);
    std::printf("peak sessions holding a sandbox at once: %d\n", peakHolding);
    std::printf("all finished after %.1f s: %d succeeded, %d failed (the commands alone take 2 s per session; "
                "%.1f s is %.1fx that)\n",
                totalSeconds, succeeded, failed, totalSeconds, totalSeconds / 2.0);
    return failed == 0 && succeeded == sessions ? 0 : 1;
}
