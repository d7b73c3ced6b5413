// `paddockd migrate`'s copy (broker/store/store_migration.h): a SQLite store with sessions, events
// with costs, reviews, decisions, agents and their records, tokens, audit and submit request ids, copied into a fresh
// PostgreSQL database of the test's own server (tests/support/started_postgres.h). Every event is
// compared field by field (seq and time included), every table row by row, and the target is then
// used as a broker would (appends go on at the right seq, new rows get new ids). Also: a target
// that holds rows is refused (and --merge adds to it), a count that differs rolls everything back,
// progress, and the list of copied tables against the schema.
#include "store_test_support.h"

#include "broker/store/agent_store.h"
#include "broker/store/auth_tables.h"
#include "broker/store/state_json.h"
#include "broker/store/store_migration.h"
#include "broker/store/submit_requests.h"

#include <chrono>
#include <climits>
#include <set>
#include <thread>

namespace paddock::store::test {
namespace {

using paddock::test::StartedPostgres;

// A payload with what COPY's text format must escape: tab, newline, carriage return, backslash,
// and text beyond ASCII.
const std::string kAwkwardPayload = "{\"note\":\"line one\nline two\ttabbed\r \\\\N and \\\\ caf\xC3\xA9 \xE2\x9C\x93\"}";

class StoreMigrationTest : public paddock::test::FreshPostgresTest {
protected:
    StoreMigrationTest() : FreshPostgresTest("migrate") {}

    std::unique_ptr<EventStore> openTarget()
    {
        auto opened = openPostgresEventStore(conninfo());
        if (!opened) {
            ADD_FAILURE() << opened.error().message;
            return nullptr;
        }
        return std::move(*opened);
    }

    Result<MigrationReport> migrate(bool merge = false, std::function<void(const MigrationProgress &)> progress = {})
    {
        MigrationOptions options;
        options.from = m_dir.db();
        options.toConninfo = conninfo();
        options.merge = merge;
        options.progress = std::move(progress);
        return migrateToPostgres(options);
    }

    // A store with a bit of everything: sessions of several agents, events with costs, a review
    // requested, fetched and decided, a decision and its outcome, agents with records, a token,
    // audit records. idPrefix keeps the sessions of two such stores apart.
    static void fill(EventStore &store, const std::string &idPrefix, int sessions)
    {
        for (int i = 0; i < sessions; ++i) {
            const std::string id = idPrefix + std::to_string(i);
            ASSERT_TRUE(store.appendSync(createRequest(id, i % 2 ? "builder" : "reviewer", "goal " + std::to_string(i))));
            std::vector<core::NewEvent> events;
            events.push_back(event(core::kind::StateChanged, R"({"status":"running"})"));
            for (int step = 0; step < 5 + i; ++step) {
                events.push_back(event(core::kind::ToolCall, R"({"tool":"run_command","step":)" + std::to_string(step) + "}"));
                events.push_back(event(core::kind::Cost,
                                       R"({"kind":"model","agent":"builder","tier":"lite","model":"scripted"})",
                                       1000 + step * 7 + i));
            }
            events.push_back(event(core::kind::ToolOutput, kAwkwardPayload));
            ASSERT_TRUE(store.appendSync(appendRequest(id, 1, std::move(events))));
        }
        const std::string first = idPrefix + "0";
        const std::string review = idPrefix + "review";
        const std::string decision = idPrefix + "decision";
        ASSERT_TRUE(store.appendSync(appendRequest(
            first, AppendRequest::kAnySeq,
            {event(core::kind::ApprovalRequested,
                   R"({"review_id":")" + review + R"(","kind":"bulk_change","risk":"medium","requester":"bob",)"
                       R"("agent":"builder","expires_unix_ms":0,"change_hash":"abc"})"),
             event(core::kind::ApprovalFetched, R"({"review_id":")" + review + R"(","principal":"alice"})"),
             event(core::kind::ApprovalDecided,
                   R"({"review_id":")" + review + R"(","approved":true,"decider":"alice","reason":"fine"})"),
             event(core::kind::EnvDecision,
                   R"({"id":")" + decision + R"(","agent":"builder","trigger":"claim","requested_tier":"lite",)"
                       R"("chosen_tier":"lite","chooser":"platform","rule":"r","reason":"why","who":"engine",)"
                       R"("verdict":"ok","alternatives":[{"tier":"lite"}]})"),
             event(core::kind::EnvOutcome,
                   R"({"decision_id":")" + decision + R"(","outcome":"ok","peak_memory_bytes":1024,)"
                       R"("mean_cpu_fraction":0.25,"throttled_fraction":0.125})")})));
        // A finished session: the projection of one that is not live.
        ASSERT_TRUE(store.appendSync(statusRequest(idPrefix + std::to_string(sessions - 1), "succeeded")));

        auto agentStore = AgentStore::open(store);
        ASSERT_TRUE(agentStore) << agentStore.error().message;
        agents::Agent agent;
        agent.name = idPrefix + "agent";
        agent.owner = "alice";
        agent.allowedTiers = {"lite", "standard"};
        agent.budgetPerDayMicros = 50000;
        agent.records = {{"style", R"({"tabs":false})"}, {"notes", R"("two\nlines")"}};
        ASSERT_TRUE((*agentStore)->create(agent));

        auth::TokenRecord token;
        token.info.id = idPrefix + "token";
        token.info.principal = "demo-bot";
        token.info.description = "ci";
        token.info.createdUnixMs = 1700000000000;
        token.hash = "deadbeef";
        AppendRequest writes;
        writes.sessionId = "";
        writes.writes.push_back(tokenInsert(token));
        for (int i = 0; i < 3; ++i)
            writes.writes.push_back(auditInsert({0, 1700000000000 + i, "alice", "admin", "SubmitSession", first, "OK",
                                                 "detail " + std::to_string(i)}));
        // The request id of a submit (submit_requests.h), so a retry after the move finds its session.
        writes.writes.push_back(submitRequestInsert({"alice", idPrefix + "request", first, "fingerprint", 1700000000000}));
        // The OTLP exporter's cursor of a session (otlp_export_schema.h), so a moved store does not export it again.
        writes.writes.push_back({"INSERT INTO otlp_export(session_id, span_seq, metric_seq, owner, lease_until_ms, "
                                 "updated_unix_ms) VALUES(?1, 3, 2, '', 0, 1700000000000)",
                                 {first}});
        ASSERT_TRUE(store.appendSync(std::move(writes)));
    }

    void makeSource(int sessions)
    {
        auto source = openOrDie(m_dir.db());
        ASSERT_TRUE(source);
        fill(*source, "s", sessions);
        source->close();
        // The copy happens later than every event was recorded: were times re-stamped, they would differ.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }

    static std::vector<SqlRow> rowsOf(EventStore &store, const std::string &table)
    {
        static const std::map<std::string, std::string> kOrder = {
            {"sessions", "ord"}, {"events", "session_id, seq"}, {"cost_entries", "session_id, seq"},
            {"review_items", "ord"}, {"review_fetches", "review_id, principal"}, {"decisions", "ord"},
            {"agents", "name"}, {"agent_records", "agent, key"}, {"tokens", "id"}, {"audit", "id"},
            {"submit_requests", "principal, request_id"}, {"otlp_export", "session_id"}};
        auto rows = store.query({"SELECT * FROM " + table + " ORDER BY " + kOrder.at(table), {}});
        EXPECT_TRUE(rows) << table << ": " << rows.error().message;
        return rows ? *rows : std::vector<SqlRow>{};
    }

    TempDir m_dir;
};

TEST_F(StoreMigrationTest, EveryEventAndEveryRowArrivesAsItWas)
{
    makeSource(6);
    auto report = migrate();
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->committed);
    EXPECT_TRUE(report->mismatches.empty()) << report->mismatches.front();
    EXPECT_EQ(report->sessionsChecked, 6);
    ASSERT_EQ(report->tables.size(), migratedTables().size());
    for (const auto &count : report->tables) {
        EXPECT_EQ(count.targetAfter, count.source) << count.table;
        EXPECT_EQ(count.targetBefore, 0) << count.table;
        EXPECT_GT(count.source, 0) << count.table << ": the test's store should hold rows of every table";
    }

    auto source = openOrDie(m_dir.db());
    auto target = openTarget();
    ASSERT_TRUE(source && target);
    SessionQuery all;
    all.pageSize = 1000;
    auto sourceSessions = source->listSessions(all);
    auto targetSessions = target->listSessions(all);
    ASSERT_TRUE(sourceSessions && targetSessions);
    ASSERT_EQ(sourceSessions->sessions.size(), 6u);
    ASSERT_EQ(targetSessions->sessions.size(), 6u);
    for (size_t i = 0; i < sourceSessions->sessions.size(); ++i) {
        const auto &session = sourceSessions->sessions[i];
        EXPECT_EQ(targetSessions->sessions[i].id, session.id) << "the same order, newest first";
        EXPECT_EQ(sessionStateToJson(targetSessions->sessions[i]), sessionStateToJson(session));
        auto before = source->readEvents(session.id, 1, INT_MAX);
        auto after = target->readEvents(session.id, 1, INT_MAX);
        ASSERT_TRUE(before && after);
        ASSERT_EQ(after->size(), before->size()) << session.id;
        for (size_t e = 0; e < before->size(); ++e) {
            const auto &was = (*before)[e];
            const auto &is = (*after)[e];
            EXPECT_EQ(is.seq, was.seq);
            EXPECT_EQ(is.timeUnixMs, was.timeUnixMs) << session.id << " seq " << was.seq;
            EXPECT_EQ(is.kind, was.kind);
            EXPECT_EQ(is.payload, was.payload);
            EXPECT_EQ(is.costMicros, was.costMicros);
        }
    }
    for (const auto &table : migratedTables())
        EXPECT_EQ(rowsOf(*target, table), rowsOf(*source, table)) << "table " << table;
}

TEST_F(StoreMigrationTest, TheTargetThenWorksAsABrokersOwn)
{
    makeSource(3);
    ASSERT_TRUE(migrate());
    auto target = openTarget();
    ASSERT_TRUE(target);

    // An unfinished session goes on where its log ends.
    auto tail = target->getSession("s1");
    ASSERT_TRUE(tail);
    auto appended = target->appendSync(appendRequest("s1", tail->lastSeq, {event(core::kind::ToolCall, "{}")}));
    ASSERT_TRUE(appended) << appended.error().message;
    EXPECT_EQ(appended->events.front().seq, tail->lastSeq + 1);

    // New rows get ids past the copied ones: the newest session lists first, new audit and review
    // rows do not collide with copied ones.
    ASSERT_TRUE(target->appendSync(createRequest("fresh")));
    SessionQuery newest;
    newest.pageSize = 1;
    auto page = target->listSessions(newest);
    ASSERT_TRUE(page);
    ASSERT_EQ(page->sessions.size(), 1u);
    EXPECT_EQ(page->sessions.front().id, "fresh");
    AppendRequest audit;
    audit.writes.push_back(auditInsert({0, 1800000000000, "alice", "admin", "Cancel", "fresh", "OK", ""}));
    EXPECT_TRUE(target->appendSync(std::move(audit)));
    EXPECT_TRUE(target->appendSync(appendRequest(
        "fresh", 1,
        {event(core::kind::ApprovalRequested, R"({"review_id":"r-new","kind":"bulk_change","risk":"low",)"
                                              R"("requester":"bob","agent":"builder","change_hash":"x"})")})));

    // A worker leases a session that needs work (every copied session has its lease row).
    auto lease = target->acquireLease("worker-1", 10000, 2000);
    EXPECT_TRUE(lease.has_value());
}

TEST_F(StoreMigrationTest, ATargetThatHoldsRowsIsRefusedAndLeftAlone)
{
    makeSource(2);
    {
        auto target = openTarget();
        ASSERT_TRUE(target);
        ASSERT_TRUE(target->appendSync(createRequest("already-there")));
        target->close();
    }
    auto report = migrate();
    ASSERT_FALSE(report);
    EXPECT_EQ(report.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(report.error().message.find("already holds rows (1 in sessions, 1 in events)"), std::string::npos)
        << report.error().message;
    EXPECT_NE(report.error().message.find("--merge"), std::string::npos) << report.error().message;
    EXPECT_NE(report.error().message.find("createdb"), std::string::npos) << report.error().message;

    auto target = openTarget();
    ASSERT_TRUE(target);
    auto sessions = target->listSessions({});
    ASSERT_TRUE(sessions);
    ASSERT_EQ(sessions->sessions.size(), 1u);
    EXPECT_EQ(sessions->sessions.front().id, "already-there");
}

TEST_F(StoreMigrationTest, MergeAddsAfterTheTargetsOwnAndRefusesASessionBothHold)
{
    makeSource(3);
    {
        auto target = openTarget();
        ASSERT_TRUE(target);
        fill(*target, "t", 2);
        target->close();
    }
    auto report = migrate(/*merge=*/true);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->committed);
    EXPECT_TRUE(report->mismatches.empty()) << report->mismatches.front();
    for (const auto &count : report->tables)
        EXPECT_EQ(count.targetAfter, count.targetBefore + count.source) << count.table;

    auto target = openTarget();
    ASSERT_TRUE(target);
    SessionQuery all;
    all.pageSize = 100;
    auto page = target->listSessions(all);
    ASSERT_TRUE(page);
    std::vector<std::string> ids;
    for (const auto &session : page->sessions)
        ids.push_back(session.id);
    // Newest first: the merged store's sessions come after (so list before) the target's own.
    EXPECT_EQ(ids, (std::vector<std::string>{"s2", "s1", "s0", "t1", "t0"}));
    target->close();

    // Again: every session of the source is now in the target too. Refused, naming one, nothing written.
    auto again = migrate(/*merge=*/true);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("(id)=(s"), std::string::npos) << again.error().message;
    EXPECT_NE(again.error().message.find("nothing was written"), std::string::npos) << again.error().message;
    auto reopened = openTarget();
    ASSERT_TRUE(reopened);
    auto count = reopened->query({"SELECT count(*) FROM sessions", {}});
    ASSERT_TRUE(count);
    EXPECT_EQ(std::get<int64_t>(count->at(0).at(0)), 5);
}

TEST_F(StoreMigrationTest, ACountThatDiffersRollsEverythingBackNamingTheTable)
{
    makeSource(2);
    {
        auto target = openTarget();   // the schema, then a trigger that loses one agent record
        ASSERT_TRUE(target);
        target->close();
    }
    ASSERT_EQ(m_server->exec("CREATE FUNCTION lose_notes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                             "IF NEW.key = 'notes' THEN RETURN NULL; END IF; RETURN NEW; END $$; "
                             "CREATE TRIGGER lose_notes BEFORE INSERT ON agent_records FOR EACH ROW "
                             "EXECUTE FUNCTION lose_notes()",
                             m_database),
              "");
    auto report = migrate();
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_FALSE(report->committed);
    ASSERT_EQ(report->mismatches.size(), 1u);
    EXPECT_NE(report->mismatches.front().find("table agent_records: 2 rows in the source, 1 copied"), std::string::npos)
        << report->mismatches.front();

    auto target = openTarget();
    ASSERT_TRUE(target);
    for (const auto &table : migratedTables()) {
        auto count = target->query({"SELECT count(*) FROM " + table, {}});
        ASSERT_TRUE(count);
        EXPECT_EQ(std::get<int64_t>(count->at(0).at(0)), 0) << table << ": nothing may be committed";
    }
}

TEST_F(StoreMigrationTest, ProgressCountsSessionsAndEventsToTheEnd)
{
    makeSource(5);
    std::vector<MigrationProgress> seen;
    auto report = migrate(false, [&](const MigrationProgress &progress) { seen.push_back(progress); });
    ASSERT_TRUE(report) << report.error().message;
    ASSERT_FALSE(seen.empty());
    for (size_t i = 1; i < seen.size(); ++i) {
        EXPECT_GE(seen[i].sessionsCopied, seen[i - 1].sessionsCopied);
        EXPECT_GE(seen[i].eventsCopied, seen[i - 1].eventsCopied);
    }
    EXPECT_EQ(seen.back().sessionsCopied, 5);
    EXPECT_EQ(seen.back().sessionsTotal, 5);
    EXPECT_EQ(seen.back().eventsCopied, seen.back().eventsTotal);
    EXPECT_EQ(seen.back().eventsTotal, report->tables[1].source);
}

TEST_F(StoreMigrationTest, SourcesThatCannotBeReadAreNamed)
{
    MigrationOptions options;
    options.from = m_dir.path() / "nothing-here.db";
    options.toConninfo = conninfo();
    auto missing = migrateToPostgres(options);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(missing.error().message.find("nothing-here.db is not a file"), std::string::npos)
        << missing.error().message;
    EXPECT_FALSE(std::filesystem::exists(options.from)) << "a missing source must not be created";

    makeSource(1);
    auto running = openOrDie(m_dir.db());   // as a broker still running on it
    ASSERT_TRUE(running);
    auto held = migrate();
    ASSERT_FALSE(held);
    EXPECT_NE(held.error().message.find("in use by another paddockd"), std::string::npos) << held.error().message;
}

TEST_F(StoreMigrationTest, ATargetFromANewerPaddockIsRefused)
{
    makeSource(1);
    {
        auto target = openTarget();
        ASSERT_TRUE(target);
        target->close();
    }
    ASSERT_EQ(m_server->exec("UPDATE paddock_schema SET version = 99", m_database), "");
    auto report = migrate();
    ASSERT_FALSE(report);
    EXPECT_EQ(report.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(report.error().message.find("schema version 99"), std::string::npos) << report.error().message;
}

TEST(StoreMigrationTables, EveryTableOfTheSchemaIsCopied)
{
    TempDir dir;
    auto store = openOrDie(dir.db());
    ASSERT_TRUE(store);
    auto tables = store->query({"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", {}});
    ASSERT_TRUE(tables);
    std::set<std::string> schema;
    for (const auto &row : *tables)
        schema.insert(std::get<std::string>(row.at(0)));
    const auto copied = migratedTables();
    EXPECT_EQ(schema, std::set<std::string>(copied.begin(), copied.end()))
        << "a table added to the schema must be added to store_migration.cpp's kTables";
    EXPECT_EQ(copied.front(), "sessions");
    EXPECT_EQ(copied.at(1), "events");
}

// Figures, not a check of speed: how long a larger store takes (printed, and recorded in the
// test's XML output).
TEST_F(StoreMigrationTest, ALargerStoreCopies)
{
    constexpr int kSessions = 200;
    constexpr int kEventsPerSession = 500;
    {
        auto source = openOrDie(m_dir.db());
        ASSERT_TRUE(source);
        for (int i = 0; i < kSessions; ++i) {
            const std::string id = "big" + std::to_string(i);
            ASSERT_TRUE(source->appendSync(createRequest(id)));
            std::vector<core::NewEvent> events;
            for (int e = 1; e < kEventsPerSession; ++e)
                events.push_back(e % 4 == 0 ? event(core::kind::Cost, R"({"kind":"model","model":"scripted"})", e)
                                            : event(core::kind::ToolOutput, R"({"text":"a line of output, as a command prints it"})"));
            ASSERT_TRUE(source->appendSync(appendRequest(id, 1, std::move(events))));
        }
        source->close();
    }
    int progressCalls = 0;
    auto report = migrate(false, [&](const MigrationProgress &) { ++progressCalls; });
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->committed);
    EXPECT_EQ(report->tables[1].targetAfter, int64_t{kSessions} * kEventsPerSession);
    EXPECT_GE(progressCalls, kSessions);
    std::printf("migrated %d sessions, %d events in %lld ms\n", kSessions, kSessions * kEventsPerSession,
                static_cast<long long>(report->elapsedMs));
    RecordProperty("migrate_ms", std::to_string(report->elapsedMs));
}

} // namespace
} // namespace paddock::store::test
