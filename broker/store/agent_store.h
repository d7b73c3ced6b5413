#pragma once
// Agents and their durable records in the broker's database (tables agents and agent_records,
// migration 4; docs/governance.md), through the EventStore on either backend: reads with query(),
// writes as a request of statements only (one transaction on the store's writer). Writes are rare:
// a human creates or edits an agent.
//
// Threads: every method may be called from any thread; one mutex serialises create and update.

#include "broker/agents/agent.h"
#include "broker/store/event_store.h"
#include "common/result.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace paddock::store {

struct AgentPage {
    std::vector<agents::Agent> agents;   // by name
    std::string nextPageToken;
};

class AgentStore {
public:
    // The agents of store, which must outlive it.
    static Result<std::unique_ptr<AgentStore>> open(EventStore &store);
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
    explicit AgentStore(EventStore &store);
    Result<std::optional<agents::Agent>> load(const std::string &name);
    Result<agents::Agent> save(const agents::Agent &agent, bool create);

    std::mutex m_mutex;
    EventStore &m_store;
};

} // namespace paddock::store
