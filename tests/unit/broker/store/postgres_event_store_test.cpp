// What only the PostgreSQL store has: its refusals at open (a wrong password, a server that is not
// there, a schema from a newer Paddock, another application's database), migrations, the SQL
// translation, and a server that goes away mid-run and comes back. Everything both backends share
// is in the parameterised suites (EventStoreTest, LeaseTest, SessionListTest).
#include "store_test_support.h"

#include "broker/store/auth_tables.h"
#include "broker/store/pg_handle.h"

#include <atomic>
#include <map>
#include <thread>

namespace paddock::store::test {
namespace {

using paddock::test::StartedPostgres;

class PostgresEventStoreTest : public paddock::test::FreshPostgresTest {
protected:
    PostgresEventStoreTest() : FreshPostgresTest("pgstore") {}
};

TEST_F(PostgresEventStoreTest, WrongPasswordNamesUserAndSocketNotThePassword)
{
    ASSERT_EQ(m_server->addPasswordRole("broker_user", "the-right-one", m_database), "");
    const std::string conninfo = m_server->connectionString(m_database, "broker_user") + " password=not-the-secret";
    auto store = openPostgresEventStore(conninfo);
    ASSERT_FALSE(store);
    const auto &message = store.error().message;
    EXPECT_EQ(store.error().code, ErrorCode::PermissionDenied) << message;
    EXPECT_NE(message.find("broker_user"), std::string::npos) << message;
    EXPECT_NE(message.find(m_server->socketDir().string()), std::string::npos) << message;
    EXPECT_NE(message.find("password authentication failed"), std::string::npos) << message;
    EXPECT_NE(message.find("PGPASSFILE"), std::string::npos) << message;
    EXPECT_EQ(message.find("not-the-secret"), std::string::npos) << message;

    // The right password through the environment, as the docs say: never in a config file.
    ::setenv("PGPASSWORD", "the-right-one", 1);
    auto opened = openPostgresEventStore(m_server->connectionString(m_database, "broker_user"));
    ::unsetenv("PGPASSWORD");
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_TRUE((*opened)->appendSync(createRequest("s1")));
}

TEST_F(PostgresEventStoreTest, ServerThatIsNotThereIsUnavailableNamingTheAddress)
{
    const std::string missing = (m_server->socketDir() / "nowhere").string();
    auto store = openPostgresEventStore("host=" + missing + " dbname=paddock user=paddock connect_timeout=2");
    ASSERT_FALSE(store);
    const auto &message = store.error().message;
    EXPECT_EQ(store.error().code, ErrorCode::Unavailable) << message;
    EXPECT_NE(message.find(missing), std::string::npos) << message;
    EXPECT_NE(message.find("Start the server"), std::string::npos) << message;

    // A URI works too, and its password is not repeated either.
    auto uri = openPostgresEventStore("postgresql://paddock:hunter2@/paddock?host=" + missing);
    ASSERT_FALSE(uri);
    EXPECT_EQ(uri.error().code, ErrorCode::Unavailable);
    EXPECT_EQ(uri.error().message.find("hunter2"), std::string::npos) << uri.error().message;
}

TEST_F(PostgresEventStoreTest, RefusesASchemaFromANewerPaddock)
{
    {
        auto store = openPostgresEventStore(m_server->connectionString(m_database));
        ASSERT_TRUE(store) << store.error().message;
        ASSERT_TRUE((*store)->appendSync(createRequest("kept")));
    }
    ASSERT_EQ(m_server->exec("UPDATE paddock_schema SET version = 99", m_database), "");
    auto store = openPostgresEventStore(m_server->connectionString(m_database));
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    const auto &message = store.error().message;
    EXPECT_NE(message.find("version 99"), std::string::npos) << message;
    EXPECT_NE(message.find("up to version " + std::to_string(postgresSchemaVersion())), std::string::npos) << message;
    EXPECT_NE(message.find("Upgrade Paddock"), std::string::npos) << message;
    EXPECT_NE(message.find(m_database), std::string::npos) << message;
    // Refused before touching anything: the data is still there for the newer build.
    ASSERT_EQ(m_server->exec("UPDATE paddock_schema SET version = " + std::to_string(postgresSchemaVersion()), m_database),
              "");
    auto again = openPostgresEventStore(m_server->connectionString(m_database));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE((*again)->getSession("kept"));
}

TEST_F(PostgresEventStoreTest, RefusesAnotherApplicationsDatabase)
{
    ASSERT_EQ(m_server->exec("CREATE TABLE events(id integer)", m_database), "");
    auto store = openPostgresEventStore(m_server->connectionString(m_database));
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(store.error().message.find("another application"), std::string::npos) << store.error().message;
}

TEST_F(PostgresEventStoreTest, UpgradesASchemaOfVersionTwo)
{
    {
        auto store = openPostgresEventStore(m_server->connectionString(m_database));
        ASSERT_TRUE(store) << store.error().message;
        ASSERT_TRUE((*store)->appendSync(createRequest("old")));
    }
    ASSERT_EQ(m_server->exec("DROP TABLE cost_entries, review_items, review_fetches, agent_records, agents, decisions, "
                             "leases, submit_requests, brokers, otlp_export; DROP SEQUENCE lease_tokens, lease_order; "
                             "UPDATE paddock_schema SET version = 2",
                             m_database),
              "");
    auto store = openPostgresEventStore(m_server->connectionString(m_database));
    ASSERT_TRUE(store) << store.error().message;
    auto version = (*store)->query({"SELECT version FROM paddock_schema", {}});
    ASSERT_TRUE(version) << version.error().message;
    EXPECT_EQ(std::get<int64_t>((*version)[0][0]), postgresSchemaVersion());
    // The session made before the upgrade got its lease row, so it can be leased.
    auto lease = (*store)->acquireLease("w", 60'000, 0);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease->sessionId, "old");
}

TEST(PostgresSqlTranslationTest, ParametersAndTypes)
{
    EXPECT_EQ(pg::translate("SELECT a FROM t WHERE b = ?1 AND c = ?2 LIMIT ?3"),
              "SELECT a FROM t WHERE b = $1 AND c = $2 LIMIT $3");
    EXPECT_EQ(pg::translate("SELECT ? , ?, ?5, ?"), "SELECT $1 , $2, $5, $6");
    EXPECT_EQ(pg::translate("SELECT '?1', \"a?\" FROM t WHERE x = ?1"), "SELECT '?1', \"a?\" FROM t WHERE x = $1");
    EXPECT_EQ(pg::translate("SELECT 'it''s ?' WHERE y = ?2"), "SELECT 'it''s ?' WHERE y = $2");
    EXPECT_EQ(pg::translateDdl("CREATE TABLE t(ord INTEGER PRIMARY KEY, n INTEGER NOT NULL, f REAL, integers TEXT)"),
              "CREATE TABLE t(ord BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, "
              "f DOUBLE PRECISION, integers TEXT)");
}

// The side tables through the portable SQL: audit and token statements ride with appends and read
// back through query(), with the same values as on SQLite.
TEST_F(PostgresEventStoreTest, TablesBesideTheLogTakeThePortableSql)
{
    auto opened = openPostgresEventStore(m_server->connectionString(m_database));
    ASSERT_TRUE(opened) << opened.error().message;
    auto &store = **opened;
    auth::TokenRecord token;
    token.info = {"t1", "alice", "laptop", 1000, 0, 1000, false};
    token.hash = "hash";
    AppendRequest request;
    request.writes = {tokenInsert(token), tokenTouch("t1", 5000), tokenTouch("t1", 2000),
                      auditInsert({0, 7, "alice", "admin", "CreateToken", "t1", "OK", "for alice"})};
    auto written = store.appendSync(std::move(request));
    ASSERT_TRUE(written) << written.error().message;
    auto tokens = loadTokens(store);
    ASSERT_TRUE(tokens) << tokens.error().message;
    ASSERT_EQ(tokens->size(), 1u);
    EXPECT_EQ((*tokens)[0].info.lastUsedUnixMs, 5000);   // the touch never moves it back
    auto audit = listAudit(store, {});
    ASSERT_TRUE(audit) << audit.error().message;
    ASSERT_EQ(audit->entries.size(), 1u);
    EXPECT_EQ(audit->entries[0].method, "CreateToken");
    EXPECT_GT(audit->entries[0].id, 0);

    // A failing statement fails its request alone, inside a group.
    AppendRequest duplicate;
    duplicate.writes = {tokenInsert(token)};
    auto refused = store.appendSync(std::move(duplicate));
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("tokens"), std::string::npos) << refused.error().message;
    auto counted = store.query({"SELECT count(*), sum(last_used_unix_ms) FROM tokens WHERE principal = ?1", {"alice"}});
    ASSERT_TRUE(counted) << counted.error().message;
    EXPECT_EQ(std::get<int64_t>((*counted)[0][0]), 1);
    EXPECT_EQ(std::get<int64_t>((*counted)[0][1]), 5000);   // sum() of bigints reads as an integer
}

// pg_ctl stop -m immediate mid-run, then start: appends made meanwhile fail Unavailable or succeed
// once it is back; nothing acknowledged is lost; the store reconnects by itself.
TEST(PostgresRestartTest, ServerGoesAwayMidRunAndComesBack)
{
    if (auto missing = StartedPostgres::missingBinary(); !missing.empty())
        GTEST_SKIP() << missing;
    StartedPostgres server;   // its own: this test stops it
    ASSERT_EQ(server.start(), "");
    std::string error;
    const std::string db = server.freshDatabase("restart", &error);
    ASSERT_FALSE(db.empty()) << error;
    PostgresOptions options;
    options.reconnectDelayMs = 20;
    auto opened = openPostgresEventStore(server.connectionString(db), options);
    ASSERT_TRUE(opened) << opened.error().message;
    auto &store = **opened;
    ASSERT_TRUE(store.appendSync(createRequest("s1")));

    std::mutex mutex;
    std::map<int64_t, std::string> acknowledged;   // seq -> payload
    std::atomic<int> unavailable = 0, otherErrors = 0, successes = 0;
    std::atomic<bool> stop = false;
    std::string lastOther;
    std::thread appender([&] {
        for (int i = 0; !stop; ++i) {
            const std::string payload = R"({"n":)" + std::to_string(i) + "}";
            auto result = store.appendSync(appendRequest("s1", AppendRequest::kAnySeq, {event("tool.call", payload)}));
            if (result) {
                std::lock_guard lock(mutex);
                acknowledged[result->events[0].seq] = payload;
                ++successes;
            } else if (result.error().code == ErrorCode::Unavailable) {
                ++unavailable;
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            } else {
                std::lock_guard lock(mutex);
                lastOther = result.error().message;
                ++otherErrors;
            }
        }
    });
    auto waitFor = [](auto condition) {
        for (int i = 0; i < 30'000 && !condition(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return condition();
    };
    EXPECT_TRUE(waitFor([&] { return successes >= 50; }));
    server.stop("immediate");
    EXPECT_TRUE(waitFor([&] { return unavailable >= 5; }));
    const int before = successes;
    ASSERT_EQ(server.start(), "");
    EXPECT_TRUE(waitFor([&] { return successes >= before + 50; })) << "the store did not reconnect";
    stop = true;
    appender.join();
    EXPECT_EQ(otherErrors.load(), 0) << lastOther;

    auto events = store.readEvents("s1", 1, 1 << 30);
    ASSERT_TRUE(events) << events.error().message;
    for (size_t i = 0; i < events->size(); ++i)
        ASSERT_EQ((*events)[i].seq, static_cast<int64_t>(i) + 1);   // dense
    std::map<int64_t, std::string> stored;
    for (const auto &e : *events)
        stored[e.seq] = e.payload;
    for (const auto &[seq, payload] : acknowledged) {
        ASSERT_TRUE(stored.contains(seq)) << "acknowledged seq " << seq << " was lost";
        EXPECT_EQ(stored[seq], payload) << seq;
    }
    auto state = store.getSession("s1");
    ASSERT_TRUE(state) << state.error().message;
    EXPECT_EQ(state->lastSeq, static_cast<int64_t>(events->size()));
}

} // namespace
} // namespace paddock::store::test
