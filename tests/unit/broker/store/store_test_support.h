#pragma once
// Helpers for the store tests: a temporary directory per test and request builders.

#include "broker/store/sqlite_event_store.h"

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

} // namespace paddock::store::test
