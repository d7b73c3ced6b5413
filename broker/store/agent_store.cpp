#include "broker/store/agent_store.h"

#include "broker/store/sqlite_handle.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace paddock::store {

namespace {

constexpr int kBusyTimeoutMs = 5000;

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

// Binds ?1..?7 (name, owner, default tier, allowed tiers, mode, budgets) and ?8 (now); the texts
// bound must outlive the step, so they are kept in `keep`.
void bindSettings(sqlite::Statement &stmt, const agents::Agent &agent, int64_t nowMs, std::string (&keep)[2])
{
    keep[0] = tiersJson(agent.allowedTiers);
    keep[1] = agents::selectionModeName(agent.selectionMode);
    stmt.bind(1, agent.name);
    stmt.bind(2, agent.owner);
    stmt.bind(3, agent.defaultTier);
    stmt.bind(4, keep[0]);
    stmt.bind(5, keep[1]);
    stmt.bind(6, agent.budgetPerSessionMicros);
    stmt.bind(7, agent.budgetPerDayMicros);
    stmt.bind(8, nowMs);
}

} // namespace

AgentStore::AgentStore(std::unique_ptr<sqlite::Database> db) : m_db(std::move(db)) {}
AgentStore::~AgentStore() = default;

Result<std::unique_ptr<AgentStore>> AgentStore::open(const std::filesystem::path &path)
{
    auto db = sqlite::Database::open(path, /*readOnly=*/false);
    if (!db)
        return std::unexpected(db.error());
    sqlite3_busy_timeout(db->get(), kBusyTimeoutMs);
    auto exists = db->queryInt("SELECT count(*) FROM sqlite_master WHERE name = 'agents'");
    if (!exists)
        return std::unexpected(exists.error());
    if (*exists == 0)
        return fail(ErrorCode::FailedPrecondition, path.string() + " has no agents table: open it with the event "
                        "store first, which migrates it");
    return std::unique_ptr<AgentStore>(new AgentStore(std::make_unique<sqlite::Database>(std::move(*db))));
}

Result<std::optional<agents::Agent>> AgentStore::load(const std::string &name)
{
    auto stmt = m_db->prepare("SELECT name, owner, default_tier, allowed_tiers, selection_mode, "
                              "budget_per_session_micros, budget_per_day_micros, created_unix_ms, updated_unix_ms "
                              "FROM agents WHERE name = ?1", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, name);
    int rc = stmt->step();
    if (rc == SQLITE_DONE)
        return std::optional<agents::Agent>();
    if (rc != SQLITE_ROW)
        return fail(ErrorCode::Unavailable, m_db->describe("reading agent " + name, rc));
    agents::Agent agent;
    agent.name = stmt->columnText(0);
    agent.owner = stmt->columnText(1);
    agent.defaultTier = stmt->columnText(2);
    agent.allowedTiers = tiersFromJson(stmt->columnText(3));
    agent.selectionMode = agents::selectionModeFromName(stmt->columnText(4)).value_or(agents::SelectionMode::Default);
    agent.budgetPerSessionMicros = stmt->columnInt(5);
    agent.budgetPerDayMicros = stmt->columnInt(6);
    agent.createdUnixMs = stmt->columnInt(7);
    agent.updatedUnixMs = stmt->columnInt(8);
    auto records = m_db->prepare("SELECT key, value FROM agent_records WHERE agent = ?1 ORDER BY key", false);
    if (!records)
        return std::unexpected(records.error());
    records->bind(1, agent.name);
    while ((rc = records->step()) == SQLITE_ROW)
        agent.records[records->columnText(0)] = records->columnText(1);
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db->describe("reading the records of agent " + name, rc));
    return std::optional<agents::Agent>(std::move(agent));
}

Status AgentStore::writeRecords(const std::string &agent, const std::map<std::string, std::string> &records,
                                int64_t nowMs)
{
    auto stmt = m_db->prepare("INSERT INTO agent_records(agent, key, value, updated_unix_ms) VALUES(?1, ?2, ?3, ?4) "
                              "ON CONFLICT(agent, key) DO UPDATE SET value = excluded.value, "
                              "updated_unix_ms = excluded.updated_unix_ms", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    for (const auto &[key, value] : records) {
        stmt->bind(1, agent);
        stmt->bind(2, key);
        stmt->bind(3, value);
        stmt->bind(4, nowMs);
        const int rc = stmt->step();
        stmt->reset();
        if (rc != SQLITE_DONE)
            return fail(ErrorCode::Unavailable, m_db->describe("writing record " + key + " of agent " + agent, rc));
    }
    return {};
}

// create() and update(): the agent's row and its records in one transaction, then the agent as stored.
Result<agents::Agent> AgentStore::save(const agents::Agent &agent, bool create)
{
    std::lock_guard lock(m_mutex);
    const int64_t now = nowUnixMs();
    if (auto status = m_db->exec("BEGIN IMMEDIATE"); !status)
        return std::unexpected(status.error());
    auto rollback = [&](Error error) -> Result<agents::Agent> {
        (void)m_db->exec("ROLLBACK");
        return std::unexpected(std::move(error));
    };
    auto stmt = m_db->prepare(create
        ? "INSERT INTO agents(name, owner, default_tier, allowed_tiers, selection_mode, "
          "budget_per_session_micros, budget_per_day_micros, created_unix_ms, updated_unix_ms) "
          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"
        : "UPDATE agents SET owner = ?2, default_tier = ?3, allowed_tiers = ?4, "
          "selection_mode = ?5, budget_per_session_micros = ?6, budget_per_day_micros = ?7, "
          "updated_unix_ms = ?8 WHERE name = ?1", false);
    if (!stmt)
        return rollback(stmt.error());
    std::string keep[2];
    bindSettings(*stmt, agent, now, keep);
    const int rc = stmt->step();
    if (create && (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT))
        return rollback({ErrorCode::AlreadyExists, "agent '" + agent.name + "' already exists: change it with "
                                                       "`paddockctl agents edit " + agent.name + "`, or pick another name"});
    if (rc != SQLITE_DONE)
        return rollback({ErrorCode::Unavailable,
                         m_db->describe((create ? "creating agent " : "updating agent ") + agent.name, rc)});
    if (!create && sqlite3_changes(m_db->get()) == 0)
        return rollback({ErrorCode::NotFound, "no agent '" + agent.name + "': create it first with `paddockctl agents "
                                                  "create " + agent.name + "`"});
    if (auto status = writeRecords(agent.name, agent.records, now); !status)
        return rollback(status.error());
    if (auto status = m_db->exec("COMMIT"); !status)
        return rollback(status.error());
    auto loaded = load(agent.name);
    if (!loaded)
        return std::unexpected(loaded.error());
    return **loaded;
}

Result<agents::Agent> AgentStore::create(const agents::Agent &agent)
{
    return save(agent, /*create=*/true);
}

Result<agents::Agent> AgentStore::get(const std::string &name)
{
    std::lock_guard lock(m_mutex);
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
    std::lock_guard lock(m_mutex);
    auto stmt = m_db->prepare("SELECT name FROM agents WHERE name > ?1 ORDER BY name LIMIT ?2", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, pageToken);
    stmt->bind(2, int64_t{pageSize} + 1);
    std::vector<std::string> names;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        names.push_back(stmt->columnText(0));
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db->describe("listing agents", rc));
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
    std::lock_guard lock(m_mutex);
    auto stmt = m_db->prepare("SELECT key, value FROM agent_records WHERE agent = ?1 ORDER BY key", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, agent);
    std::map<std::string, std::string> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        std::string key = stmt->columnText(0);
        const bool wanted = keys.empty() ? key.starts_with(prefix) : std::ranges::find(keys, key) != keys.end();
        if (wanted)
            out[std::move(key)] = stmt->columnText(1);
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db->describe("reading the records of agent " + agent, rc));
    return out;
}

} // namespace paddock::store
