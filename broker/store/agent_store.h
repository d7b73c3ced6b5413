#pragma once
// Agents and their durable records in the broker's database (tables agents and agent_records,
// migration 2; docs/governance.md). Opens its own connection to the file the event store owns and
// migrated; writes are rare (a human creates or edits an agent) and wait for the event writer's
// transactions through SQLite's busy timeout.
//
// Threads: every method may be called from any thread; one mutex serialises the connection.

#include "broker/agents/agent.h"
#include "common/result.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace paddock::store {

namespace sqlite {
class Database;
}

struct AgentPage {
    std::vector<agents::Agent> agents;   // by name
    std::string nextPageToken;
};

class AgentStore {
public:
    // The database must exist and be migrated (open the event store first).
    static Result<std::unique_ptr<AgentStore>> open(const std::filesystem::path &path);
    ~AgentStore();

    // AlreadyExists when the name is taken. Sets created/updated times.
    Result<agents::Agent> create(const agents::Agent &agent);
    // NotFound naming `paddockctl agents create`. With its records.
    Result<agents::Agent> get(const std::string &name);
    Result<AgentPage> list(int pageSize, const std::string &pageToken);
    // Replaces the settings; records given are set (others kept). NotFound when it does not exist.
    Result<agents::Agent> update(const agents::Agent &agent);
    // The agent's records: those named in keys, else those whose key starts with prefix (all for "").
    Result<std::map<std::string, std::string>> records(const std::string &agent, const std::vector<std::string> &keys,
                                                       const std::string &prefix);

private:
    explicit AgentStore(std::unique_ptr<sqlite::Database> db);
    Result<std::optional<agents::Agent>> load(const std::string &name);
    Result<agents::Agent> save(const agents::Agent &agent, bool create);
    Status writeRecords(const std::string &agent, const std::map<std::string, std::string> &records, int64_t nowMs);

    std::mutex m_mutex;
    std::unique_ptr<sqlite::Database> m_db;
};

} // namespace paddock::store
