#pragma once
// Helpers for the store tests: a temporary directory per test, request builders, and StoreTest,
// the fixture that runs a test against both backends (SQLite in a temporary directory, PostgreSQL
// in a fresh database of the test process's own server, tests/support/started_postgres.h).

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/support/started_postgres.h"
#include "tests/support/store_backend.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

namespace paddock::store::test {

class TempDir {
public:
    TempDir()
    {
        std::random_device rd;
        m_path = std::filesystem::temp_directory_path()
            / ("paddock-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
        std::filesystem::create_directories(m_path);
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    const std::filesystem::path &path() const { return m_path; }
    std::filesystem::path db() const { return m_path / "broker.db"; }

private:
    std::filesystem::path m_path;
};

inline core::NewEvent event(std::string kind, std::string payload = "{}", int64_t costMicros = 0)
{
    return core::NewEvent{std::move(kind), std::move(payload), costMicros};
}

inline AppendRequest createRequest(const std::string &id, const std::string &agent = "builder",
                                   const std::string &goal = "do the thing", const std::string &playbook = "")
{
    AppendRequest request;
    request.sessionId = id;
    request.expectedLastSeq = 0;
    request.events.push_back(event(core::kind::SessionCreated,
                                   R"({"agent":")" + agent + R"(","goal":")" + goal + R"(","playbook":")" + playbook
                                       + R"(","model":"scripted"})"));
    return request;
}

inline AppendRequest appendRequest(const std::string &id, int64_t expectedLastSeq, std::vector<core::NewEvent> events)
{
    AppendRequest request;
    request.sessionId = id;
    request.expectedLastSeq = expectedLastSeq;
    request.events = std::move(events);
    return request;
}

inline AppendRequest statusRequest(const std::string &id, const std::string &status)
{
    return appendRequest(id, AppendRequest::kAnySeq,
                         {event(core::kind::StateChanged, R"({"status":")" + status + R"("})")});
}

inline std::unique_ptr<EventStore> openOrDie(const std::filesystem::path &path, const SqliteOptions &options = {})
{
    auto store = openSqliteEventStore(path, options);
    if (!store) {
        ADD_FAILURE() << "open failed: " << store.error().message;
        return nullptr;
    }
    return std::move(*store);
}

using paddock::test::StoreBackend;

// Grouping settings, the same for both backends.
struct StoreOptions {
    int maxBatchEvents = 10000;
    int maxBatchDelayUs = 1000;
};

// A store of the test's backend: location() is the same for every open() of one test, so a test
// can close and reopen its store.
class StoreTest : public ::testing::TestWithParam<StoreBackend> {
protected:
    void SetUp() override
    {
        if (GetParam() != StoreBackend::Postgres)
            return;
        std::string why;
        m_server = paddock::test::sharedPostgres(&why);
        if (!m_server) {
            if (!paddock::test::StartedPostgres::missingBinary().empty())
                GTEST_SKIP() << why;
            FAIL() << why;
        }
        std::string error;
        m_database = m_server->freshDatabase("store", &error);
        ASSERT_FALSE(m_database.empty()) << error;
    }

    bool postgres() const { return GetParam() == StoreBackend::Postgres; }

    // The database file (SQLite) or the connection string (PostgreSQL).
    std::string location() const
    {
        return postgres() ? m_server->connectionString(m_database) : m_dir.db().string();
    }

    Result<std::unique_ptr<EventStore>> tryOpen(const StoreOptions &options = {}) const
    {
        if (postgres()) {
            PostgresOptions pgOptions;
            pgOptions.maxBatchEvents = options.maxBatchEvents;
            pgOptions.maxBatchDelayUs = options.maxBatchDelayUs;
            return openPostgresEventStore(location(), pgOptions);
        }
        SqliteOptions sqliteOptions;
        sqliteOptions.maxBatchEvents = options.maxBatchEvents;
        sqliteOptions.maxBatchDelayUs = options.maxBatchDelayUs;
        return openSqliteEventStore(m_dir.db(), sqliteOptions);
    }

    std::unique_ptr<EventStore> open(const StoreOptions &options = {}) const
    {
        auto store = tryOpen(options);
        if (!store) {
            ADD_FAILURE() << "open failed: " << store.error().message;
            return nullptr;
        }
        return std::move(*store);
    }

    TempDir m_dir;
    paddock::test::StartedPostgres *m_server = nullptr;
    std::string m_database;
};

#define PADDOCK_BOTH_STORE_BACKENDS(suite) INSTANTIATE_TEST_SUITE_P(Backends, suite, PADDOCK_STORE_BACKENDS)

} // namespace paddock::store::test
