#pragma once
// The store backends a test runs against (INSTANTIATE_TEST_SUITE_P(..., PADDOCK_STORE_BACKENDS, ...)):
// SQLite in a file of the test's directory, PostgreSQL in a fresh database of the test process's
// own server (started_postgres.h). A test of the tables beside the log takes its store from
// openTestStore, so both backends run the same test and neither can drift.
//
// Threads: the test's main thread.

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/support/started_postgres.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

namespace paddock::test {

enum class StoreBackend { Sqlite, Postgres };

inline void PrintTo(StoreBackend backend, std::ostream *out)
{
    *out << (backend == StoreBackend::Sqlite ? "Sqlite" : "Postgres");
}

inline std::string storeBackendName(const ::testing::TestParamInfo<StoreBackend> &info)
{
    return info.param == StoreBackend::Sqlite ? "Sqlite" : "Postgres";
}

#define PADDOCK_STORE_BACKENDS                                                                                         \
    ::testing::Values(::paddock::test::StoreBackend::Sqlite, ::paddock::test::StoreBackend::Postgres),                 \
        ::paddock::test::storeBackendName

struct TestStore {
    std::unique_ptr<store::EventStore> store;
    std::string skipReason;   // PostgreSQL is not installed: GTEST_SKIP with this
    std::string error;        // anything else that failed
};

// A new store: SQLite at sqliteFile, or a fresh PostgreSQL database.
inline TestStore openTestStore(StoreBackend backend, const std::filesystem::path &sqliteFile)
{
    TestStore out;
    Result<std::unique_ptr<store::EventStore>> opened = fail(ErrorCode::Internal, "not opened");
    if (backend == StoreBackend::Sqlite) {
        opened = store::openSqliteEventStore(sqliteFile);
    } else {
        std::string why;
        StartedPostgres *server = sharedPostgres(&why);
        if (!server) {
            (StartedPostgres::missingBinary().empty() ? out.error : out.skipReason) = why;
            return out;
        }
        const std::string db = server->freshDatabase("test", &out.error);
        if (db.empty())
            return out;
        opened = store::openPostgresEventStore(server->connectionString(db));
    }
    if (opened)
        out.store = std::move(*opened);
    else
        out.error = opened.error().message;
    return out;
}

} // namespace paddock::test
