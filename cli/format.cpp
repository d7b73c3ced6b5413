#include "cli/format.h"

#include "trace/event_summary.h"
#include "trace/safe_text.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <fmt/format.h>

namespace paddock::cli {
namespace {

using nlohmann::json;
using paddock::v1::SessionStatus;

constexpr size_t kGoalWidth = 50;
constexpr size_t kSummaryWidth = 160;
constexpr size_t kOutputLinesShown = 40;    // per stream in a tool.result; --output json has all
constexpr size_t kOutputLineChars = 400;    // a 10 MB line with no newline is one line of a screen or two
constexpr std::string_view kOutputIndent = "        ";

struct StatusNameEntry {
    SessionStatus status;
    std::string_view name;
};

constexpr std::array<StatusNameEntry, 7> kStatusNames{{
    {v1::SESSION_STATUS_QUEUED, "queued"},
    {v1::SESSION_STATUS_RUNNING, "running"},
    {v1::SESSION_STATUS_WAITING_APPROVAL, "waiting_approval"},
    {v1::SESSION_STATUS_PAUSED, "paused"},
    {v1::SESSION_STATUS_SUCCEEDED, "succeeded"},
    {v1::SESSION_STATUS_FAILED, "failed"},
    {v1::SESSION_STATUS_CANCELLED, "cancelled"},
}};

// Characters a terminal shows for text: UTF-8 continuation bytes take no column.
size_t displayWidth(std::string_view text)
{
    return static_cast<size_t>(std::ranges::count_if(text, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string padRight(const std::string &text, size_t width)
{
    const size_t shown = displayWidth(text);
    return shown >= width ? text : text + std::string(width - shown, ' ');
}

std::string padLeft(const std::string &text, size_t width)
{
    const size_t shown = displayWidth(text);
    return shown >= width ? text : std::string(width - shown, ' ') + text;
}

// A string field of a payload as recorded ("" when absent or not a string).
std::string_view rawString(const json &payload, std::string_view key)
{
    const auto it = payload.find(key);
    return it != payload.end() && it->is_string() ? std::string_view(it->get_ref<const std::string &>()) : std::string_view();
}

// The lines of one output stream under a tool.result, indented, cut after kOutputLinesShown, each
// made safe for a terminal: an agent's escape sequences are shown, never run (trace/safe_text.h).
void appendOutput(std::string &out, std::string_view label, std::string_view text)
{
    if (text.empty())
        return;
    if (!label.empty())
        out += std::string(kOutputIndent) + std::string(label) + ":\n";
    size_t shown = 0;
    size_t total = 0;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos)
            end = text.size();
        ++total;
        if (shown < kOutputLinesShown) {
            std::string_view line = text.substr(start, end - start);
            if (!line.empty() && line.back() == '\r')
                line.remove_suffix(1);   // CRLF output
            out += kOutputIndent;
            out += trace::safeLines(line, kOutputLineChars);
            out += '\n';
            ++shown;
        }
        start = end + 1;
    }
    if (total > shown)
        out += fmt::format("{}... {} more lines (--output json shows all)\n", kOutputIndent, total - shown);
}

// "stdout", with the cut at the output limit said when this chunk reached it or came after it.
std::string outputHeading(const json &payload)
{
    if (!payload.is_object())
        return "output";
    std::string heading = trace::safeLine(std::string(rawString(payload, "stream")), 16);
    if (heading.empty())
        heading = "output";
    if (payload.value("cut", false))
        heading += fmt::format(" (cut: only the first {} bytes are shown live; the result keeps the head and tail)",
                               payload.value("limit_bytes", int64_t{0}));
    if (const int64_t dropped = payload.value("dropped_bytes", int64_t{0}); dropped > 0)
        heading += fmt::format(" ({} more bytes were not shown live)", dropped);
    return heading;
}

// A piece of a model's streamed answer: its attempt, and whether readers drop an earlier one's.
std::string deltaHeading(const json &payload)
{
    if (!payload.is_object())
        return "model text";
    std::string heading = fmt::format("attempt {}", payload.value("attempt", int64_t{1}));
    if (const int64_t replaced = payload.value("supersedes", int64_t{0}); replaced > 0)
        heading += fmt::format(" (the stream was retried: attempt {}'s text above is void)", replaced);
    return heading;
}

// Its text under it as lines (a delta may end inside a line; the next one goes on with it), then
// each tool call's fragment of arguments.
void appendDelta(std::string &out, const json &payload)
{
    if (!payload.is_object())
        return;
    appendOutput(out, "", rawString(payload, "text"));
    const auto calls = payload.find("tool_calls");
    if (calls == payload.end() || !calls->is_array())
        return;
    for (const json &call : *calls) {
        if (!call.is_object())
            continue;
        std::string name(rawString(call, "name"));
        const std::string label = fmt::format("tool call {}{} arguments", call.value("index", int64_t{0}),
                                              name.empty() ? std::string() : " (" + trace::safeLine(name, 40) + ")");
        appendOutput(out, label, rawString(call, "arguments"));
    }
}

} // namespace

std::string statusName(SessionStatus status)
{
    for (const auto &entry : kStatusNames) {
        if (entry.status == status)
            return std::string(entry.name);
    }
    return "unknown";
}

std::optional<SessionStatus> statusFromName(std::string_view name)
{
    for (const auto &entry : kStatusNames) {
        if (entry.name == name)
            return entry.status;
    }
    return std::nullopt;
}

bool isFinal(SessionStatus status)
{
    return status == v1::SESSION_STATUS_SUCCEEDED || status == v1::SESSION_STATUS_FAILED
        || status == v1::SESSION_STATUS_CANCELLED;
}

std::string formatCost(int64_t costMicros)
{
    // Integer arithmetic: a double would print 0.00015 as $0.0001 or $0.0002 depending on luck.
    const bool negative = costMicros < 0;
    const int64_t magnitude = negative ? -costMicros : costMicros;
    const int64_t tenThousandths = (magnitude + 50) / 100;
    return fmt::format("{}${}.{:04}", negative ? "-" : "", tenThousandths / 10000, tenThousandths % 10000);
}

std::string formatAge(int64_t sinceUnixMs, int64_t nowUnixMs)
{
    return sinceUnixMs <= 0 ? "-" : formatSpan(nowUnixMs - sinceUnixMs);
}

std::string formatSpan(int64_t ms)
{
    const int64_t seconds = std::max<int64_t>(0, ms / 1000);
    if (seconds < 60)
        return std::to_string(seconds) + "s";
    if (seconds < 3600)
        return std::to_string(seconds / 60) + "m";
    if (seconds < 86400)
        return std::to_string(seconds / 3600) + "h";
    return std::to_string(seconds / 86400) + "d";
}

std::string formatClock(int64_t unixMs, bool utc)
{
    const std::time_t seconds = static_cast<std::time_t>(unixMs / 1000);
    std::tm parts{};
    if (utc)
        gmtime_r(&seconds, &parts);
    else
        localtime_r(&seconds, &parts);
    return fmt::format("{:02}:{:02}:{:02}.{:03}", parts.tm_hour, parts.tm_min, parts.tm_sec, unixMs % 1000);
}

std::string formatIsoTime(int64_t unixMs)
{
    const std::time_t seconds = static_cast<std::time_t>(unixMs / 1000);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", parts.tm_year + 1900, parts.tm_mon + 1,
                       parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, unixMs % 1000);
}

std::string truncateText(std::string_view text, size_t width)
{
    std::string flat(text);
    std::ranges::replace(flat, '\n', ' ');
    std::ranges::replace(flat, '\r', ' ');
    std::ranges::replace(flat, '\t', ' ');
    // What a session's goal or an event says may come from an agent: no control character reaches
    // the terminal.
    flat = trace::safeLine(flat);
    if (displayWidth(flat) <= width)
        return flat;
    const size_t keep = width > 3 ? width - 3 : 0;
    size_t chars = 0;
    size_t cut = 0;
    for (; cut < flat.size(); ++cut) {
        if ((static_cast<unsigned char>(flat[cut]) & 0xC0) != 0x80) {
            if (chars == keep)
                break;
            ++chars;
        }
    }
    return flat.substr(0, cut) + "...";
}

std::string renderTable(const std::vector<std::string> &header, const std::vector<std::vector<std::string>> &rows,
                        const std::vector<size_t> &rightAligned)
{
    std::vector<size_t> widths(header.size(), 0);
    for (size_t i = 0; i < header.size(); ++i)
        widths[i] = displayWidth(header[i]);
    for (const auto &row : rows) {
        for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
            widths[i] = std::max(widths[i], displayWidth(row[i]));
    }
    auto line = [&](const std::vector<std::string> &cells) {
        std::string out;
        for (size_t i = 0; i < cells.size() && i < widths.size(); ++i) {
            const bool last = i + 1 == cells.size();
            const bool right = std::ranges::find(rightAligned, i) != rightAligned.end();
            if (right)
                out += padLeft(cells[i], widths[i]);
            else
                out += last ? cells[i] : padRight(cells[i], widths[i]);
            if (!last)
                out += "  ";
        }
        // Trailing blanks confuse diff-based tests and copy-paste.
        while (!out.empty() && out.back() == ' ')
            out.pop_back();
        return out + "\n";
    };
    std::string out = line(header);
    for (const auto &row : rows)
        out += line(row);
    return out;
}

json sessionToJson(const v1::Session &session)
{
    json tags = json::array();
    for (const auto &tag : session.tags())
        tags.push_back(tag);
    json secrets = json::array();
    for (const auto &name : session.secrets())
        secrets.push_back(name);
    return json{
        {"id", session.id()},
        {"agent", session.agent()},
        {"goal", session.goal()},
        {"model", session.model()},
        {"playbook", session.playbook()},
        {"status", statusName(session.status())},
        {"status_reason", session.status_reason()},
        {"tier", session.tier()},
        {"tier_chooser", session.tier_chooser()},
        {"pool", session.pool()},
        {"sandbox_id", session.sandbox_id()},
        {"steps", session.steps()},
        {"cost_micros", session.cost_micros()},
        {"model_cost_micros", session.model_cost_micros()},
        {"sandbox_cost_micros", session.sandbox_cost_micros()},
        {"budget_micros", session.budget_micros()},
        {"submitted_by", session.submitted_by()},
        {"created_unix_ms", session.created_unix_ms()},
        {"updated_unix_ms", session.updated_unix_ms()},
        {"last_seq", session.last_seq()},
        {"last_event_kind", session.last_event_kind()},
        {"tags", tags},
        {"secrets", secrets},
    };
}

std::string formatSessionTable(std::span<const v1::Session> sessions, int64_t nowUnixMs)
{
    std::vector<std::vector<std::string>> rows;
    rows.reserve(sessions.size());
    for (const auto &session : sessions) {
        // A scripted session may have no goal of its own; its playbook says what it does.
        const std::string goal = !session.goal().empty() ? session.goal()
                               : !session.playbook().empty() ? "playbook " + session.playbook()
                                                             : std::string("-");
        rows.push_back({session.id(), statusName(session.status()), session.agent().empty() ? "-" : session.agent(),
                        session.tier().empty() ? "-" : session.tier(), std::to_string(session.steps()),
                        formatCost(session.cost_micros()), formatAge(session.created_unix_ms(), nowUnixMs),
                        truncateText(goal, kGoalWidth)});
    }
    return renderTable({"ID", "STATUS", "AGENT", "TIER", "STEPS", "COST", "AGE", "GOAL"}, rows, {4, 5});
}

std::string formatSessionDetail(const v1::Session &session, int64_t nowUnixMs)
{
    auto orDash = [](const std::string &value) { return value.empty() ? std::string("-") : trace::safeLine(value); };
    auto when = [&](int64_t unixMs) {
        return unixMs > 0 ? formatIsoTime(unixMs) + " (" + formatAge(unixMs, nowUnixMs) + " ago)" : std::string("-");
    };
    std::string status = statusName(session.status());
    if (!session.status_reason().empty())
        status += ": " + trace::safeLine(session.status_reason());
    std::string tags;
    for (const auto &tag : session.tags())
        tags += (tags.empty() ? "" : ", ") + tag;
    std::string secrets;
    for (const auto &name : session.secrets())
        secrets += (secrets.empty() ? "" : ", ") + name;

    const std::vector<std::pair<std::string, std::string>> fields{
        {"ID", session.id()},
        {"Status", status},
        {"Agent", orDash(session.agent())},
        {"Goal", orDash(session.goal())},
        {"Model", orDash(session.model())},
        {"Playbook", orDash(session.playbook())},
        {"Tier", orDash(session.tier())},
        {"Pool", orDash(session.pool())},
        {"Sandbox", orDash(session.sandbox_id())},
        {"Steps", std::to_string(session.steps())},
        {"Cost", formatCost(session.cost_micros()) + " (model " + formatCost(session.model_cost_micros()) + ", sandbox "
                     + formatCost(session.sandbox_cost_micros()) + ")"
                     + (session.budget_micros() ? " of a " + formatCost(session.budget_micros()) + " budget" : "")},
        {"Created", when(session.created_unix_ms())},
        {"Updated", when(session.updated_unix_ms())},
        {"Last event", session.last_seq() > 0 ? std::to_string(session.last_seq()) + " " + session.last_event_kind()
                                              : std::string("-")},
        {"Tags", orDash(tags)},
        {"Secrets", orDash(secrets)},
    };
    std::string out;
    for (const auto &[name, value] : fields)
        out += padRight(name + ":", 12) + value + "\n";
    return out;
}

json eventToJson(const v1::Event &event)
{
    // The payload goes in as an object so that `jq .payload.stdout` works; a payload that is not
    // JSON (it should always be) is kept as a string rather than dropped.
    json payload = json::parse(event.payload_json(), nullptr, false);
    if (payload.is_discarded())
        payload = event.payload_json();
    return json{
        {"session_id", event.session_id()},
        {"seq", event.seq()},
        {"time_unix_ms", event.time_unix_ms()},
        {"time", formatIsoTime(event.time_unix_ms())},
        {"kind", event.kind()},
        {"payload", payload},
        {"cost_micros", event.cost_micros()},
    };
}

std::string eventSummary(std::string_view kind, std::string_view payloadJson, int64_t costMicros)
{
    // The console's words (trace/event_summary.h): every payload field already made safe.
    return truncateText(trace::summarize(kind, payloadJson, costMicros), kSummaryWidth);
}

std::string formatEvent(const v1::Event &event, bool utc, EventPrintState *state)
{
    // A cost event's line names its amount; any other's cost goes in brackets after it.
    const bool isCost = event.kind() == "cost";
    const bool isOutput = event.kind() == "tool.output";
    const bool isDelta = event.kind() == "model.delta";
    const json payload = isOutput || isDelta ? json::parse(event.payload_json(), nullptr, false) : json();
    // A chunk of output or of a streamed answer: what it is on the line, its text under it (not twice).
    const std::string summary = isOutput ? outputHeading(payload)
        : isDelta                        ? deltaHeading(payload)
                                         : eventSummary(event.kind(), event.payload_json(), isCost ? event.cost_micros() : -1);
    std::string out = fmt::format("{:>6}  {}  {:<16} {}", event.seq(), formatClock(event.time_unix_ms(), utc),
                                  trace::safeLine(event.kind(), 40), summary);
    if (event.cost_micros() != 0 && !isCost)
        out += "  [" + formatCost(event.cost_micros()) + "]";
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    out += '\n';
    if (isOutput) {
        // A running command's output as it came: its lines under the event, made safe like the
        // result's. A chunk may end inside a line; the next one goes on with it.
        if (payload.is_object()) {
            appendOutput(out, "", rawString(payload, "text"));
            if (state)
                state->shownLive.insert(std::string(rawString(payload, "call_id")));
        }
    }
    if (isDelta)
        appendDelta(out, payload);
    if (event.kind() == "tool.result") {
        const json result = json::parse(event.payload_json(), nullptr, false);
        if (result.is_object()) {
            if (state && state->shownLive.contains(std::string(rawString(result, "call_id")))) {
                out += std::string(kOutputIndent) + "(output shown above as it ran; --output json has the result's copy)\n";
            } else {
                appendOutput(out, "", rawString(result, "stdout"));
                appendOutput(out, "stderr", rawString(result, "stderr"));
            }
            appendOutput(out, "", rawString(result, "content"));
        }
    }
    return out;
}

json poolsToJson(const v1::ListPoolsResponse &pools)
{
    json list = json::array();
    for (const auto &pool : pools.pools()) {
        json tiers = json::array();
        for (const auto &tier : pool.tiers()) {
            tiers.push_back({{"name", tier.tier().name()},
                             {"runtime", tier.tier().runtime()},
                             {"warm", tier.warm()},
                             {"claimed", tier.claimed()},
                             {"max", tier.max()},
                             {"hit_rate", tier.hit_rate()},
                             {"cold_fallbacks", tier.cold_fallbacks()},
                             {"isolation",
                              {{"identity", tier.isolation_identity()},
                               {"seccomp", tier.isolation_seccomp()},
                               {"etc", tier.isolation_etc()}}}});
        }
        json history = json::array();
        for (const auto &sample : pool.history()) {
            json h{{"time_unix_ms", sample.time_unix_ms()}, {"healthy", sample.healthy()},
                   {"latency_ms", sample.latency_ms()}, {"warm", sample.warm()}, {"claimed", sample.claimed()},
                   {"max", sample.max()}};
            if (!sample.error().empty())
                h["error"] = sample.error();
            history.push_back(std::move(h));
        }
        list.push_back({{"name", pool.name()},
                        {"endpoint", pool.endpoint()},
                        {"healthy", pool.healthy()},
                        {"local", pool.local()},
                        {"execution", pool.local() ? "local execution" : "remote"},
                        {"transport", pool.transport()},
                        {"token", pool.token()},
                        {"error", pool.error()},
                        {"checked_unix_ms", pool.checked_unix_ms()},
                        {"unhealthy_since_unix_ms", pool.unhealthy_since_unix_ms()},
                        {"history", history},
                        {"disk_limits", pool.disk_limits()},
                        {"cgroups", pool.cgroups()},
                        {"lost", pool.lost()},
                        {"sessions_moved_away", pool.sessions_moved_away()},
                        {"moved_session_ids", std::vector<std::string>(pool.moved_session_ids().begin(),
                                                                       pool.moved_session_ids().end())},
                        {"tiers", tiers}});
    }
    return json{{"local_execution", pools.local_execution()}, {"pools", list}};
}

std::string formatPoolsTable(const v1::ListPoolsResponse &pools)
{
    std::vector<std::vector<std::string>> rows;
    for (const auto &pool : pools.pools()) {
        std::string tiers;
        for (const auto &tier : pool.tiers()) {
            tiers += (tiers.empty() ? "" : ", ")
                   + fmt::format("{} {} warm/{} claimed/{} max", tier.tier().name(), tier.warm(), tier.claimed(),
                                 tier.max());
        }
        std::string health = pool.healthy() ? "healthy" : pool.lost() ? "lost" : "unhealthy";
        if (!pool.error().empty())
            health += " (" + pool.error() + ")";
        std::string transport = pool.transport().empty() ? "plaintext" : pool.transport();
        if (pool.token())
            transport += "+token";
        rows.push_back({pool.name(), pool.endpoint(), health, pool.local() ? "local execution" : "remote", transport,
                        tiers.empty() ? "-" : tiers});
    }
    std::string out = renderTable({"NAME", "ENDPOINT", "HEALTH", "EXECUTION", "TRANSPORT", "TIERS"}, rows);
    if (pools.pools().empty())
        out += "no pools configured: start paddockd with --pool NAME=HOST:PORT\n";
    // Whether the tiers' limits hold on each pool: memory, cpu and pids (cgroups), and disk_mb
    // (btrfs qgroups), and why not.
    for (const auto &pool : pools.pools()) {
        if (pool.sessions_moved_away() > 0) {
            std::string ids;
            for (const auto &id : pool.moved_session_ids())
                ids += (ids.empty() ? "" : ", ") + id;
            out += fmt::format("{}: {} session(s) moved to other pools after it was lost, with their workspaces "
                               "restored from checkpoints: {}\n",
                               pool.name(), pool.sessions_moved_away(), ids);
        }
        if (!pool.cgroups().empty())
            out += pool.name() + ": cgroups: " + pool.cgroups() + "\n";
        if (!pool.disk_limits().empty())
            out += pool.name() + ": disk limits: " + pool.disk_limits() + "\n";
        // What each tier promises about its host (docs/security.md).
        for (const auto &tier : pool.tiers()) {
            if (tier.isolation_identity().empty())
                continue;   // a pool from before the report
            out += pool.name() + "/" + tier.tier().name() + ": identity: " + tier.isolation_identity() +
                   "; seccomp: " + tier.isolation_seccomp() + "; /etc: " + tier.isolation_etc() + "\n";
        }
    }
    if (pools.local_execution())
        out += "local execution: agents' commands run on the broker's own machine (development mode; "
               "allow_local_execution = true)\n";
    return out;
}

} // namespace paddock::cli
