// The event store on both backends (EventStoreTest, parameterised): appends, compare-and-append,
// grouping, reopen, refusals, listeners, close. SqliteEventStoreTest: what only the SQLite file
// has (its header, PRAGMA user_version, the lock file); PostgreSQL's own refusals are in
// postgres_event_store_test.cpp.
#include "store_test_support.h"

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace paddock::store::test {
namespace {

using core::kind::ToolCall;
using core::kind::ToolResult;

// Holds the writer thread inside a commit listener until released, so a test can queue appends
// while it knows the writer is busy: grouping becomes deterministic, no sleeps.
class WriterGate {
public:
    explicit WriterGate(EventStore &store) : m_store(store)
    {
        m_id = store.addCommitListener([this](const CommitNotice &notice) {
            std::unique_lock lock(m_mutex);
            ++m_commits;
            m_events += static_cast<int>(notice.events.size());
            m_changed.notify_all();
            m_changed.wait(lock, [&] { return m_open; });
        });
    }
    ~WriterGate()
    {
        open();
        m_store.removeCommitListener(m_id);
    }
    void waitForCommits(int commits)
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [&] { return m_commits >= commits; });
    }
    void open()
    {
        {
            std::lock_guard lock(m_mutex);
            m_open = true;
        }
        m_changed.notify_all();
    }
    int commits()
    {
        std::lock_guard lock(m_mutex);
        return m_commits;
    }
    int events()
    {
        std::lock_guard lock(m_mutex);
        return m_events;
    }
    int id() const { return m_id; }

private:
    EventStore &m_store;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    int m_commits = 0;
    int m_events = 0;
    bool m_open = false;
    int m_id = 0;
};

class EventStoreTest : public StoreTest {};
PADDOCK_BOTH_STORE_BACKENDS(EventStoreTest);

void expectDense(EventStore &store, const std::string &id, int64_t count)
{
    auto events = store.readEvents(id, 1, 1 << 30);
    ASSERT_TRUE(events) << events.error().message;
    ASSERT_EQ(static_cast<int64_t>(events->size()), count) << id;
    for (size_t i = 0; i < events->size(); ++i)
        ASSERT_EQ((*events)[i].seq, static_cast<int64_t>(i) + 1) << id;
}

TEST_P(EventStoreTest, CreateAppendRead)
{
    auto store = open();
    ASSERT_TRUE(store);
    auto created = store->appendSync(createRequest("s1", "builder", "compile hello"));
    ASSERT_TRUE(created) << created.error().message;
    ASSERT_EQ(created->events.size(), 1u);
    EXPECT_EQ(created->events[0].seq, 1);
    EXPECT_GT(created->events[0].timeUnixMs, 0);
    EXPECT_EQ(created->state.status, core::SessionStatus::Queued);
    EXPECT_EQ(created->state.goal, "compile hello");

    auto appended = store->appendSync(
        appendRequest("s1", 1, {event(ToolCall, R"({"tool":"run_command"})"), event(ToolResult, "{}", 42)}));
    ASSERT_TRUE(appended) << appended.error().message;
    EXPECT_EQ(appended->events[0].seq, 2);
    EXPECT_EQ(appended->events[1].seq, 3);
    EXPECT_EQ(appended->state.steps, 1);
    EXPECT_EQ(appended->state.costMicros, 42);
    EXPECT_EQ(appended->state.lastSeq, 3);

    auto events = store->readEvents("s1", 2, 10);
    ASSERT_TRUE(events) << events.error().message;
    ASSERT_EQ(events->size(), 2u);
    EXPECT_EQ((*events)[0].kind, ToolCall);
    EXPECT_EQ((*events)[0].payload, R"({"tool":"run_command"})");
    EXPECT_EQ((*events)[1].costMicros, 42);
    EXPECT_GE((*events)[1].timeUnixMs, created->events[0].timeUnixMs);

    auto limited = store->readEvents("s1", 1, 2);
    ASSERT_TRUE(limited);
    EXPECT_EQ(limited->size(), 2u);
    auto beyond = store->readEvents("s1", 10, 10);
    ASSERT_TRUE(beyond);
    EXPECT_TRUE(beyond->empty());

    auto state = store->getSession("s1");
    ASSERT_TRUE(state) << state.error().message;
    EXPECT_EQ(state->lastSeq, 3);
    EXPECT_EQ(state->agent, "builder");
}

TEST_P(EventStoreTest, RefusesMalformedAndMisdirectedRequests)
{
    auto store = open();
    ASSERT_TRUE(store);

    auto noCreated = store->appendSync(appendRequest("s1", 0, {event(ToolCall)}));
    ASSERT_FALSE(noCreated);
    EXPECT_EQ(noCreated.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(noCreated.error().message.find("session.created"), std::string::npos);

    EXPECT_EQ(store->appendSync(appendRequest("s1", 0, {})).error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(store->appendSync(appendRequest("", 0, {event(core::kind::SessionCreated)})).error().code,
              ErrorCode::InvalidArgument);
    EXPECT_EQ(store->appendSync(appendRequest("s1", -5, {event(ToolCall)})).error().code, ErrorCode::InvalidArgument);

    auto unknown = store->appendSync(appendRequest("nope", AppendRequest::kAnySeq, {event(ToolCall)}));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);
    EXPECT_NE(unknown.error().message.find("nope"), std::string::npos);
    EXPECT_EQ(store->appendSync(appendRequest("nope", 3, {event(ToolCall)})).error().code, ErrorCode::NotFound);

    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    EXPECT_EQ(store->appendSync(createRequest("s1")).error().code, ErrorCode::AlreadyExists);
    EXPECT_EQ(store->appendSync(appendRequest("s1", 1, {event(core::kind::SessionCreated)})).error().code,
              ErrorCode::InvalidArgument);
    EXPECT_EQ(store->appendSync(appendRequest("s1", 1, {event(ToolCall, "not json")})).error().code,
              ErrorCode::InvalidArgument);

    EXPECT_EQ(store->readEvents("nope", 1, 10).error().code, ErrorCode::NotFound);
    EXPECT_EQ(store->getSession("nope").error().code, ErrorCode::NotFound);
    EXPECT_EQ(store->readEvents("s1", 1, 0).error().code, ErrorCode::InvalidArgument);
    expectDense(*store, "s1", 1);
}

TEST_P(EventStoreTest, CompareAndAppendConflictWritesNothing)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    ASSERT_TRUE(store->appendSync(appendRequest("s1", 1, {event(ToolCall)})));
    auto lost = store->appendSync(appendRequest("s1", 1, {event(ToolCall), event(ToolResult)}));
    ASSERT_FALSE(lost);
    EXPECT_EQ(lost.error().code, ErrorCode::Aborted);
    EXPECT_NE(lost.error().message.find("ends at seq 2"), std::string::npos) << lost.error().message;
    expectDense(*store, "s1", 2);
    EXPECT_EQ(store->getSession("s1")->lastSeq, 2);
}

TEST_P(EventStoreTest, FailingRequestInAGroupFailsAlone)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    ASSERT_TRUE(store->appendSync(createRequest("s2")));
    WriterGate gate(*store);
    auto first = store->append(createRequest("s0"));
    gate.waitForCommits(1);   // the writer is now parked in the listener
    auto good1 = store->append(appendRequest("s1", 1, {event(ToolCall)}));
    auto bad = store->append(appendRequest("s2", 7, {event(ToolCall)}));
    auto good2 = store->append(appendRequest("s2", 1, {event(ToolCall), event(ToolResult)}));
    auto dup = store->append(createRequest("s1"));
    auto good3 = store->append(appendRequest("s1", 2, {event(ToolResult)}));   // sees good1 in the same group
    gate.open();
    EXPECT_TRUE(first.get());
    auto r1 = good1.get();
    auto rBad = bad.get();
    auto r2 = good2.get();
    auto rDup = dup.get();
    auto r3 = good3.get();
    ASSERT_TRUE(r1) << r1.error().message;
    ASSERT_TRUE(r2) << r2.error().message;
    ASSERT_TRUE(r3) << r3.error().message;
    ASSERT_FALSE(rBad);
    EXPECT_EQ(rBad.error().code, ErrorCode::Aborted);
    ASSERT_FALSE(rDup);
    EXPECT_EQ(rDup.error().code, ErrorCode::AlreadyExists);
    EXPECT_EQ(r3->events[0].seq, 3);
    EXPECT_EQ(gate.commits(), 2);   // the five queued requests went in one transaction
    expectDense(*store, "s1", 3);
    expectDense(*store, "s2", 3);
}

TEST_P(EventStoreTest, GroupedCommitsActuallyGroup)
{
    StoreOptions options;
    options.maxBatchEvents = 30;
    auto store = open(options);
    ASSERT_TRUE(store);
    WriterGate gate(*store);
    auto first = store->append(createRequest("s0"));
    gate.waitForCommits(1);
    std::vector<std::future<Result<AppendResult>>> futures;
    for (int i = 0; i < 100; ++i)
        futures.push_back(store->append(createRequest("s" + std::to_string(i + 1))));
    gate.open();
    for (auto &future : futures)
        ASSERT_TRUE(future.get());
    // 100 single-event appends queued behind a busy writer: groups of at most 30 events.
    EXPECT_EQ(gate.commits(), 1 + 4);
    EXPECT_EQ(gate.events(), 101);
}

TEST_P(EventStoreTest, DenseSeqsUnderConcurrentAppenders)
{
    auto store = open();
    ASSERT_TRUE(store);
    constexpr int kSessions = 4;
    constexpr int kThreads = 8;
    constexpr int kAppendsPerThread = 150;
    for (int s = 0; s < kSessions; ++s)
        ASSERT_TRUE(store->appendSync(createRequest("s" + std::to_string(s))));

    std::atomic<int64_t> appended[kSessions] = {};
    std::atomic<int> failures = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kAppendsPerThread; ++i) {
                const int s = (t + i) % kSessions;
                const std::string id = "s" + std::to_string(s);
                const int n = 1 + (i % 3);
                std::vector<core::NewEvent> events(n, event(ToolCall, R"({"n":1})"));
                if (t % 2 == 0) {
                    // Blind appends.
                    auto result = store->appendSync(appendRequest(id, AppendRequest::kAnySeq, events));
                    if (!result)
                        ++failures;
                    else
                        appended[s] += n;
                } else {
                    // Compare-and-append, re-reading after each lost race like a step worker.
                    for (;;) {
                        auto state = store->getSession(id);
                        if (!state) {
                            ++failures;
                            break;
                        }
                        auto result = store->appendSync(appendRequest(id, state->lastSeq, events));
                        if (result) {
                            appended[s] += n;
                            break;
                        }
                        if (result.error().code != ErrorCode::Aborted) {
                            ++failures;
                            break;
                        }
                    }
                }
            }
        });
    }
    for (auto &thread : threads)
        thread.join();
    EXPECT_EQ(failures.load(), 0);
    for (int s = 0; s < kSessions; ++s) {
        const std::string id = "s" + std::to_string(s);
        expectDense(*store, id, 1 + appended[s].load());
        EXPECT_EQ(store->getSession(id)->lastSeq, 1 + appended[s].load());
    }
}

TEST_P(EventStoreTest, ReopenKeepsEverythingAndProjectionIsTheFold)
{
    {
        auto store = open();
        ASSERT_TRUE(store);
        ASSERT_TRUE(store->appendSync(createRequest("a", "builder", "first")));
        ASSERT_TRUE(store->appendSync(createRequest("b", "tester", "second")));
        ASSERT_TRUE(store->appendSync(statusRequest("a", "running")));
        ASSERT_TRUE(store->appendSync(appendRequest(
            "a", AppendRequest::kAnySeq,
            {event(core::kind::SandboxClaimed, R"({"sandbox_id":"sb1","pool":"local","tier":"lite"})"),
             event(ToolResult, "{}", 17), event(core::kind::StateChanged, R"({"status":"succeeded"})")})));
        ASSERT_TRUE(store->appendSync(statusRequest("b", "cancelled")));
        // A late event for a finished session (read back from the projection, not memory).
        ASSERT_TRUE(store->appendSync(appendRequest("b", AppendRequest::kAnySeq, {event(core::kind::Checkpoint)})));
        store->close();
    }
    auto store = open();
    ASSERT_TRUE(store);
    for (const char *id : {"a", "b"}) {
        auto events = store->readEvents(id, 1, 1000);
        ASSERT_TRUE(events);
        auto state = store->getSession(id);
        ASSERT_TRUE(state);
        const auto folded = core::foldEvents(*events);
        EXPECT_EQ(state->id, folded.id);
        EXPECT_EQ(state->agent, folded.agent);
        EXPECT_EQ(state->goal, folded.goal);
        EXPECT_EQ(state->status, folded.status);
        EXPECT_EQ(state->sandboxId, folded.sandboxId);
        EXPECT_EQ(state->pool, folded.pool);
        EXPECT_EQ(state->tier, folded.tier);
        EXPECT_EQ(state->steps, folded.steps);
        EXPECT_EQ(state->costMicros, folded.costMicros);
        EXPECT_EQ(state->createdUnixMs, folded.createdUnixMs);
        EXPECT_EQ(state->updatedUnixMs, folded.updatedUnixMs);
        EXPECT_EQ(state->lastSeq, folded.lastSeq);
        EXPECT_EQ(state->lastEventKind, folded.lastEventKind);
    }
    EXPECT_EQ(store->getSession("a")->status, core::SessionStatus::Succeeded);
    EXPECT_EQ(store->getSession("a")->sandboxId, "sb1");
    EXPECT_EQ(store->getSession("b")->lastSeq, 3);
    // Appends continue at the stored tails.
    auto next = store->appendSync(appendRequest("a", 5, {event(core::kind::SandboxReleased)}));
    ASSERT_TRUE(next) << next.error().message;
    EXPECT_EQ(next->events[0].seq, 6);
}

TEST(SqliteEventStoreTest, RefusesADatabaseFromTheFuture)
{
    TempDir dir;
    {
        auto store = openOrDie(dir.db());
        ASSERT_TRUE(store);
    }
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.db().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);

    auto store = openSqliteEventStore(dir.db());
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    const auto &message = store.error().message;
    EXPECT_NE(message.find(dir.db().string()), std::string::npos) << message;
    EXPECT_NE(message.find("version 99"), std::string::npos) << message;
    EXPECT_NE(message.find("up to version " + std::to_string(sqliteSchemaVersion())), std::string::npos) << message;
    EXPECT_NE(message.find("Upgrade Paddock"), std::string::npos) << message;
    EXPECT_NE(message.find("--data-dir"), std::string::npos) << message;
}

TEST(SqliteEventStoreTest, UpgradesADatabaseOfSchemaVersionTwo)
{
    // Version 2 had the auth tables (audit, tokens) and not the governance ones: make such a file
    // from a current one, then open it.
    TempDir dir;
    {
        auto store = openOrDie(dir.db());
        ASSERT_TRUE(store);
    }
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.db().c_str(), &db), SQLITE_OK);
    const char *downgrade = "DROP TABLE cost_entries; DROP TABLE review_items; DROP TABLE review_fetches; "
                            "DROP TABLE agent_records; DROP TABLE agents; DROP TABLE decisions; DROP TABLE submit_requests; "
                            "DROP TABLE otlp_export; "
                            "PRAGMA user_version=2;";
    ASSERT_EQ(sqlite3_exec(db, downgrade, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);

    auto store = openSqliteEventStore(dir.db());
    ASSERT_TRUE(store) << store.error().message;
    store->reset();
    ASSERT_EQ(sqlite3_open(dir.db().c_str(), &db), SQLITE_OK);
    int version = 0;
    int tables = 0;
    sqlite3_exec(db, "PRAGMA user_version", [](void *out, int, char **values, char **) {
        *static_cast<int *>(out) = std::atoi(values[0]);
        return 0;
    }, &version, nullptr);
    sqlite3_exec(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('audit', 'tokens', "
                     "'cost_entries', 'review_items', 'review_fetches', 'agents', 'agent_records', 'decisions', "
                     "'submit_requests', 'otlp_export')",
                 [](void *out, int, char **values, char **) {
                     *static_cast<int *>(out) = std::atoi(values[0]);
                     return 0;
                 }, &tables, nullptr);
    sqlite3_close(db);
    EXPECT_EQ(version, sqliteSchemaVersion());
    EXPECT_EQ(tables, 10) << "every table of versions 2 to " << sqliteSchemaVersion();
}

TEST(SqliteEventStoreTest, RefusesAFileThatIsNotADatabase)
{
    TempDir dir;
    {
        std::ofstream out(dir.db());
        out << "this is a text file, long enough to have a header that SQLite reads and rejects.\n";
        for (int i = 0; i < 100; ++i)
            out << "padding padding padding padding padding padding padding padding\n";
    }
    auto store = openSqliteEventStore(dir.db());
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(store.error().message.find("not a SQLite database"), std::string::npos) << store.error().message;
    EXPECT_NE(store.error().message.find(dir.db().string()), std::string::npos);
}

TEST(SqliteEventStoreTest, RefusesAnotherApplicationsDatabase)
{
    TempDir dir;
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open(dir.db().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    auto store = openSqliteEventStore(dir.db());
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(store.error().message.find("another application"), std::string::npos) << store.error().message;
}

TEST(SqliteEventStoreTest, SecondOpenIsRefusedUntilTheFirstCloses)
{
    TempDir dir;
    auto first = openOrDie(dir.db());
    ASSERT_TRUE(first);
    auto second = openSqliteEventStore(dir.db());
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(second.error().message.find(dir.db().string()), std::string::npos) << second.error().message;
    EXPECT_NE(second.error().message.find("another paddockd"), std::string::npos) << second.error().message;
    first.reset();
    auto third = openSqliteEventStore(dir.db());
    EXPECT_TRUE(third) << third.error().message;
}

TEST_P(EventStoreTest, CommitListenerReceivesEventsAndSessions)
{
    auto store = open();
    ASSERT_TRUE(store);
    std::mutex mutex;
    std::vector<CommitNotice> notices;
    const int id = store->addCommitListener([&](const CommitNotice &notice) {
        std::lock_guard lock(mutex);
        notices.push_back(notice);
    });
    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    ASSERT_TRUE(store->appendSync(appendRequest("s1", 1, {event(ToolCall), event(ToolResult)})));
    {
        std::lock_guard lock(mutex);
        ASSERT_EQ(notices.size(), 2u);   // listeners run before the append's future resolves
        ASSERT_EQ(notices[1].events.size(), 2u);
        EXPECT_EQ(notices[1].events[0].seq, 2);
        EXPECT_EQ(notices[1].events[1].seq, 3);
        ASSERT_EQ(notices[1].sessions.size(), 1u);
        EXPECT_EQ(notices[1].sessions[0].lastSeq, 3);
        EXPECT_EQ(notices[1].sessions[0].steps, 1);
    }
    store->removeCommitListener(id);
    ASSERT_TRUE(store->appendSync(appendRequest("s1", 3, {event(ToolCall)})));
    std::lock_guard lock(mutex);
    EXPECT_EQ(notices.size(), 2u);
}

TEST_P(EventStoreTest, CommitNoticeGroupsEventsBySession)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("a")));
    ASSERT_TRUE(store->appendSync(createRequest("b")));
    std::mutex mutex;
    std::vector<CommitNotice> notices;
    store->addCommitListener([&](const CommitNotice &notice) {
        std::lock_guard lock(mutex);
        notices.push_back(notice);
    });
    WriterGate gate(*store);
    auto first = store->append(appendRequest("a", AppendRequest::kAnySeq, {event(ToolCall)}));
    gate.waitForCommits(1);
    std::vector<std::future<Result<AppendResult>>> futures;
    for (int i = 0; i < 3; ++i) {
        futures.push_back(store->append(appendRequest("a", AppendRequest::kAnySeq, {event(ToolCall)})));
        futures.push_back(store->append(appendRequest("b", AppendRequest::kAnySeq, {event(ToolCall)})));
    }
    gate.open();
    for (auto &future : futures)
        ASSERT_TRUE(future.get());
    std::lock_guard lock(mutex);
    ASSERT_EQ(notices.size(), 2u);
    const auto &events = notices[1].events;
    ASSERT_EQ(events.size(), 6u);
    const std::vector<std::pair<std::string, int64_t>> expected = {{"a", 3}, {"a", 4}, {"a", 5},
                                                                   {"b", 2}, {"b", 3}, {"b", 4}};
    for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i].sessionId, expected[i].first);
        EXPECT_EQ(events[i].seq, expected[i].second);
    }
    EXPECT_EQ(notices[1].sessions.size(), 2u);
}

TEST_P(EventStoreTest, CloseDrainsQueuedAppendsThenRefuses)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    auto gate = std::make_unique<WriterGate>(*store);
    auto first = store->append(appendRequest("s1", AppendRequest::kAnySeq, {event(ToolCall)}));
    gate->waitForCommits(1);
    std::vector<std::future<Result<AppendResult>>> queued;
    for (int i = 0; i < 50; ++i)
        queued.push_back(store->append(appendRequest("s1", AppendRequest::kAnySeq, {event(ToolCall)})));

    std::thread closer([&] { store->close(); });
    // close() has begun once a new append is refused at once.
    for (;;) {
        auto probe = store->append(appendRequest("s1", AppendRequest::kAnySeq, {event(ToolCall)}));
        if (probe.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
            auto result = probe.get();
            ASSERT_FALSE(result);
            EXPECT_EQ(result.error().code, ErrorCode::Unavailable);
            EXPECT_NE(result.error().message.find("the store is closing"), std::string::npos);
            break;
        }
        queued.push_back(std::move(probe));   // queued before close began: must commit too
    }
    gate->open();
    closer.join();
    ASSERT_TRUE(first.get());
    for (auto &future : queued) {
        auto result = future.get();
        EXPECT_TRUE(result) << result.error().message;
    }
    const auto expected = static_cast<int64_t>(2 + queued.size());
    gate.reset();
    store.reset();

    // SQLite: the WAL was checkpointed and truncated on close.
    const std::filesystem::path wal = m_dir.db().string() + "-wal";
    if (!postgres() && std::filesystem::exists(wal)) {
        EXPECT_EQ(std::filesystem::file_size(wal), 0u);
    }
    auto reopened = open();
    ASSERT_TRUE(reopened);
    expectDense(*reopened, "s1", expected);
    EXPECT_EQ(reopened->readEvents("s1", 1, 1)->size(), 1u);
}

TEST_P(EventStoreTest, FullSyncAppendCommits)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("s1")));
    auto request = statusRequest("s1", "paused");
    request.fullSync = true;
    auto result = store->appendSync(std::move(request));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(result->state.status, core::SessionStatus::Paused);
    ASSERT_TRUE(store->appendSync(statusRequest("s1", "running")));
    expectDense(*store, "s1", 3);
}

// appendThen: the answer comes to a callback on the writer thread, after the listeners, grouped
// with the appends that queued beside it; a refusal before queueing comes at once on the caller's.
TEST_P(EventStoreTest, AppendThenAnswersFromTheWriterAfterTheListeners)
{
    auto store = open();
    ASSERT_TRUE(store);
    std::mutex mutex;
    std::condition_variable answered;
    std::vector<std::string> order;   // "listener" and "done <session>", as they happened
    std::set<std::thread::id> writerThreads;
    std::vector<Result<AppendResult>> results;
    store->addCommitListener([&](const CommitNotice &) {
        std::lock_guard lock(mutex);
        order.push_back("listener");
        writerThreads.insert(std::this_thread::get_id());
    });
    auto done = [&](const std::string &name) {
        return [&, name](Result<AppendResult> result) {
            std::lock_guard lock(mutex);
            order.push_back("done " + name);
            writerThreads.insert(std::this_thread::get_id());
            results.push_back(std::move(result));
            answered.notify_all();
        };
    };
    {
        WriterGate gate(*store);
        auto first = store->append(createRequest("s0"));
        gate.waitForCommits(1);
        for (int i = 1; i <= 5; ++i)
            store->appendThen(createRequest("s" + std::to_string(i)), done("s" + std::to_string(i)));
        gate.open();
        ASSERT_TRUE(first.get());
        std::unique_lock lock(mutex);
        answered.wait(lock, [&] { return results.size() == 5; });
        EXPECT_EQ(gate.commits(), 2);   // the five queued behind the busy writer went in one group
    }
    std::lock_guard lock(mutex);
    for (const auto &result : results) {
        ASSERT_TRUE(result) << result.error().message;
        EXPECT_EQ(result->state.lastSeq, 1);
    }
    const std::vector<std::string> expected = {"listener", "listener", "done s1", "done s2", "done s3", "done s4",
                                               "done s5"};
    EXPECT_EQ(order, expected);
    EXPECT_EQ(writerThreads.size(), 1u);
    EXPECT_FALSE(writerThreads.contains(std::this_thread::get_id()));
    expectDense(*store, "s5", 1);
}

TEST_P(EventStoreTest, AppendThenRefusesAtOnceAndAfterClose)
{
    auto store = open();
    ASSERT_TRUE(store);
    std::optional<Result<AppendResult>> refused;
    std::thread::id answeredOn;
    store->appendThen(appendRequest("s1", 0, {event(ToolCall)}), [&](Result<AppendResult> result) {
        refused = std::move(result);
        answeredOn = std::this_thread::get_id();
    });
    ASSERT_TRUE(refused);   // checked before it was queued: answered before appendThen returned
    ASSERT_FALSE(*refused);
    EXPECT_EQ(refused->error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(answeredOn, std::this_thread::get_id());

    // The writer's own refusals (compare-and-append) come through the callback like commits.
    std::promise<Result<AppendResult>> conflict;
    store->appendThen(appendRequest("nobody", 3, {event(ToolCall)}),
                      [&](Result<AppendResult> result) { conflict.set_value(std::move(result)); });
    auto missing = conflict.get_future().get();
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);

    store->close();
    std::optional<Result<AppendResult>> closed;
    store->appendThen(createRequest("s2"), [&](Result<AppendResult> result) { closed = std::move(result); });
    ASSERT_TRUE(closed);
    ASSERT_FALSE(*closed);
    EXPECT_EQ(closed->error().code, ErrorCode::Unavailable);
}

} // namespace
} // namespace paddock::store::test
