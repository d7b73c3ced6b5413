// What other brokers on the same database commit, heard here (docs/store.md, "Several brokers").
//
// Each group's transaction ends with NOTIFY paddock_commits (pg_notify, sent with the COMMIT),
// naming this store and every session the group changed with its new last seq; PostgreSQL
// delivers it to every listener when the transaction commits, and never when it rolls back. The
// feed thread LISTENs on a connection of its own and, for what another broker committed:
//   - tells the writer that its tails of those sessions may be stale (it forgets them before its
//     next group, and reads them again when needed);
//   - wakes the lease waiters, since a session may need work now;
//   - hands the sessions' new states to the commit listeners (a CommitNotice with no events): a
//     follower whose state is ahead of what it has sent reads the new events from the table.
// A notification can be lost only with the feed's connection. Once that is made again, the feed
// reads the sessions table for every session changed since it last heard the server (less
// kClockSlackMs, for brokers whose clocks differ), and treats them as heard.
//
// Threads: notifyStatements runs on the writer thread; feedLoop on the feed thread, which owns its
// connection; heardCommits takes m_staleMutex and m_leaseMutex, and the listeners' mutex.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/state_json.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <poll.h>

#include <algorithm>
#include <random>

namespace paddock::store {

namespace {

constexpr const char *kChannel = "paddock_commits";
// PostgreSQL refuses a payload of 8000 bytes or more: a group's sessions are spread over several.
constexpr size_t kMaxPayloadBytes = 7000;
constexpr int kFeedPollMs = 200;
// A connection quiet this long is asked a question, so a server that vanished without closing it
// is noticed.
constexpr int64_t kFeedProbeMs = 5000;
constexpr int64_t kClockSlackMs = 60 * 1000;

std::string payloadStart(const std::string &instanceId)
{
    return "{\"from\":" + nlohmann::json(instanceId).dump() + ",\"sessions\":[";
}

} // namespace

std::string PostgresEventStore::newInstanceId()
{
    std::random_device random;
    std::uniform_int_distribution<uint64_t> any;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(any(random)));
    return text;
}

void PostgresEventStore::notifyStatements(const GroupProgress &progress, std::vector<Piped> &out)
{
    if (progress.touchOrder.empty())
        return;
    std::vector<std::string> payloads;
    std::string payload = payloadStart(m_instanceId);
    size_t inPayload = 0;
    for (const auto &sessionId : progress.touchOrder) {
        std::string entry = "[" + nlohmann::json(sessionId).dump() + ","
            + std::to_string(progress.touched.at(sessionId).state.lastSeq) + "]";
        if (inPayload > 0 && payload.size() + entry.size() + 3 > kMaxPayloadBytes) {
            payloads.push_back(payload + "]}");
            payload = payloadStart(m_instanceId);
            inPayload = 0;
        }
        payload += (inPayload++ > 0 ? "," : "") + entry;
    }
    payloads.push_back(payload + "]}");
    for (auto &text : payloads) {
        Piped notify{"SELECT pg_notify($1, $2)", {}, "notifying other brokers of a commit"};
        notify.params.add(std::string(kChannel));
        notify.params.add(std::move(text));
        out.push_back(std::move(notify));
    }
}

void PostgresEventStore::dropStaleTails()
{
    if (!m_anyStale.load(std::memory_order_acquire))
        return;
    std::vector<std::string> stale;
    {
        std::lock_guard lock(m_staleMutex);
        stale.swap(m_staleSessions);
        m_anyStale.store(false, std::memory_order_release);
    }
    for (const auto &sessionId : stale)
        m_live.erase(sessionId);
}

void PostgresEventStore::heardCommits(const std::map<std::string, int64_t> &sessions)
{
    {
        std::lock_guard lock(m_staleMutex);
        for (const auto &[sessionId, lastSeq] : sessions)
            m_staleSessions.push_back(sessionId);
        m_anyStale.store(true, std::memory_order_release);
    }
    wakeLeaseWaiters();
    if (!m_appends.hasListeners())
        return;
    pg::ArrayLiteral ids;
    for (const auto &[sessionId, lastSeq] : sessions)
        ids.add(sessionId);
    auto states = withReader<std::vector<core::SessionState>>(
        [&](pg::Connection &db) -> Result<std::vector<core::SessionState>> {
            pg::Params params;
            params.add(ids.finish());
            auto result = db.exec("SELECT state FROM sessions WHERE id = ANY($1::text[])", params);
            if (!pg::ok(result.get()))
                return std::unexpected(db.error(result.get(), "reading sessions another broker changed"));
            std::vector<core::SessionState> out;
            for (int row = 0; row < PQntuples(result.get()); ++row) {
                if (auto state = sessionStateFromJson(pg::cellText(result.get(), row, 0)))
                    out.push_back(std::move(*state));
            }
            return out;
        });
    if (!states) {
        spdlog::warn("store: {}; their followers here catch up with the next change", states.error().message);
        return;
    }
    CommitNotice notice;
    notice.sessions = std::move(*states);
    m_appends.notifyElsewhere(notice);
}

void PostgresEventStore::feedLoop()
{
    pg::Connection db;
    int64_t heardUntilMs = nowUnixMs();   // everything committed before this was heard
    int64_t lastTrafficMs = 0;
    bool missedSome = false;
    bool warned = false;
    while (!m_feedStop.load()) {
        if (!db.alive()) {
            db.closeNow();
            auto opened = pg::Connection::open(m_conninfo, m_applicationName);
            Status listening = opened ? opened->run("LISTEN paddock_commits", "listening for other brokers' commits")
                                      : Status(std::unexpected(opened.error()));
            if (!listening) {
                if (!warned)
                    spdlog::warn("store: {}; other brokers' commits are not heard until it is back",
                                 listening.error().message);
                warned = true;
                missedSome = true;
                for (int waited = 0; waited < m_reconnectDelayMs * 10 && !m_feedStop.load(); waited += kFeedPollMs)
                    std::this_thread::sleep_for(std::chrono::milliseconds(kFeedPollMs));
                continue;
            }
            db = std::move(*opened);
            lastTrafficMs = nowUnixMs();
            {
                std::lock_guard lock(m_feedReadyMutex);
                m_feedReady = true;
            }
            m_feedReadyCv.notify_all();
            if (warned)
                spdlog::info("store: hearing other brokers' commits again");
            warned = false;
            if (missedSome) {
                // What was committed while nobody listened: read from the table.
                std::map<std::string, int64_t> changed;
                pg::Params params;
                params.add(heardUntilMs - kClockSlackMs);
                auto result = db.exec("SELECT id, last_seq FROM sessions WHERE updated_unix_ms >= $1", params);
                if (!pg::ok(result.get())) {
                    spdlog::warn("store: {}", db.error(result.get(), "reading what changed while unheard").message);
                    continue;
                }
                for (int row = 0; row < PQntuples(result.get()); ++row)
                    changed[pg::cellText(result.get(), row, 0)] = pg::cellInt(result.get(), row, 1);
                missedSome = false;
                if (!changed.empty())
                    heardCommits(changed);
            }
        }

        pollfd fd{PQsocket(db.get()), POLLIN, 0};
        (void)::poll(&fd, 1, kFeedPollMs);
        if (nowUnixMs() - lastTrafficMs >= kFeedProbeMs) {
            (void)db.exec("SELECT 1");   // a server gone without a word shows here
            lastTrafficMs = nowUnixMs();
        }
        if (PQconsumeInput(db.get()) == 0 || !db.alive()) {
            std::string why = PQerrorMessage(db.get());
            std::replace(why.begin(), why.end(), '\n', ' ');
            spdlog::warn("store: lost the connection that hears other brokers' commits ({}); connecting again", why);
            db.closeNow();
            missedSome = true;
            continue;
        }
        heardUntilMs = nowUnixMs();
        std::map<std::string, int64_t> changed;
        while (PGnotify *notify = PQnotifies(db.get())) {
            lastTrafficMs = heardUntilMs;
            const auto payload = nlohmann::json::parse(notify->extra, nullptr, false);
            PQfreemem(notify);
            if (!payload.is_object() || payload.value("from", std::string()) == m_instanceId)
                continue;
            const auto sessions = payload.find("sessions");
            if (sessions == payload.end() || !sessions->is_array())
                continue;
            for (const auto &entry : *sessions) {
                if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_number_integer()) {
                    auto &seq = changed[entry[0].get<std::string>()];
                    seq = std::max(seq, entry[1].get<int64_t>());
                }
            }
        }
        if (!changed.empty())
            heardCommits(changed);
    }
}

} // namespace paddock::store
