// The broker's operator calls against a pool client the test controls: debug shells are opened
// on the post-mortem's pool from its snapshot, every step is in the failed session's log before
// the caller hears back, an idle shell is closed and its sandbox released, a shell that cannot be
// audited is not opened, and a pool that does not answer is named in the post-mortem list while
// the others are still listed. With the broker's archive, a post-mortem of a pool that is gone is
// still listed and read, its workspace files come from the checkpoint store and its debug shell
// opens on another pool. The store, the checkpoint store, the service and gRPC are real (a unix
// socket).

#include "broker/checkpoints/checkpoint_files.h"
#include "broker/checkpoints/local_blob_store.h"
#include "broker/server/broker_api.h"
#include "common/clock.h"
#include "broker/server/stream_hub.h"
#include "broker/server/unix_listener.h"
#include "rpc/broker_stubs.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/support/fake_pool_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using nlohmann::json;

namespace {

// A post-mortem of a sandbox of the lite tier, killed for its memory.
pool_client::PostMortemInfo postMortem(const std::string &sandbox, const std::string &session, const std::string &ref,
                                       int64_t time)
{
    pool_client::PostMortemInfo pm;
    pm.sandboxId = sandbox;
    pm.sessionId = session;
    pm.tier = "lite";
    pm.reason = "oom_killed";
    pm.snapshotRef = ref;
    pm.timeUnixMs = time;
    return pm;
}

class OperatorServiceTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-operator-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        auto store = store::openSqliteEventStore(m_dir / "broker.db");
        ASSERT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        store::AppendRequest created;
        created.sessionId = "s-1";
        created.expectedLastSeq = 0;
        created.events.push_back(core::NewEvent{core::kind::SessionCreated, R"({"agent":"a","goal":"g","model":"scripted"})", 0});
        ASSERT_TRUE(m_store->appendSync(created));
        auto pool = std::make_unique<test::FakePoolClient>("east");
        m_pool = pool.get();
        m_pool->setTier("lite", 1, 0, 8);
        m_pool->setSnapshots(true);
        m_pool->failRestoreOf("damaged-1", Error{ErrorCode::FailedPrecondition,
                                                 "snapshot 'damaged-1' is damaged (checksum mismatch)"});
        // "ran <command>", streamed too; `false` exits 1.
        m_pool->setExecHook([](const pool_client::ExecSpec &spec,
                               const pool_client::OutputSink &sink) -> Result<pool_client::ExecOutcome> {
            pool_client::ExecOutcome out;
            out.stdoutData = "ran " + spec.argv.back() + "\n";
            out.exitCode = spec.argv.back() == "false" ? 1 : 0;
            if (sink)
                sink(1, out.stdoutData);
            return out;
        });
        m_pools.add(std::move(pool), false);
        auto down = std::make_unique<test::FakePoolClient>("west");
        m_west = down.get();
        down->setDown(true);
        m_pools.add(std::move(down), false);
        m_pool->addPostMortem(postMortem("lite-failed", "s-1", "lite-failed-1", 2000));
        m_pool->addPostMortem(postMortem("lite-older", "s-other", "lite-older-1", 1000));
        m_pool->addPostMortem(postMortem("lite-nosession", "", "lite-nosession-1", 500));
        m_pool->addPostMortem(postMortem("lite-damaged", "s-1", "damaged-1", 400));
    }
    void start(int64_t idleMs)
    {
        m_hub = std::make_unique<server::StreamHub>(*m_store);
        m_hub->start();
        server::ServiceOptions options;
        options.debugShellIdleTimeoutMs = idleMs;
        options.postMortems = m_archive.get();
        options.checkpointer = m_checkpointer.get();
        m_service = std::make_unique<server::BrokerApi>(*m_store, *m_hub, m_pools,
                                                            [](const std::string &) -> llm::ModelAdapter * { return nullptr; },
                                                            options);
        // The broker's own listener: peer credentials make this process's user the admin.
        auto listener = server::UnixListener::listen(m_dir / "b.sock", 0600);
        ASSERT_TRUE(listener) << listener.error().message;
        m_listener = std::move(*listener);
        grpc::ServerBuilder builder;
        const std::string address = "unix:" + (m_dir / "b.sock").string();
        m_service->registerOn(builder);
        m_server = builder.BuildAndStart();
        ASSERT_TRUE(m_server);
        m_listener->start(m_server.get(), std::make_shared<const auth::PrincipalMap>(
                                              auth::PrincipalMap::embeddedDefault(::getuid())));
        m_stub = std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    void TearDown() override
    {
        if (m_listener)
            m_listener->stop();
        if (m_server)
            m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        if (m_hub)
            m_hub->beginShutdown();
        m_service.reset();
        if (m_hub)
            m_hub->stop();
        m_server.reset();
        if (m_store)
            m_store->close();
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    // What the pool was asked to claim, as "<tier> <session>".
    std::vector<std::string> claims() const
    {
        std::vector<std::string> out;
        for (const auto &claim : m_pool->claims())
            out.push_back(claim.tier + " " + claim.sessionId);
        return out;
    }

    std::vector<json> audit(const std::string &session = "s-1")
    {
        std::vector<json> out;
        auto events = m_store->readEvents(session, 1, 1000);
        EXPECT_TRUE(events);
        for (const auto &e : *events)
            if (e.kind.rfind("debug_shell.", 0) == 0)
                out.push_back(json{{"kind", e.kind}, {"payload", json::parse(e.payload)}});
        return out;
    }

    grpc::Status open(const std::string &pool, const std::string &sandbox, v1::DebugShell *shell, const std::string &tier = "")
    {
        grpc::ClientContext ctx;
        ctx.AddMetadata("paddock-user", "alice");
        v1::OpenDebugShellRequest req;
        req.set_pool(pool);
        req.set_sandbox_id(sandbox);
        req.set_tier(tier);
        return m_stub->operations->OpenDebugShell(&ctx, req, shell);
    }

    grpc::Status exec(const std::string &shell, const std::string &line, std::string *out)
    {
        grpc::ClientContext ctx;
        v1::DebugExecRequest req;
        req.set_shell_id(shell);
        req.add_argv("/bin/sh");
        req.add_argv("-c");
        req.add_argv(line);
        auto reader = m_stub->operations->DebugExec(&ctx, req);
        v1::ExecResponse msg;
        while (reader->Read(&msg))
            *out += msg.stdout();
        return reader->Finish();
    }

    // The broker's archive and checkpoint store, for the tests of a pool that is gone.
    void withArchive()
    {
        auto blobs = checkpoints::LocalBlobStore::open(m_dir / "checkpoints");
        ASSERT_TRUE(blobs) << blobs.error().message;
        m_checkpoints = std::make_unique<checkpoints::CheckpointStore>(std::move(*blobs), "broker");
        m_checkpointer = std::make_unique<checkpoints::Checkpointer>(*m_checkpoints);
        m_archive = std::make_unique<checkpoints::PostMortemArchive>(
            *m_checkpoints, m_pools, [this](const std::string &id) { return m_store->readEvents(id, 1, 1000); });
    }

    fs::path m_dir;
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<checkpoints::CheckpointStore> m_checkpoints;
    std::unique_ptr<checkpoints::Checkpointer> m_checkpointer;
    std::unique_ptr<checkpoints::PostMortemArchive> m_archive;
    placement::PoolSet m_pools;
    test::FakePoolClient *m_pool = nullptr;
    test::FakePoolClient *m_west = nullptr;
    std::unique_ptr<server::StreamHub> m_hub;
    std::unique_ptr<server::BrokerApi> m_service;
    std::unique_ptr<server::UnixListener> m_listener;
    std::unique_ptr<grpc::Server> m_server;
    std::unique_ptr<rpc::BrokerStubs> m_stub;
};

} // namespace

TEST_F(OperatorServiceTest, ShellIsRestoredFromTheSnapshotAndEveryStepIsAudited)
{
    start(600000);
    v1::DebugShell shell;
    auto st = open("east", "lite-failed", &shell, "standard");
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(shell.session_id(), "s-1");
    EXPECT_EQ(shell.tier(), "standard");
    EXPECT_EQ(shell.snapshot_ref(), "lite-failed-1");
    EXPECT_EQ(claims(), std::vector<std::string>{"standard s-1:debug"});
    EXPECT_EQ(m_pool->restores(), std::vector<std::string>{shell.sandbox_id() + " <- lite-failed-1"});

    std::string out;
    st = exec(shell.shell_id(), "make test", &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out, "ran make test\n");

    grpc::ClientContext ctx;
    v1::CloseDebugShellRequest creq;
    creq.set_shell_id(shell.shell_id());
    v1::CloseDebugShellResponse cresp;
    ASSERT_TRUE(m_stub->operations->CloseDebugShell(&ctx, creq, &cresp).ok());
    EXPECT_EQ(m_pool->releases(), std::vector<std::string>{shell.sandbox_id()});

    auto events = audit();
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0]["kind"], "debug_shell.opened");
    EXPECT_EQ(events[0]["payload"]["by"], auth::userName(::getuid())) << "by comes from the peer credentials";
    EXPECT_EQ(events[0]["payload"]["client_user"], "alice");
    EXPECT_EQ(events[1]["kind"], "debug_shell.exec");
    EXPECT_EQ(events[1]["payload"]["argv"].back(), "make test");
    EXPECT_EQ(events[1]["payload"]["exit_code"], 0);
    EXPECT_EQ(events[2]["kind"], "debug_shell.closed");
    EXPECT_EQ(events[2]["payload"]["reason"], "closed");

    // Closed: a command after it is NOT_FOUND, and runs nowhere.
    out.clear();
    EXPECT_EQ(exec(shell.shell_id(), "ls", &out).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(m_pool->execs().size(), 1u);
}

TEST_F(OperatorServiceTest, IdleShellIsClosedAndItsSandboxReleased)
{
    start(200);
    v1::DebugShell shell;
    ASSERT_TRUE(open("east", "lite-failed", &shell).ok());
    // The reaper releases first and records the close after: wait for the record (reading the
    // releases before it could find none yet, and the audit could still be short).
    auto events = audit();
    for (int i = 0; i < 100 && events.size() < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        events = audit();
    }
    ASSERT_EQ(m_pool->releases(), std::vector<std::string>{shell.sandbox_id()});
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1]["kind"], "debug_shell.closed");
    EXPECT_EQ(events[1]["payload"]["reason"], "idle");
    std::string out;
    EXPECT_EQ(exec(shell.shell_id(), "ls", &out).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(OperatorServiceTest, RefusalsNameTheProblemAndLeaveNothingClaimed)
{
    start(600000);
    v1::DebugShell shell;
    auto st = open("nowhere", "lite-failed", &shell);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(st.error_message().find("east, west"), std::string::npos) << st.error_message();
    st = open("east", "lite-nothing", &shell);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
    // No session to audit in: not opened, nothing claimed.
    st = open("east", "lite-nosession", &shell);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_TRUE(claims().empty());
    // A session this broker does not have: claimed, the audit fails, released, refused.
    m_pool->addPostMortem(postMortem("lite-stranger", "s-unknown", "lite-stranger-1", 100));
    st = open("east", "lite-stranger", &shell);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("audited"), std::string::npos) << st.error_message();
    // A damaged snapshot: the claimed sandbox goes back, the pool's message comes through.
    st = open("east", "lite-damaged", &shell);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("snapshot 'damaged-1' is damaged"), std::string::npos);
    EXPECT_EQ(claims().size(), 2u);
    EXPECT_EQ(m_pool->releases().size(), 2u);
    EXPECT_TRUE(audit().empty());
}

TEST_F(OperatorServiceTest, ListNamesAPoolThatDoesNotAnswerAndListsTheOthers)
{
    start(600000);
    grpc::ClientContext ctx;
    v1::ListPoolPostMortemsRequest req;
    v1::ListPoolPostMortemsResponse resp;
    ASSERT_TRUE(m_stub->operations->ListPostMortems(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.post_mortems_size(), 4);
    EXPECT_EQ(resp.post_mortems(0).sandbox_id(), "lite-failed");   // newest first
    EXPECT_EQ(resp.post_mortems(0).pool(), "east");
    ASSERT_EQ(resp.pool_errors_size(), 1);
    EXPECT_EQ(resp.pool_errors(0).pool(), "west");

    grpc::ClientContext ctx2;
    req.set_session_id("s-1");
    v1::ListPoolPostMortemsResponse one;
    ASSERT_TRUE(m_stub->operations->ListPostMortems(&ctx2, req, &one).ok());
    EXPECT_EQ(one.post_mortems_size(), 2);
}

// West fails a sandbox of session s-1, the archive copies the post-mortem, then west goes away for
// good. The operator still lists and reads the post-mortem, browses and downloads the workspace
// (the checkpoint recorded with the failed command) and opens a debug shell on east from it.
TEST_F(OperatorServiceTest, APostMortemOfAPoolThatIsGoneIsServedFromTheArchive)
{
    withArchive();
    m_west->setDown(false);
    m_west->setTier("lite", 1, 0, 8);
    m_west->setSnapshots(true);
    auto sandbox = m_west->claim("lite", "s-1", "k");
    ASSERT_TRUE(sandbox);
    auto taken = m_checkpointer->take(*m_west, sandbox->sandboxId, "");
    ASSERT_TRUE(taken) << taken.error().error.message;
    const int64_t failedAt = nowUnixMs();
    store::AppendRequest step;
    step.sessionId = "s-1";
    step.events.push_back({core::kind::ToolResult, json{{"call_id", "c1"}, {"exit_code", 137}}.dump(), 0});
    step.events.push_back({core::kind::Checkpoint, json{{"manifest", taken->manifestId}}.dump(), 0});
    ASSERT_TRUE(m_store->appendSync(step));
    m_west->addPostMortem(postMortem(sandbox->sandboxId, "s-1", "west-local-1", failedAt));
    ASSERT_EQ(*m_archive->copyNow(), 5) << "east's four and west's one";
    m_west->setDown(true);
    start(600000);

    grpc::ClientContext ctx;
    v1::ListPoolPostMortemsRequest req;
    req.set_pool("west");
    v1::ListPoolPostMortemsResponse listed;
    ASSERT_TRUE(m_stub->operations->ListPostMortems(&ctx, req, &listed).ok());
    ASSERT_EQ(listed.post_mortems_size(), 1);
    const v1::PostMortem &pm = listed.post_mortems(0);
    EXPECT_TRUE(pm.archived());
    EXPECT_EQ(pm.pool(), "west");
    EXPECT_EQ(pm.snapshot_ref(), "checkpoint:" + taken->manifestId);
    ASSERT_EQ(listed.pool_errors_size(), 1);
    EXPECT_NE(listed.pool_errors(0).error().find("archive"), std::string::npos) << listed.pool_errors(0).error();

    grpc::ClientContext filesCtx;
    v1::ListPoolSnapshotFilesRequest filesReq;
    filesReq.set_pool("west");
    filesReq.set_snapshot_ref(pm.snapshot_ref());
    v1::ListSnapshotFilesResponse files;
    ASSERT_TRUE(m_stub->operations->ListSnapshotFiles(&filesCtx, filesReq, &files).ok());
    ASSERT_EQ(files.files_size(), 1);
    grpc::ClientContext readCtx;
    v1::ReadPoolSnapshotFileRequest readReq;
    readReq.set_pool("west");
    readReq.set_snapshot_ref(pm.snapshot_ref());
    readReq.set_path(files.files(0).path());
    auto reader = m_stub->operations->ReadSnapshotFile(&readCtx, readReq);
    std::string content;
    v1::FileChunk chunk;
    while (reader->Read(&chunk))
        content += chunk.data();
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_EQ(content, sandbox->sandboxId + " 1\n") << "the fake pool's first checkpointed file";

    v1::DebugShell shell;
    auto st = open("west", sandbox->sandboxId, &shell);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(shell.pool(), "east") << "west is gone: any pool offering the tier";
    EXPECT_EQ(m_pool->restores(), std::vector<std::string>{shell.sandbox_id() + " <- " + taken->manifestId});
    const auto audited = audit();
    ASSERT_FALSE(audited.empty());
    EXPECT_EQ(audited.back()["payload"].value("archived", false), true);
}
