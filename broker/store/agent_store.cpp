#include "broker/store/agent_store.h"

#include "broker/store/event_index.h"
#include "broker/store/sql_values.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace paddock::store {

namespace {

std::string tiersJson(const std::vector<std::string> &tiers)
{
    return nlohmann::json(tiers).dump();
}

std::vector<std::string> tiersFromJson(const std::string &text)
{
    std::vector<std::string> out;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_array()) {
        for (const auto &item : j) {
            if (item.is_string())
                out.push_back(item.get<std::string>());
        }
    }
    return out;
}

agents::Agent agentFromRow(const SqlRow &row)
{
    agents::Agent agent;
    agent.name = textAt(row, 0);
    agent.owner = textAt(row, 1);
    agent.defaultTier = textAt(row, 2);
    agent.allowedTiers = tiersFromJson(textAt(row, 3));
    agent.selectionMode = agents::selectionModeFromName(textAt(row, 4)).value_or(agents::SelectionMode::Default);
    agent.budgetPerSessionMicros = intAt(row, 5);
    agent.budgetPerDayMicros = intAt(row, 6);
    agent.createdUnixMs = intAt(row, 7);
    agent.updatedUnixMs = intAt(row, 8);
    return agent;
}

} // namespace

AgentStore::AgentStore(EventStore &store) : m_store(store) {}
AgentStore::~AgentStore() = default;

Result<std::unique_ptr<AgentStore>> AgentStore::open(EventStore &store)
{
    return std::unique_ptr<AgentStore>(new AgentStore(store));
}

Result<std::optional<agents::Agent>> AgentStore::load(const std::string &name)
{
    auto rows = m_store.query(sqlStatement("SELECT name, owner, default_tier, allowed_tiers, selection_mode, "
                                           "budget_per_session_micros, budget_per_day_micros, created_unix_ms, "
                                           "updated_unix_ms FROM agents WHERE name = ?1",
                                           name));
    if (!rows)
        return std::unexpected(rows.error());
    if (rows->empty())
        return std::optional<agents::Agent>();
    agents::Agent agent = agentFromRow(rows->front());
    auto records = m_store.query(sqlStatement("SELECT key, value FROM agent_records WHERE agent = ?1 ORDER BY key", name));
    if (!records)
        return std::unexpected(records.error());
    for (const auto &row : *records)
        agent.records[textAt(row, 0)] = textAt(row, 1);
    return std::optional<agents::Agent>(std::move(agent));
}

// create() and update(): the agent's row and its records in one transaction (a request of statements
// only), then the agent as stored. Whether the name is taken is read first: agents are edited by
// people, rarely, and one broker's edits are serialised here; two brokers creating the same name at
// once make the second fail on the primary key instead.
Result<agents::Agent> AgentStore::save(const agents::Agent &agent, bool create)
{
    std::lock_guard lock(m_mutex);
    auto existing = load(agent.name);
    if (!existing)
        return std::unexpected(existing.error());
    if (create && *existing)
        return fail(ErrorCode::AlreadyExists, "agent '" + agent.name + "' already exists: change it with "
                                                  "`paddockctl agents edit " + agent.name + "`, or pick another name");
    if (!create && !*existing)
        return fail(ErrorCode::NotFound, "no agent '" + agent.name + "': create it first with `paddockctl agents "
                                             "create " + agent.name + "`");
    const int64_t now = nowUnixMs();
    AppendRequest request;
    request.writes.push_back(sqlStatement(
        create ? "INSERT INTO agents(name, owner, default_tier, allowed_tiers, selection_mode, "
                 "budget_per_session_micros, budget_per_day_micros, created_unix_ms, updated_unix_ms) "
                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"
               : "UPDATE agents SET owner = ?2, default_tier = ?3, allowed_tiers = ?4, "
                 "selection_mode = ?5, budget_per_session_micros = ?6, budget_per_day_micros = ?7, "
                 "updated_unix_ms = ?8 WHERE name = ?1",
        agent.name, agent.owner, agent.defaultTier, tiersJson(agent.allowedTiers),
        std::string(agents::selectionModeName(agent.selectionMode)), agent.budgetPerSessionMicros,
        agent.budgetPerDayMicros, now));
    for (const auto &[key, value] : agent.records) {
        request.writes.push_back(sqlStatement("INSERT INTO agent_records(agent, key, value, updated_unix_ms) "
                                              "VALUES(?1, ?2, ?3, ?4) ON CONFLICT(agent, key) DO UPDATE SET "
                                              "value = excluded.value, updated_unix_ms = excluded.updated_unix_ms",
                                              agent.name, key, value, now));
    }
    if (auto written = m_store.appendSync(std::move(request)); !written)
        return std::unexpected(written.error());
    auto loaded = load(agent.name);
    if (!loaded)
        return std::unexpected(loaded.error());
    if (!*loaded)
        return fail(ErrorCode::Aborted, "agent '" + agent.name + "' was removed while it was being saved; retry");
    return **loaded;
}

Result<agents::Agent> AgentStore::create(const agents::Agent &agent)
{
    return save(agent, /*create=*/true);
}

Result<agents::Agent> AgentStore::get(const std::string &name)
{
    auto loaded = load(name);
    if (!loaded)
        return std::unexpected(loaded.error());
    if (!*loaded)
        return fail(ErrorCode::NotFound, "no agent '" + name + "': list them with `paddockctl agents ls`, or create it "
                        "with `paddockctl agents create " + name + "`");
    return **loaded;
}

Result<AgentPage> AgentStore::list(int pageSize, const std::string &pageToken)
{
    auto rows = m_store.query(
        sqlStatement("SELECT name FROM agents WHERE name > ?1 ORDER BY name LIMIT ?2", pageToken, int64_t{pageSize} + 1));
    if (!rows)
        return std::unexpected(rows.error());
    std::vector<std::string> names;
    for (const auto &row : *rows)
        names.push_back(textAt(row, 0));
    AgentPage page;
    if (static_cast<int>(names.size()) > pageSize) {
        names.resize(static_cast<size_t>(pageSize));
        page.nextPageToken = names.back();
    }
    for (const auto &name : names) {
        auto agent = load(name);
        if (!agent)
            return std::unexpected(agent.error());
        if (*agent)
            page.agents.push_back(std::move(**agent));
    }
    return page;
}

Result<agents::Agent> AgentStore::update(const agents::Agent &agent)
{
    return save(agent, /*create=*/false);
}

Result<std::map<std::string, std::string>> AgentStore::records(const std::string &agent,
                                                               const std::vector<std::string> &keys,
                                                               const std::string &prefix)
{
    auto rows = m_store.query(sqlStatement("SELECT key, value FROM agent_records WHERE agent = ?1 ORDER BY key", agent));
    if (!rows)
        return std::unexpected(rows.error());
    std::map<std::string, std::string> out;
    for (const auto &row : *rows) {
        std::string key = textAt(row, 0);
        const bool wanted = keys.empty() ? key.starts_with(prefix) : std::ranges::find(keys, key) != keys.end();
        if (wanted)
            out[std::move(key)] = textAt(row, 1);
    }
    return out;
}

} // namespace paddock::store
