// Permissions and audit on the real service: a real gRPC server behind the broker's own unix
// listener (peer credentials via SO_PEERCRED), the real SQLite store. The caller is this test's OS
// user, mapped to whichever principal the test configures.

#include "broker/store/auth_tables.h"
#include "tests/support/in_process_broker.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <unistd.h>

#include <filesystem>

namespace paddock::server {
namespace {

using namespace std::chrono_literals;

class AuthServiceTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path()
            / ("paddock-auth-test-" + std::to_string(::getpid()) + "-"
               + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
    }

    void TearDown() override
    {
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    // Starts the broker with this process's user as principal `name` of `role` (the default when
    // name is empty).
    void start(const std::string &name = {}, auth::Role role = auth::Role::Admin)
    {
        m_broker = std::make_unique<test::InProcessBroker>(m_dir, PADDOCK_PLAYBOOK_DIR);
        if (!name.empty()) {
            auto map = auth::PrincipalMap::fromConfig({{name, role, {}, {::getuid()}, "test:1"}}, ::getuid());
            ASSERT_TRUE(map) << map.error().message;
            m_broker->setPrincipals(std::make_shared<const auth::PrincipalMap>(std::move(*map)));
        }
        auto started = m_broker->start();
        ASSERT_TRUE(started) << started.error().message;
        m_stub = std::make_unique<rpc::BrokerStubs>(m_broker->newChannel());
    }

    std::unique_ptr<grpc::ClientContext> context()
    {
        auto context = std::make_unique<grpc::ClientContext>();
        context->set_deadline(std::chrono::system_clock::now() + 20s);
        return context;
    }

    grpc::Status submit(v1::Session *session)
    {
        v1::SubmitSessionRequest request;
        request.set_playbook("hello-c");   // shipped in resources/playbooks
        return m_stub->sessions->SubmitSession(context().get(), request, session);
    }

    std::vector<store::AuditEntry> audit()
    {
        auto page = store::listAudit(m_broker->store(), {});
        EXPECT_TRUE(page) << page.error().message;
        return page ? page->entries : std::vector<store::AuditEntry>{};
    }

    std::filesystem::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
    std::unique_ptr<rpc::BrokerStubs> m_stub;
};

TEST_F(AuthServiceTest, TheDefaultMakesThisUserAnAdminAndWhoAmISaysSo)
{
    start();
    v1::Principal me;
    auto status = m_stub->access->WhoAmI(context().get(), {}, &me);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(me.name(), auth::userName(::getuid()));
    EXPECT_EQ(me.role(), "admin");
    EXPECT_EQ(me.via(), "unix");
    EXPECT_EQ(me.permitted_methods_size(), static_cast<int>(auth::methodRules().size()));
}

TEST_F(AuthServiceTest, AViewerMayReadButGetsPermissionDeniedOnAMutatingCall)
{
    start("vera", auth::Role::Viewer);
    v1::Principal me;
    ASSERT_TRUE(m_stub->access->WhoAmI(context().get(), {}, &me).ok());
    EXPECT_EQ(me.name(), "vera");
    EXPECT_EQ(me.role(), "viewer");
    const auto &permitted = me.permitted_methods();
    EXPECT_NE(std::find(permitted.begin(), permitted.end(), "ListSessions"), permitted.end());
    EXPECT_EQ(std::find(permitted.begin(), permitted.end(), "CancelSession"), permitted.end());

    v1::ListSessionsResponse list;
    EXPECT_TRUE(m_stub->sessions->ListSessions(context().get(), {}, &list).ok());

    v1::Session session;
    const auto denied = submit(&session);
    ASSERT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    for (const char *word : {"vera", "viewer", "SubmitSession", "engineer", "[[principal]]"})
        EXPECT_NE(denied.error_message().find(word), std::string::npos) << word << " missing: " << denied.error_message();

    v1::SessionActionRequest cancel;
    cancel.set_id("s-anything");
    EXPECT_EQ(m_stub->sessions->CancelSession(context().get(), cancel, &session).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    v1::ListTokensResponse tokens;
    EXPECT_EQ(m_stub->access->ListTokens(context().get(), {}, &tokens).error_code(), grpc::StatusCode::PERMISSION_DENIED);

    // Nothing was created, and every refusal is in the audit log.
    ASSERT_TRUE(m_stub->sessions->ListSessions(context().get(), {}, &list).ok());
    EXPECT_EQ(list.sessions_size(), 0);
    const auto records = audit();
    ASSERT_EQ(records.size(), 3u);
    EXPECT_EQ(records[2].method, "SubmitSession");
    EXPECT_EQ(records[1].method, "CancelSession");
    EXPECT_EQ(records[1].target, "s-anything");
    for (const auto &record : records) {
        EXPECT_EQ(record.principal, "vera");
        EXPECT_EQ(record.role, "viewer");
        EXPECT_EQ(record.result, "PERMISSION_DENIED");
    }
}

TEST_F(AuthServiceTest, EveryMutatingCallLeavesAnAuditRecordAndReadsLeaveNone)
{
    start("erin", auth::Role::Operator);
    v1::Session session;
    ASSERT_TRUE(submit(&session).ok());
    v1::SessionActionRequest action;
    action.set_id(session.id());
    v1::Session after;
    ASSERT_TRUE(m_stub->sessions->PauseSession(context().get(), action, &after).ok());
    ASSERT_TRUE(m_stub->sessions->ResumeSession(context().get(), action, &after).ok());
    action.set_reason("not needed");
    ASSERT_TRUE(m_stub->sessions->CancelSession(context().get(), action, &after).ok());
    // A refused change is recorded with its status.
    EXPECT_EQ(m_stub->sessions->ResumeSession(context().get(), action, &after).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    v1::GetSessionRequest get;
    get.set_id(session.id());
    ASSERT_TRUE(m_stub->sessions->GetSession(context().get(), get, &after).ok());

    v1::ListAuditResponse listed;
    auto status = m_stub->access->ListAudit(context().get(), {}, &listed);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(listed.records_size(), 5);
    const std::vector<std::string> methods = {"ResumeSession", "CancelSession", "ResumeSession", "PauseSession",
                                              "SubmitSession"};
    for (int i = 0; i < 5; ++i) {
        const auto &record = listed.records(i);
        EXPECT_EQ(record.method(), methods[static_cast<size_t>(i)]);
        EXPECT_EQ(record.principal(), "erin");
        EXPECT_EQ(record.role(), "operator");
        EXPECT_EQ(record.target(), session.id());
        EXPECT_EQ(record.result(), i == 0 ? "FAILED_PRECONDITION" : "OK");
        EXPECT_GT(record.time_unix_ms(), 0);
    }
    EXPECT_EQ(listed.records(1).detail(), "not needed");

    v1::ListAuditRequest filtered;
    filtered.set_method("PauseSession");
    ASSERT_TRUE(m_stub->access->ListAudit(context().get(), filtered, &listed).ok());
    EXPECT_EQ(listed.records_size(), 1);
}

TEST_F(AuthServiceTest, AFailingAuditWriteFailsTheCallAndTheSessionIsUnchanged)
{
    start();
    v1::Session session;
    ASSERT_TRUE(submit(&session).ok());
    {
        // Another connection makes every audit insert fail, as a full or broken table would.
        sqlite3 *db = nullptr;
        ASSERT_EQ(sqlite3_open((m_dir / "broker.db").c_str(), &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        char *error = nullptr;
        const int rc = sqlite3_exec(db, "CREATE TRIGGER audit_refuses BEFORE INSERT ON audit "
                                        "BEGIN SELECT RAISE(ABORT, 'audit table refuses writes'); END;",
                                    nullptr, nullptr, &error);
        EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
        sqlite3_free(error);
        sqlite3_close(db);
    }
    v1::SessionActionRequest cancel;
    cancel.set_id(session.id());
    v1::Session after;
    const auto failed = m_stub->sessions->CancelSession(context().get(), cancel, &after);
    ASSERT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_NE(failed.error_message().find("audit table refuses writes"), std::string::npos) << failed.error_message();

    v1::GetSessionRequest get;
    get.set_id(session.id());
    ASSERT_TRUE(m_stub->sessions->GetSession(context().get(), get, &after).ok());
    EXPECT_EQ(after.status(), session.status()) << "the cancel must not have happened";
    EXPECT_EQ(after.last_seq(), session.last_seq());
    EXPECT_EQ(audit().size(), 1u) << "only the submit's record";
}

TEST_F(AuthServiceTest, TokensAreShownOnceStoredHashedListedAndRevoked)
{
    start();
    v1::CreateTokenRequest create;
    create.set_principal(auth::userName(::getuid()));
    create.set_description("laptop");
    create.set_ttl_seconds(3600);
    v1::CreatedToken created;
    auto status = m_stub->access->CreateToken(context().get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(created.token().starts_with("pdk_"));
    EXPECT_GT(created.info().expires_unix_ms(), created.info().created_unix_ms());

    auto rows = m_broker->store().query({"SELECT hash FROM tokens", {}});
    ASSERT_TRUE(rows && rows->size() == 1u);
    EXPECT_EQ(std::get<std::string>(rows->front().front()), auth::sha256Hex(created.token()));

    create.set_principal("nobody-configured");
    EXPECT_EQ(m_stub->access->CreateToken(context().get(), create, &created).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    v1::ListTokensResponse listed;
    ASSERT_TRUE(m_stub->access->ListTokens(context().get(), {}, &listed).ok());
    ASSERT_EQ(listed.tokens_size(), 1);
    EXPECT_FALSE(listed.tokens(0).revoked());

    v1::RevokeTokenRequest revoke;
    revoke.set_id(listed.tokens(0).id());
    v1::TokenInfo info;
    ASSERT_TRUE(m_stub->access->RevokeToken(context().get(), revoke, &info).ok());
    EXPECT_TRUE(info.revoked());
    revoke.set_id("tok-unknown");
    EXPECT_EQ(m_stub->access->RevokeToken(context().get(), revoke, &info).error_code(), grpc::StatusCode::NOT_FOUND);

    const auto records = audit();
    ASSERT_EQ(records.size(), 4u);
    EXPECT_EQ(records[3].method, "CreateToken");
    EXPECT_EQ(records[2].result, "INVALID_ARGUMENT");
    EXPECT_EQ(records[1].method, "RevokeToken");
    EXPECT_EQ(records[1].result, "OK");
    EXPECT_EQ(records[0].result, "NOT_FOUND");
}

} // namespace
} // namespace paddock::server
