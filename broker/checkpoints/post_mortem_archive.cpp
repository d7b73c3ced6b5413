#include "broker/checkpoints/post_mortem_archive.h"

#include "common/clock.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace paddock::checkpoints {

namespace {

using nlohmann::json;
using pool_client::PostMortemInfo;

constexpr const char *kPrefix = "post-mortems/";
constexpr int kListPerPool = 100;
// A failed command's result is recorded right after its post-mortem is taken; a result later than
// this belongs to another step.
constexpr int64_t kResultWithinMs = 5000;
constexpr int64_t kExpiryEveryUs = 3600LL * 1000 * 1000;

// A name as a blob key component: [a-z0-9._-], anything else as '_'.
std::string keyPart(const std::string &name)
{
    std::string out;
    for (char c : name) {
        const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
        const bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '.' || lower == '-' || lower == '_';
        out.push_back(ok ? lower : '_');
    }
    return out.empty() || out.front() == '.' ? "_" + out : out;
}

json samplesJson(const std::vector<pool_client::ResourcePoint> &samples)
{
    json out = json::array();
    for (const auto &s : samples)
        out.push_back({{"time_unix_ms", s.timeUnixMs}, {"cpu_cores", s.cpuCores}, {"memory_bytes", s.memoryBytes},
                       {"pids", s.pids}, {"disk_bytes", s.diskBytes}, {"cpu_throttled", s.cpuThrottled},
                       {"cpu_periods", s.cpuPeriods}, {"cpu_throttled_periods", s.cpuThrottledPeriods},
                       {"cpu_throttled_us", s.cpuThrottledUs}});
    return out;
}

json processesJson(const std::vector<pool_client::ProcessInfo> &processes)
{
    json out = json::array();
    for (const auto &p : processes)
        out.push_back({{"pid", p.pid}, {"ppid", p.ppid}, {"state", p.state}, {"rss_bytes", p.rssBytes},
                       {"command", p.command}});
    return out;
}

json toJson(const ArchivedPostMortem &archived)
{
    const PostMortemInfo &pm = archived.info;
    return {{"pool", pm.pool}, {"pool_id", pm.poolId}, {"sandbox_id", pm.sandboxId}, {"session_id", pm.sessionId},
            {"tier", pm.tier}, {"runtime", pm.runtime}, {"reason", pm.reason}, {"detail", pm.detail},
            {"exit_code", pm.exitCode}, {"signal", pm.signal}, {"duration_ms", pm.durationMs}, {"argv", pm.argv},
            {"last_stdout", pm.lastStdout}, {"last_stderr", pm.lastStderr}, {"stdout_bytes", pm.stdoutBytes},
            {"stderr_bytes", pm.stderrBytes}, {"samples", samplesJson(pm.samples)},
            {"processes", processesJson(pm.processes)}, {"processes_note", pm.processesNote},
            {"snapshot_ref", pm.snapshotRef}, {"snapshot_error", pm.snapshotError},
            {"snapshot_size_bytes", pm.snapshotSizeBytes}, {"snapshot_ms", pm.snapshotMs},
            {"peak_memory_bytes", pm.peakMemoryBytes}, {"cpu_limit", pm.cpuLimit},
            {"memory_limit_bytes", pm.memoryLimitBytes}, {"pids_limit", pm.pidsLimit},
            {"disk_limit_bytes", pm.diskLimitBytes}, {"time_unix_ms", pm.timeUnixMs},
            {"manifest", archived.manifest}, {"archived_unix_ms", archived.archivedUnixMs}};
}

ArchivedPostMortem fromJson(const json &j)
{
    ArchivedPostMortem out;
    PostMortemInfo &pm = out.info;
    pm.pool = j.value("pool", "");
    pm.poolId = j.value("pool_id", "");
    pm.sandboxId = j.value("sandbox_id", "");
    pm.sessionId = j.value("session_id", "");
    pm.tier = j.value("tier", "");
    pm.runtime = j.value("runtime", "");
    pm.reason = j.value("reason", "");
    pm.detail = j.value("detail", "");
    pm.exitCode = j.value("exit_code", 0);
    pm.signal = j.value("signal", 0);
    pm.durationMs = j.value("duration_ms", 0.0);
    pm.argv = j.value("argv", std::vector<std::string>{});
    pm.lastStdout = j.value("last_stdout", "");
    pm.lastStderr = j.value("last_stderr", "");
    pm.stdoutBytes = j.value("stdout_bytes", int64_t{0});
    pm.stderrBytes = j.value("stderr_bytes", int64_t{0});
    for (const auto &s : j.value("samples", json::array()))
        pm.samples.push_back({s.value("time_unix_ms", int64_t{0}), s.value("cpu_cores", 0.0),
                              s.value("memory_bytes", int64_t{0}), s.value("pids", int64_t{0}),
                              s.value("disk_bytes", int64_t{0}), s.value("cpu_throttled", false),
                              s.value("cpu_periods", int64_t{0}), s.value("cpu_throttled_periods", int64_t{0}),
                              s.value("cpu_throttled_us", int64_t{0})});
    for (const auto &p : j.value("processes", json::array()))
        pm.processes.push_back({p.value("pid", 0), p.value("ppid", 0), p.value("state", ""),
                                p.value("rss_bytes", int64_t{0}), p.value("command", "")});
    pm.processesNote = j.value("processes_note", "");
    pm.snapshotRef = j.value("snapshot_ref", "");
    pm.snapshotError = j.value("snapshot_error", "");
    pm.snapshotSizeBytes = j.value("snapshot_size_bytes", int64_t{0});
    pm.snapshotMs = j.value("snapshot_ms", 0.0);
    pm.peakMemoryBytes = j.value("peak_memory_bytes", int64_t{0});
    pm.cpuLimit = j.value("cpu_limit", 0.0);
    pm.memoryLimitBytes = j.value("memory_limit_bytes", int64_t{0});
    pm.pidsLimit = j.value("pids_limit", int64_t{0});
    pm.diskLimitBytes = j.value("disk_limit_bytes", int64_t{0});
    pm.timeUnixMs = j.value("time_unix_ms", int64_t{0});
    out.manifest = j.value("manifest", "");
    out.archivedUnixMs = j.value("archived_unix_ms", int64_t{0});
    return out;
}

std::string manifestOf(const core::Event &event)
{
    const json payload = json::parse(event.payload, nullptr, false);
    return payload.is_object() ? payload.value("manifest", std::string()) : std::string();
}

} // namespace

std::string manifestAtFailure(std::span<const core::Event> log, int64_t timeUnixMs)
{
    std::string before;
    bool resultSeen = false;
    for (const auto &event : log) {
        const bool namesCheckpoint = event.kind == core::kind::Checkpoint || event.kind == core::kind::SandboxReleased;
        if (!resultSeen) {
            if (event.kind == core::kind::ToolResult && event.timeUnixMs >= timeUnixMs
                && event.timeUnixMs <= timeUnixMs + kResultWithinMs)
                resultSeen = true;
            else if (namesCheckpoint && event.timeUnixMs <= timeUnixMs && !manifestOf(event).empty())
                before = manifestOf(event);
            continue;
        }
        // The events appended with that result: its checkpoint, if the workspace changed.
        if (event.kind == core::kind::Checkpoint && !manifestOf(event).empty())
            return manifestOf(event);
        if (event.kind == core::kind::ToolCall || event.kind == core::kind::ToolResult)
            break;
    }
    return before;
}

PostMortemArchive::PostMortemArchive(CheckpointStore &store, const placement::PoolSet &pools, LogReader readLog,
                                     int64_t intervalMs, int64_t retentionMs)
    : m_store(store), m_pools(pools), m_readLog(std::move(readLog)), m_intervalMs(intervalMs),
      m_retentionMs(retentionMs)
{
}

PostMortemArchive::~PostMortemArchive()
{
    stop();
}

void PostMortemArchive::start()
{
    m_copier = std::thread([this] { copierLoop(); });
}

void PostMortemArchive::stop()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    if (m_copier.joinable())
        m_copier.join();
}

void PostMortemArchive::nudge()
{
    {
        std::lock_guard lock(m_mutex);
        m_nudged = true;
    }
    m_wake.notify_all();
}

void PostMortemArchive::copierLoop()
{
    std::unique_lock lock(m_mutex);
    while (!m_stopping) {
        m_wake.wait_for(lock, std::chrono::milliseconds(m_intervalMs), [this] { return m_stopping || m_nudged; });
        if (m_stopping)
            break;
        m_nudged = false;
        lock.unlock();
        if (auto copied = copyNow(); !copied)
            spdlog::warn("post-mortem archive: {}", copied.error().message);
        if (m_retentionMs > 0 && monotonicUs() - m_lastExpiryUs >= kExpiryEveryUs) {
            m_lastExpiryUs = monotonicUs();
            if (auto expired = expire(nowUnixMs() - m_retentionMs); expired && *expired > 0)
                spdlog::info("post-mortem archive: {} post-mortem(s) past retention deleted", *expired);
        }
        lock.lock();
    }
}

std::string PostMortemArchive::keyOf(const PostMortemInfo &pm)
{
    return std::string(kPrefix) + keyPart(pm.pool) + "/" + keyPart(pm.sandboxId) + "-" + std::to_string(pm.timeUnixMs)
        + ".json";
}

Result<bool> PostMortemArchive::copyOne(pool_client::PoolClient &pool, const PostMortemInfo &listed)
{
    PostMortemInfo named = listed;
    named.pool = pool.name();
    const std::string key = keyOf(named);
    {
        std::lock_guard lock(m_mutex);
        if (m_index.contains(key))
            return false;
    }
    auto full = pool.getPostMortem(listed.sandboxId);
    if (!full)
        return std::unexpected(full.error());
    if (full->timeUnixMs != listed.timeUnixMs)
        return false;   // a newer one replaced it meanwhile; the next pass copies that
    ArchivedPostMortem archived{*full, "", nowUnixMs()};
    archived.info.pool = pool.name();
    if (!archived.info.sessionId.empty())
        if (auto log = m_readLog(archived.info.sessionId))
            archived.manifest = manifestAtFailure(*log, archived.info.timeUnixMs);
    if (auto stored = m_store.blobs().put(key, toJson(archived).dump()); !stored)
        return std::unexpected(stored.error());
    std::lock_guard lock(m_mutex);
    m_index[key] = std::move(archived);
    return true;
}

Result<int> PostMortemArchive::copyNow()
{
    {
        std::lock_guard lock(m_mutex);
        if (auto loaded = loadIndex(); !loaded)
            return std::unexpected(loaded.error());
    }
    int copied = 0;
    const auto &entries = m_pools.entries();
    for (size_t i = 0; i < entries.size(); ++i) {
        const auto health = m_pools.health(i);
        if (health.checked && !health.healthy)
            continue;
        auto &pool = *entries[i].client;
        auto listed = pool.listPostMortems("", kListPerPool);
        if (!listed)
            continue;   // unhealthy now; the health checks say so
        for (const auto &pm : *listed) {
            auto one = copyOne(pool, pm);
            if (!one) {
                if (one.error().code == ErrorCode::Unavailable || one.error().code == ErrorCode::ResourceExhausted)
                    return std::unexpected(one.error());
                continue;   // expired on the pool meanwhile
            }
            copied += *one ? 1 : 0;
        }
    }
    return copied;
}

Result<int> PostMortemArchive::expire(int64_t olderThanUnixMs)
{
    std::lock_guard lock(m_mutex);
    if (auto loaded = loadIndex(); !loaded)
        return std::unexpected(loaded.error());
    int removed = 0;
    for (auto it = m_index.begin(); it != m_index.end();) {
        if (it->second.info.timeUnixMs >= olderThanUnixMs) {
            ++it;
            continue;
        }
        if (auto gone = m_store.blobs().remove(it->first); !gone)
            return std::unexpected(gone.error());
        it = m_index.erase(it);
        ++removed;
    }
    return removed;
}

Status PostMortemArchive::loadIndex()
{
    if (m_indexLoaded)
        return {};
    auto keys = m_store.blobs().list(kPrefix);
    if (!keys)
        return std::unexpected(keys.error());
    for (const auto &blob : *keys) {
        auto text = m_store.blobs().get(blob.key);
        if (!text)
            continue;
        const json j = json::parse(*text, nullptr, false);
        if (j.is_object())
            m_index[blob.key] = fromJson(j);
    }
    m_indexLoaded = true;
    return {};
}

Result<std::vector<ArchivedPostMortem>> PostMortemArchive::list(const std::string &sessionId, const std::string &pool,
                                                                 int limit)
{
    std::lock_guard lock(m_mutex);
    if (auto loaded = loadIndex(); !loaded)
        return std::unexpected(loaded.error());
    std::vector<ArchivedPostMortem> out;
    for (const auto &[key, archived] : m_index)
        if ((sessionId.empty() || archived.info.sessionId == sessionId) && (pool.empty() || archived.info.pool == pool))
            out.push_back(archived);
    std::stable_sort(out.begin(), out.end(),
                     [](const auto &a, const auto &b) { return a.info.timeUnixMs > b.info.timeUnixMs; });
    if (limit > 0 && out.size() > static_cast<size_t>(limit))
        out.resize(static_cast<size_t>(limit));
    return out;
}

Result<ArchivedPostMortem> PostMortemArchive::get(const std::string &pool, const std::string &sandboxId)
{
    std::lock_guard lock(m_mutex);
    if (auto loaded = loadIndex(); !loaded)
        return std::unexpected(loaded.error());
    const ArchivedPostMortem *newest = nullptr;
    for (const auto &[key, archived] : m_index)
        if (archived.info.pool == pool && archived.info.sandboxId == sandboxId
            && (!newest || archived.info.timeUnixMs > newest->info.timeUnixMs))
            newest = &archived;
    if (!newest)
        return fail(ErrorCode::NotFound, "no post-mortem of sandbox '" + sandboxId + "' of pool '" + pool
                                             + "', neither on the pool nor in the broker's archive");
    return *newest;
}

} // namespace paddock::checkpoints
