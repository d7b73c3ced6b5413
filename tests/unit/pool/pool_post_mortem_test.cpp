// Post-mortems from real failures in real lite sandboxes (bwrap, the sandbox init, cgroups):
// an OOM kill keeps the memory curve up to the limit, the last output and a snapshot of the
// workspace; a timeout keeps the processes that were running just before the kill; a non-zero
// exit and a dead init are named; a snapshot restores into another sandbox, and a corrupt one is
// DATA_LOSS over gRPC with the target's workspace untouched. Needs root and a cgroup hierarchy
// (else skipped), like pool_cgroup_test.

#include "common/clock.h"
#include "lite_pool_fixture.h"

#include <csignal>
#include <future>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

constexpr int64_t kMemoryLimit = 64ll << 20;

class PoolPostMortem : public LitePoolTest {
protected:
    void SetUp() override
    {
        if (::geteuid() != 0)
            GTEST_SKIP() << "cgroups cannot be written: the test does not run as root";
        ASSERT_NO_FATAL_FAILURE(createPool(kMemoryLimit, 128, "pm-test"));
        if (!m_pool->cgroupsEnforced())
            GTEST_SKIP() << "no writable cgroup hierarchy: no OOM kills to name";
        m_pool->start();
    }

    // The async path the gRPC server uses: the capture runs on the capture thread.
    pool::ExecResult runAsync(const std::string &id, std::vector<std::string> argv, int64_t timeoutMs)
    {
        pool::ExecRequest req;
        req.sandboxId = id;
        req.argv = std::move(argv);
        req.timeoutMs = timeoutMs;
        std::promise<Result<pool::ExecResult>> done;
        auto fut = done.get_future();
        if (!m_pool->execAsync(req, nullptr, [&](Result<pool::ExecResult> r) { done.set_value(std::move(r)); }))
            return run(id, req.argv, timeoutMs);
        auto r = fut.get();
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? *r : pool::ExecResult{};
    }
};

} // namespace

TEST_F(PoolPostMortem, HappyPathLeavesNone)
{
    const std::string id = claim();
    auto r = run(id, {"true"});
    EXPECT_EQ(r.exit.exitCode, 0);
    EXPECT_EQ(m_pool->postMortems().size(), 0u);
    EXPECT_EQ(m_pool->postMortems().get(id).error().code, ErrorCode::NotFound);
}

TEST_F(PoolPostMortem, OomKeepsCurveOutputProcessesAndSnapshot)
{
    const std::string id = claim();
    ASSERT_TRUE(m_pool->writeFile(id, "notes/plan.txt", "step 1: allocate\n", 0644));
    // Low memory for a few seconds (samples), then allocation without bound.
    auto r = runAsync(id, {"/bin/sh", "-c", "echo starting; echo warming >&2; sleep 2.5; exec tail /dev/zero"}, 120000);
    ASSERT_EQ(r.exit.reason, "oom_killed");

    auto pm = m_pool->postMortems().get(id);
    ASSERT_TRUE(pm) << pm.error().message;
    EXPECT_EQ(pm->reason, "oom_killed");
    EXPECT_EQ(pm->sessionId, "lite-session");
    EXPECT_EQ(pm->signal, 9);
    EXPECT_EQ(pm->lastStdout, "starting\n");
    EXPECT_EQ(pm->lastStderr, "warming\n");
    EXPECT_EQ(pm->memoryLimitBytes, kMemoryLimit);
    EXPECT_NE(pm->detail.find("OOM killer"), std::string::npos) << pm->detail;
    // The curve: samples a second apart while it slept, then the failure at the limit.
    ASSERT_GE(pm->samples.size(), 2u);
    EXPECT_LT(pm->samples.front().memoryBytes, kMemoryLimit / 2);
    EXPECT_GE(pm->samples.back().memoryBytes, kMemoryLimit * 9 / 10);
    EXPECT_NE(pm->processesNote.find("OOM"), std::string::npos);
    bool init = false;
    for (const auto &p : pm->processes)
        init = init || p.command.find("paddock-sandbox-init") != std::string::npos;
    EXPECT_TRUE(init) << "the init is left in the cgroup after the OOM kill";
    // The snapshot holds the workspace as the failure left it.
    ASSERT_FALSE(pm->snapshotRef.empty()) << pm->snapshotError;
    auto files = m_pool->snapshots().list(pm->snapshotRef, "notes");
    ASSERT_TRUE(files) << files.error().message;
    ASSERT_EQ(files->size(), 2u);
    EXPECT_EQ(m_pool->snapshots().read(pm->snapshotRef, "notes/plan.txt", 0, 0)->content, "step 1: allocate\n");

    // A plain failure afterwards does not replace the OOM's post-mortem.
    run(id, {"false"});
    EXPECT_EQ(m_pool->postMortems().get(id)->reason, "oom_killed");
}

TEST_F(PoolPostMortem, TimeoutKeepsTheProcessesBeforeTheKill)
{
    const std::string id = claim();
    auto r = runAsync(id, {"/bin/sh", "-c", "sleep 101 & sleep 202"}, 1500);
    ASSERT_EQ(r.exit.reason, "timeout");
    auto pm = m_pool->postMortems().get(id);
    ASSERT_TRUE(pm) << pm.error().message;
    EXPECT_EQ(pm->reason, "timeout");
    EXPECT_NE(pm->processesNote.find("before the deadline"), std::string::npos) << pm->processesNote;
    std::string commands;
    for (const auto &p : pm->processes)
        commands += p.command + " [" + p.state + "]\n";
    EXPECT_NE(commands.find("sleep 101"), std::string::npos) << commands;
    EXPECT_NE(commands.find("sleep 202"), std::string::npos) << commands;
    EXPECT_NE(commands.find("/bin/sh -c"), std::string::npos) << commands;
}

TEST_F(PoolPostMortem, NonZeroExitAndADeadInitAreNamed)
{
    const std::string id = claim("s-exit");
    auto r = run(id, {"/bin/sh", "-c", "echo bad input >&2; exit 3"});
    EXPECT_EQ(r.exit.exitCode, 3);
    auto pm = m_pool->postMortems().get(id);
    ASSERT_TRUE(pm);
    EXPECT_EQ(pm->reason, "nonzero_exit");
    EXPECT_EQ(pm->exitCode, 3);
    EXPECT_EQ(pm->lastStderr, "bad input\n");
    EXPECT_EQ(pm->argv.back(), "echo bad input >&2; exit 3");

    const std::string crashed = claim("s-crash");
    ASSERT_TRUE(m_pool->writeFile(crashed, "left.txt", "before the crash", 0644));
    // Kill everything in the sandbox's cgroup: bwrap and the init die.
    for (const auto &dir : m_pool->cgroupDirs(crashed)) {
        std::ifstream in(dir / "cgroup.procs");
        int pid;
        while (in >> pid)
            ::kill(pid, SIGKILL);
    }
    Result<pool::PostMortemRecord> dead = fail(ErrorCode::NotFound, "");
    for (int i = 0; i < 100 && !dead; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        dead = m_pool->postMortems().get(crashed);
    }
    ASSERT_TRUE(dead) << "no post-mortem for a sandbox whose init died";
    EXPECT_EQ(dead->reason, "crashed");
    EXPECT_EQ(dead->sessionId, "s-crash");
    ASSERT_FALSE(dead->snapshotRef.empty()) << dead->snapshotError;
    EXPECT_EQ(m_pool->snapshots().read(dead->snapshotRef, "left.txt", 0, 0)->content, "before the crash");
    EXPECT_TRUE(m_pool->release(crashed));

    auto s1 = m_pool->postMortems().list("s-exit", 0);
    ASSERT_EQ(s1.size(), 1u);
    EXPECT_EQ(s1[0].sandboxId, id);
    EXPECT_EQ(m_pool->postMortems().list("", 0).front().sandboxId, crashed);
}

TEST_F(PoolPostMortem, ACommandKilledBySigsysIsNamedASeccompKill)
{
    // The sandbox's own filter answers EPERM; a program that loads a killing filter of its own
    // dies by SIGSYS, which the post-mortem names (here the shell sends it to itself).
    const std::string id = claim("s-sigsys");
    auto r = run(id, {"/bin/sh", "-c", "kill -SYS $$"});
    EXPECT_EQ(r.exit.signal, SIGSYS);
    auto pm = m_pool->postMortems().get(id);
    ASSERT_TRUE(pm);
    EXPECT_EQ(pm->reason, "seccomp_killed");
    EXPECT_NE(pm->detail.find("SIGSYS: a seccomp filter refused a system call"), std::string::npos) << pm->detail;
}

TEST_F(PoolPostMortem, SnapshotRestoresIntoAnotherSandboxAndACorruptOneIsDataLoss)
{
    auto stub = serve();
    const std::string a = claim(), b = claim();
    ASSERT_TRUE(m_pool->writeFile(a, "src/main.c", "int main(void) { return 42; }\n", 0644));
    run(a, {"/bin/sh", "-c", "mkdir -p build && ln -s ../src/main.c build/link"});

    grpc::ClientContext c1;
    v1::SnapshotRequest sreq;
    sreq.set_sandbox_id(a);
    v1::SnapshotResponse snap;
    ASSERT_TRUE(stub->Snapshot(&c1, sreq, &snap).ok());
    EXPECT_GT(snap.size_bytes(), 0);
    EXPECT_EQ(snap.file_count(), 4);

    grpc::ClientContext c2;
    v1::RestoreRequest rreq;
    rreq.set_sandbox_id(b);
    rreq.set_snapshot_ref(snap.snapshot_ref());
    v1::RestoreResponse restored;
    auto st = stub->Restore(&c2, rreq, &restored);
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::string out;
    run(b, {"cat", "build/link"}, 60000, &out);
    EXPECT_EQ(out, "int main(void) { return 42; }\n");

    // Listing and reading over gRPC, without a sandbox.
    grpc::ClientContext c3;
    v1::ListSnapshotFilesRequest lreq;
    lreq.set_snapshot_ref(snap.snapshot_ref());
    lreq.set_path_prefix("src");
    v1::ListSnapshotFilesResponse listed;
    ASSERT_TRUE(stub->ListSnapshotFiles(&c3, lreq, &listed).ok());
    ASSERT_EQ(listed.files_size(), 2);
    EXPECT_EQ(listed.files(1).path(), "src/main.c");

    // Damage the archive: Restore is DATA_LOSS naming the ref, and b keeps what it had.
    ASSERT_TRUE(m_pool->writeFile(b, "mine.txt", "keep me", 0644));
    const fs::path archive = m_pool->snapshots().dir() / (snap.snapshot_ref() + ".tar.zst");
    fs::resize_file(archive, fs::file_size(archive) / 2);
    grpc::ClientContext c4;
    st = stub->Restore(&c4, rreq, &restored);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS);
    EXPECT_NE(st.error_message().find(snap.snapshot_ref()), std::string::npos) << st.error_message();
    out.clear();
    run(b, {"cat", "mine.txt", "src/main.c"}, 60000, &out);
    EXPECT_EQ(out, "keep meint main(void) { return 42; }\n");

    grpc::ClientContext c5;
    rreq.set_snapshot_ref("lite-unknown-9");
    EXPECT_EQ(stub->Restore(&c5, rreq, &restored).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(PoolPostMortem, GrpcListAndGet)
{
    auto stub = serve();
    const std::string id = claim("grpc-s");
    run(id, {"/bin/sh", "-c", "echo out; exit 7"});
    grpc::ClientContext c1;
    v1::ListPostMortemsRequest lreq;
    lreq.set_session_id("grpc-s");
    v1::ListPostMortemsResponse list;
    ASSERT_TRUE(stub->ListPostMortems(&c1, lreq, &list).ok());
    ASSERT_EQ(list.post_mortems_size(), 1);
    EXPECT_EQ(list.post_mortems(0).reason(), "nonzero_exit");
    EXPECT_EQ(list.post_mortems(0).pool_id(), "pm-test");
    EXPECT_TRUE(list.post_mortems(0).last_stdout().empty()) << "lists leave output out";
    grpc::ClientContext c2;
    v1::GetPostMortemRequest greq;
    greq.set_sandbox_id(id);
    v1::PostMortem pm;
    ASSERT_TRUE(stub->GetPostMortem(&c2, greq, &pm).ok());
    EXPECT_EQ(pm.exit_code(), 7);
    EXPECT_EQ(pm.last_stdout(), "out\n");
    EXPECT_EQ(pm.limits().memory_bytes(), kMemoryLimit);
    grpc::ClientContext c3;
    greq.set_sandbox_id("lite-nothing");
    EXPECT_EQ(stub->GetPostMortem(&c3, greq, &pm).error_code(), grpc::StatusCode::NOT_FOUND);
}

// The cost of a failure's capture, against a plain exec: printed, not asserted.
TEST_F(PoolPostMortem, CaptureCostIsPrinted)
{
    const std::string id = claim();
    run(id, {"/bin/sh", "-c", "mkdir -p src && for i in $(seq 1 200); do head -c 10240 /dev/urandom > src/f$i; done"});
    const int runs = 5;
    double okMs = 0, failMs = 0, snapMs = 0;
    for (int i = 0; i < runs; ++i) {
        int64_t t0 = monotonicUs();
        run(id, {"true"});
        okMs += static_cast<double>(monotonicUs() - t0) / 1000.0;
        t0 = monotonicUs();
        run(id, {"false"});
        failMs += static_cast<double>(monotonicUs() - t0) / 1000.0;
        snapMs += m_pool->postMortems().get(id)->snapshotMs;
    }
    auto pm = m_pool->postMortems().get(id);
    ASSERT_TRUE(pm);
    std::printf("post-mortem capture, 200 files x 10 KiB (%lld-byte archive): exec 'true' %.2f ms, exec 'false' "
                "with capture %.2f ms (of which snapshot %.2f ms); capture adds %.1fx a plain exec\n",
                static_cast<long long>(pm->snapshotSizeBytes), okMs / runs, failMs / runs, snapMs / runs,
                (failMs - okMs) / okMs);
}
