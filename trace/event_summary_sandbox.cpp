// Sandboxes, checkpoints, egress and debug shells in words (docs/events.md, docs/checkpoints.md,
// docs/egress.md).

#include "trace/event_summary_kinds.h"
#include "trace/safe_text.h"
#include "trace/summary_text.h"

namespace paddock::trace {
namespace {

using nlohmann::json;
using namespace text;

// "lite-1979 (lite, bwrap) from pool local"
std::string sandboxFrom(const json &p, std::string_view idKey = "sandbox_id", std::string_view poolKey = "pool")
{
    std::string out = str(p, idKey);
    const std::string what = join({str(p, "tier"), str(p, "runtime")});
    if (!what.empty())
        out = withDetail(out, "(" + what + ")", " ");
    if (const std::string pool = str(p, poolKey); !pool.empty())
        out = withDetail(out, "pool " + pool, out.empty() ? "" : " from ");
    return out;
}

// "14 files, 48 KiB in 41 ms" of a restore.
std::string restored(const json &p)
{
    std::vector<std::string> parts;
    if (has(p, "restored_files"))
        parts.push_back(count(num(p, "restored_files"), "file", "files"));
    if (has(p, "restored_bytes"))
        parts.push_back(bytes(num(p, "restored_bytes")));
    std::string out = join(parts);
    if (has(p, "restore_ms"))
        out += (out.empty() ? "in " : " in ") + millis(real(p, "restore_ms"));
    return out;
}

// "restored checkpoint 3f2a9c0d1e2f: 14 files in 41 ms", or "... in 41 ms" with no figures.
std::string withRestore(std::string head, const json &p)
{
    const std::string figures = restored(p);
    return withDetail(std::move(head), figures, figures.starts_with("in ") ? " " : ": ");
}

void sandboxClaimed(std::string_view, const json &p, EventLine &line)
{
    std::vector<std::string> parts{sandboxFrom(p)};
    if (has(p, "warm"))
        parts.push_back(flag(p, "warm") ? "warm" : "cold");
    if (has(p, "claim_ms")) {
        parts.push_back("claim " + millis(real(p, "claim_ms")));
        line.latencyMs = num(p, "claim_ms");
    }
    if (const double price = real(p, "price_per_hour"); price > 0)
        parts.push_back(dollars(static_cast<int64_t>(price * 1e6)) + "/h");
    line.summary = join(parts);
}

void sandboxReleased(std::string_view, const json &p, EventLine &line)
{
    std::string head = "released " + sandboxFrom(p);
    const std::string reason = str(p, "reason");
    if (reason == "idle")
        head += ", idle for " + millis(real(p, "idle_limit_ms"));
    else if (reason == "tier_move")
        head += " for a tier move";
    else if (!reason.empty())
        head += " (" + reason + ")";
    std::vector<std::string> parts{head};
    if (has(p, "manifest")) {
        const std::string manifest = str(p, "manifest");
        std::string kept = manifest.empty() ? "empty workspace" : "workspace kept in checkpoint " + shortManifest(manifest);
        if (str(p, "checkpoint") == "new")
            kept += " (taken now: " + join({count(num(p, "files"), "file", "files"), bytes(num(p, "size_bytes")),
                                            bytes(num(p, "sent_bytes")) + " sent", millis(real(p, "checkpoint_ms"))})
                  + ")";
        parts.push_back(kept);
    }
    line.summary = withDetail(join(parts), str(p, "note"), "; ");
}

void sandboxFailed(std::string_view, const json &p, EventLine &line)
{
    line.summary = withDetail("sandbox " + str(p, "sandbox_id") + " failed", join({str(p, "reason"), str(p, "error", 200)}));
    line.isError = true;
}

void sandboxLost(std::string_view, const json &p, EventLine &line)
{
    std::vector<std::string> parts{"lost " + sandboxFrom(p) + " with its pool"};
    if (const std::string call = str(p, "interrupted_call"); !call.empty())
        parts.push_back("interrupted call " + call);
    line.summary = withDetail(join(parts), firstStr(p, {"error", "reason"}, 200));
    line.isError = true;
}

void sandboxMoved(std::string_view, const json &p, EventLine &line)
{
    std::string head = "moved";
    const std::string fromTier = str(p, "from_tier");
    const std::string toTier = str(p, "to_tier");
    if (!fromTier.empty() && !toTier.empty() && fromTier != toTier)
        head += " from tier " + fromTier + " to " + toTier;
    head += " from " + join({str(p, "from_pool"), str(p, "from_sandbox_id")}, " ") + " to "
          + join({str(p, "to_pool"), str(p, "to_sandbox_id")}, " ");
    std::vector<std::string> parts{head};
    const std::string manifest = str(p, "manifest");
    if (str(p, "workspace") == "empty" || (has(p, "manifest") && manifest.empty()))
        parts.push_back("empty workspace (no checkpoint yet)");
    else if (!manifest.empty())
        parts.push_back(withRestore("restored checkpoint " + shortManifest(manifest), p));
    if (const std::string repeats = str(p, "repeats_call"); !repeats.empty() && repeats != "false")
        parts.push_back("repeats call " + repeats);
    if (const std::string reason = str(p, "reason"); !reason.empty() && reason != "tier_override")
        parts.push_back(reason);
    line.latencyMs = num(p, "restore_ms", -1);
    line.summary = join(parts);
}

void sandboxWaiting(std::string_view, const json &p, EventLine &line)
{
    // The broker words the reason for people already ("waiting for a lite sandbox: 32 of 32 in use
    // on every pool; 3 sessions ahead of this one"); the figures are for when it did not.
    std::string reason = str(p, "reason", 200);
    if (reason.empty()) {
        reason = "waiting for a " + str(p, "tier") + " sandbox";
        if (has(p, "max"))
            reason += ": " + std::to_string(num(p, "in_use")) + " of " + std::to_string(num(p, "max")) + " in use";
        if (has(p, "ahead"))
            reason += ", " + count(num(p, "ahead"), "session", "sessions") + " ahead";
        if (const std::string code = str(p, "code"); !code.empty())
            reason += " (" + code + ")";
    }
    line.summary = reason;
}

void checkpointWaiting(std::string_view, const json &p, EventLine &line)
{
    std::string head = "waiting for the checkpoint store";
    if (const std::string store = str(p, "store"); !store.empty())
        head += " (" + store + ")";
    if (const std::string call = str(p, "after_call"); !call.empty())
        head += " to save call " + call;
    else if (const std::string manifest = str(p, "restore"); !manifest.empty())
        head += " to restore checkpoint " + shortManifest(manifest);
    line.summary = withDetail(head, firstStr(p, {"reason", "code"}, 200));
}

void sandboxRestored(std::string_view, const json &p, EventLine &line)
{
    const std::string manifest = str(p, "manifest");
    std::string head = manifest.empty() ? "restored an empty workspace" : "restored checkpoint " + shortManifest(manifest);
    if (const std::string into = sandboxFrom(p); !into.empty())
        head += " into " + into;
    std::vector<std::string> parts{withRestore(head, p)};
    if (const std::string after = str(p, "after"); !after.empty())
        parts.push_back("after the last sandbox went (" + after + ")");
    line.latencyMs = num(p, "restore_ms", -1);
    line.summary = join(parts);
}

// The checkpoint after a step: what changed, what it cost (docs/checkpoints.md).
void checkpoint(std::string_view, const json &p, EventLine &line)
{
    std::vector<std::string> parts{"checkpoint " + count(num(p, "files"), "file", "files"),
                                   std::to_string(num(p, "changed")) + " changed",
                                   std::to_string(num(p, "removed")) + " removed",
                                   bytes(num(p, "sent_bytes")) + " sent"};
    if (has(p, "duration_ms")) {
        parts.push_back(millis(real(p, "duration_ms")));
        line.latencyMs = num(p, "duration_ms");
    }
    if (str(p, "store") == "s3")
        parts.push_back("to S3");
    line.summary = join(parts);
}

// egress.allowed and egress.refused (docs/egress.md).
void egress(std::string_view kind, const json &p, EventLine &line)
{
    const bool allowed = kind == "egress.allowed";
    std::string target = str(p, "host");
    if (const int64_t port = num(p, "port"); port > 0)
        target += ":" + std::to_string(port);
    std::string head = std::string(allowed ? "allowed " : "refused ") + withDetail(str(p, "method"), target, " ");
    if (const std::string address = str(p, "address"); !address.empty() && address != str(p, "host"))
        head += " (" + address + ")";
    std::vector<std::string> parts{head};
    if (!allowed)
        parts.push_back(withDetail(str(p, "reason"), str(p, "detail", 200)));
    if (allowed) {
        if (has(p, "bytes_out") || has(p, "bytes_in"))
            parts.push_back(bytes(num(p, "bytes_out")) + " out / " + bytes(num(p, "bytes_in")) + " in");
        if (has(p, "duration_ms")) {
            parts.push_back(millis(real(p, "duration_ms")));
            line.latencyMs = num(p, "duration_ms");
        }
        if (flag(p, "open"))
            parts.push_back("still open as the command ended");
        parts.push_back(str(p, "detail"));
        if (const std::string error = str(p, "error", 200); !error.empty())
            parts.push_back("error: " + error);
    }
    line.summary = join(parts);
}

void debugShellOpened(std::string_view, const json &p, EventLine &line)
{
    std::vector<std::string> parts{"debug shell " + str(p, "shell_id") + " opened in " + sandboxFrom(p)};
    if (const std::string from = str(p, "post_mortem_sandbox_id"); !from.empty())
        parts.push_back("from the post-mortem of " + from);
    if (has(p, "restored_files"))
        parts.push_back(count(num(p, "restored_files"), "file", "files") + " restored");
    if (const std::string by = str(p, "by"); !by.empty())
        parts.push_back("by " + by);
    line.summary = join(parts);
}

void debugShellExec(std::string_view, const json &p, EventLine &line)
{
    std::string command;
    if (const auto argv = p.find("argv"); argv != p.end() && argv->is_array()) {
        std::vector<std::string> words;
        for (const auto &word : *argv)
            words.push_back(word.is_string() ? word.get<std::string>() : word.dump());
        // `sh -c "..."` is how the CLI runs a line: show the line.
        command = words.size() == 3 && words[1] == "-c" && words[0].ends_with("sh") ? words[2] : join(words, " ");
    }
    std::string ending = has(p, "error") ? "could not run: " + str(p, "error", 200)
                       : num(p, "signal") > 0 ? "killed by signal " + std::to_string(num(p, "signal"))
                                              : "exit " + std::to_string(num(p, "exit_code"));
    if (has(p, "duration_ms")) {
        line.latencyMs = num(p, "duration_ms");
        ending += " in " + millis(real(p, "duration_ms"));
    }
    line.summary = join({"$ " + safeLine(command, kFieldChars), ending, str(p, "by").empty() ? "" : "by " + str(p, "by")});
    line.isError = has(p, "error") || num(p, "exit_code") != 0 || num(p, "signal") > 0;
}

void debugShellClosed(std::string_view, const json &p, EventLine &line)
{
    std::string head = "debug shell " + str(p, "shell_id") + " closed";
    if (const std::string reason = str(p, "reason"); !reason.empty() && reason != "closed")
        head += " (" + reason + ")";
    std::vector<std::string> parts{head};
    if (const std::string by = str(p, "by"); !by.empty())
        parts.push_back("by " + by);
    if (const std::string error = str(p, "release_error", 200); !error.empty())
        parts.push_back("release failed: " + error);
    line.summary = join(parts);
}

} // namespace

namespace kinds {

std::vector<Entry> sandboxKinds()
{
    return {
        {"sandbox.claimed", &sandboxClaimed},       {"sandbox.released", &sandboxReleased},
        {"sandbox.failed", &sandboxFailed},         {"sandbox.lost", &sandboxLost},
        {"sandbox.moved", &sandboxMoved},           {"sandbox.waiting", &sandboxWaiting},
        {"checkpoint.waiting", &checkpointWaiting}, {"sandbox.restored", &sandboxRestored},
        {"checkpoint", &checkpoint},                {"egress.allowed", &egress},
        {"egress.refused", &egress},                {"debug_shell.opened", &debugShellOpened},
        {"debug_shell.exec", &debugShellExec},      {"debug_shell.closed", &debugShellClosed},
    };
}

} // namespace kinds
} // namespace paddock::trace
