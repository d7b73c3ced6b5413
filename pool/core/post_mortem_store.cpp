#include "pool/core/post_mortem_store.h"

#include "common/clock.h"
#include "common/paths.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char *kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Output is bytes, JSON strings are UTF-8: output travels base64-encoded.
std::string toBase64(const std::string &in)
{
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
        out += kB64[(v >> 18) & 63];
        out += kB64[(v >> 12) & 63];
        out += kB64[(v >> 6) & 63];
        out += kB64[v & 63];
    }
    if (i < in.size()) {
        uint32_t v = uint8_t(in[i]) << 16;
        if (i + 1 < in.size())
            v |= uint8_t(in[i + 1]) << 8;
        out += kB64[(v >> 18) & 63];
        out += kB64[(v >> 12) & 63];
        out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string fromBase64(const std::string &in)
{
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        const char *p = c ? std::strchr(kB64, c) : nullptr;
        if (!p)
            continue;   // '=' and anything else
        acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xff);
        }
    }
    return out;
}

bool validId(const std::string &id)
{
    if (id.empty() || id.size() > 200 || id.front() == '.')
        return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

} // namespace

std::string PostMortemStore::toJson(const PostMortemRecord &r)
{
    json samples = json::array();
    for (const auto &s : r.samples)
        samples.push_back({s.unixMs, s.memoryBytes, s.cpuUsageUs, s.pids, s.diskBytes, s.throttling.periods,
                           s.throttling.throttledPeriods, s.throttling.throttledUs});
    json procs = json::array();
    for (const auto &p : r.processes)
        procs.push_back({{"pid", p.pid}, {"ppid", p.ppid}, {"state", p.state}, {"rss", p.rssBytes}, {"command", p.command}});
    json j = {
        {"version", 1},
        {"sandbox_id", r.sandboxId},
        {"session_id", r.sessionId},
        {"pool_id", r.poolId},
        {"tier", r.tier},
        {"runtime", r.runtime},
        {"reason", r.reason},
        {"detail", r.detail},
        {"exit_code", r.exitCode},
        {"signal", r.signal},
        {"duration_ms", r.durationMs},
        {"argv", r.argv},
        {"stdout_b64", toBase64(r.lastStdout)},
        {"stderr_b64", toBase64(r.lastStderr)},
        {"stdout_bytes", r.stdoutBytes},
        {"stderr_bytes", r.stderrBytes},
        {"samples", samples},
        {"processes", procs},
        {"processes_note", r.processesNote},
        {"snapshot_ref", r.snapshotRef},
        {"snapshot_error", r.snapshotError},
        {"snapshot_size_bytes", r.snapshotSizeBytes},
        {"snapshot_ms", r.snapshotMs},
        {"cpu_limit", r.cpuLimit},
        {"memory_limit_bytes", r.memoryLimitBytes},
        {"pids_limit", r.pidsLimit},
        {"disk_limit_bytes", r.diskLimitBytes},
        {"time_unix_ms", r.timeUnixMs},
    };
    // Names and argv may hold bytes that are not UTF-8: replace them rather than fail.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<PostMortemRecord> PostMortemStore::fromJson(const std::string &text)
{
    json j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("sandbox_id"))
        return fail(ErrorCode::InvalidArgument, "not a post-mortem record");
    try {
        PostMortemRecord r;
        r.sandboxId = j.value("sandbox_id", "");
        r.sessionId = j.value("session_id", "");
        r.poolId = j.value("pool_id", "");
        r.tier = j.value("tier", "");
        r.runtime = j.value("runtime", "");
        r.reason = j.value("reason", "");
        r.detail = j.value("detail", "");
        r.exitCode = j.value("exit_code", 0);
        r.signal = j.value("signal", 0);
        r.durationMs = j.value("duration_ms", 0.0);
        r.argv = j.value("argv", std::vector<std::string>{});
        r.lastStdout = fromBase64(j.value("stdout_b64", ""));
        r.lastStderr = fromBase64(j.value("stderr_b64", ""));
        r.stdoutBytes = j.value("stdout_bytes", int64_t{0});
        r.stderrBytes = j.value("stderr_bytes", int64_t{0});
        for (const auto &s : j.value("samples", json::array())) {
            CgroupSample cs;
            cs.unixMs = s.at(0).get<int64_t>();
            cs.memoryBytes = s.at(1).get<int64_t>();
            cs.cpuUsageUs = s.at(2).get<int64_t>();
            cs.pids = s.at(3).get<int64_t>();
            if (s.size() > 4)   // records written before disk samples have four fields
                cs.diskBytes = s.at(4).get<int64_t>();
            if (s.size() > 7) {   // and before cpu throttling, five
                cs.throttling.periods = s.at(5).get<int64_t>();
                cs.throttling.throttledPeriods = s.at(6).get<int64_t>();
                cs.throttling.throttledUs = s.at(7).get<int64_t>();
            }
            r.samples.push_back(cs);
        }
        for (const auto &p : j.value("processes", json::array())) {
            ProcessRecord pr;
            pr.pid = p.value("pid", 0);
            pr.ppid = p.value("ppid", 0);
            pr.state = p.value("state", "");
            pr.rssBytes = p.value("rss", int64_t{0});
            pr.command = p.value("command", "");
            r.processes.push_back(pr);
        }
        r.processesNote = j.value("processes_note", "");
        r.snapshotRef = j.value("snapshot_ref", "");
        r.snapshotError = j.value("snapshot_error", "");
        r.snapshotSizeBytes = j.value("snapshot_size_bytes", int64_t{0});
        r.snapshotMs = j.value("snapshot_ms", 0.0);
        r.cpuLimit = j.value("cpu_limit", 0.0);
        r.memoryLimitBytes = j.value("memory_limit_bytes", int64_t{0});
        r.pidsLimit = j.value("pids_limit", int64_t{0});
        r.diskLimitBytes = j.value("disk_limit_bytes", int64_t{0});
        r.timeUnixMs = j.value("time_unix_ms", int64_t{0});
        return r;
    } catch (const json::exception &e) {
        return fail(ErrorCode::InvalidArgument, std::string("malformed post-mortem record: ") + e.what());
    }
}

Result<std::unique_ptr<PostMortemStore>> PostMortemStore::open(Options options)
{
    if (auto err = ensurePrivateDirectory(options.dir, 0700); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    auto store = std::unique_ptr<PostMortemStore>(new PostMortemStore(std::move(options)));
    std::error_code ec;
    for (const auto &entry : fs::directory_iterator(store->m_options.dir, ec)) {
        const auto name = entry.path().filename().string();
        if (name.rfind(".tmp-", 0) == 0) {
            fs::remove(entry.path(), ec);
            continue;
        }
        if (entry.path().extension() != ".json")
            continue;
        std::ifstream in(entry.path());
        std::stringstream text;
        text << in.rdbuf();
        auto record = fromJson(text.str());
        if (!record) {
            spdlog::error("post-mortem {} is unreadable ({}); moved aside as {}.bad", entry.path().string(),
                          record.error().message, name);
            fs::rename(entry.path(), entry.path().string() + ".bad", ec);
            continue;
        }
        store->m_records[record->sandboxId] = std::move(*record);
    }
    store->prune(nowUnixMs());
    spdlog::info("{} post-mortems kept in {}", store->size(), store->m_options.dir.string());
    return store;
}

fs::path PostMortemStore::fileOf(const std::string &sandboxId) const
{
    return m_options.dir / (sandboxId + ".json");
}

Status PostMortemStore::save(const PostMortemRecord &record)
{
    if (!validId(record.sandboxId))
        return fail(ErrorCode::InvalidArgument, "a post-mortem needs a sandbox id of letters, digits, '-', '_' and '.'");
    const std::string text = toJson(record);
    std::optional<PostMortemRecord> replaced;
    {
        std::lock_guard lock(m_mutex);
        const fs::path tmp = m_options.dir / (".tmp-" + record.sandboxId);
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            return fail(ErrorCode::Internal, "cannot write " + tmp.string() + "; check the space in the state directory");
        size_t off = 0;
        bool ok = true;
        while (off < text.size()) {
            ssize_t w = ::write(fd, text.data() + off, text.size() - off);
            if (w <= 0) {
                ok = false;
                break;
            }
            off += static_cast<size_t>(w);
        }
        ok = ok && ::fsync(fd) == 0;
        ::close(fd);
        if (!ok || ::rename(tmp.c_str(), fileOf(record.sandboxId).c_str()) != 0) {
            ::unlink(tmp.c_str());
            return fail(ErrorCode::Internal, "cannot write the post-mortem of " + record.sandboxId +
                                                 "; check the space in the state directory");
        }
        auto it = m_records.find(record.sandboxId);
        if (it != m_records.end() && it->second.snapshotRef != record.snapshotRef)
            replaced = it->second;
        m_records[record.sandboxId] = record;
    }
    if (replaced && m_options.onDrop)
        m_options.onDrop(*replaced);
    prune(nowUnixMs());
    return {};
}

std::vector<PostMortemRecord> PostMortemStore::list(const std::string &sessionId, size_t limit) const
{
    std::vector<PostMortemRecord> out;
    {
        std::lock_guard lock(m_mutex);
        for (const auto &[id, r] : m_records)
            if (sessionId.empty() || r.sessionId == sessionId)
                out.push_back(r);
    }
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
        return a.timeUnixMs != b.timeUnixMs ? a.timeUnixMs > b.timeUnixMs : a.sandboxId < b.sandboxId;
    });
    if (limit > 0 && out.size() > limit)
        out.resize(limit);
    return out;
}

Result<PostMortemRecord> PostMortemStore::get(const std::string &sandboxId) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_records.find(sandboxId);
    if (it == m_records.end())
        return fail(ErrorCode::NotFound, "no post-mortem of sandbox '" + sandboxId +
                                             "' on this pool; it ended normally, or its post-mortem expired — list post-mortems to see what is kept");
    return it->second;
}

size_t PostMortemStore::prune(int64_t now)
{
    std::vector<PostMortemRecord> dropped;
    {
        std::lock_guard lock(m_mutex);
        std::vector<std::pair<int64_t, std::string>> byAge;
        for (auto it = m_records.begin(); it != m_records.end();) {
            if (it->second.timeUnixMs < now - m_options.retentionMs) {
                dropped.push_back(std::move(it->second));
                it = m_records.erase(it);
            } else {
                byAge.emplace_back(it->second.timeUnixMs, it->first);
                ++it;
            }
        }
        if (byAge.size() > m_options.maxCount) {
            std::sort(byAge.begin(), byAge.end());
            for (size_t i = 0; i < byAge.size() - m_options.maxCount; ++i) {
                auto it = m_records.find(byAge[i].second);
                dropped.push_back(std::move(it->second));
                m_records.erase(it);
            }
        }
        std::error_code ec;
        for (const auto &r : dropped)
            fs::remove(fileOf(r.sandboxId), ec);
    }
    for (const auto &r : dropped) {
        spdlog::info("post-mortem of {} ({}) dropped: past its retention or the count limit", r.sandboxId, r.reason);
        if (m_options.onDrop)
            m_options.onDrop(r);
    }
    return dropped.size();
}

size_t PostMortemStore::size() const
{
    std::lock_guard lock(m_mutex);
    return m_records.size();
}

} // namespace paddock::pool
