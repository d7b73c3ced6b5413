#include "cli/storage_commands.h"

#include "cli/exit_codes.h"

#include <cstdio>
#include <ctime>

namespace paddock::cli {

namespace {

using nlohmann::json;

// "2026-12-03 15:00" in local time (or UTC).
std::string formatMinute(int64_t unixMs, bool utc)
{
    const std::time_t seconds = static_cast<std::time_t>(unixMs / 1000);
    std::tm tm{};
    if (utc)
        ::gmtime_r(&seconds, &tm);
    else
        ::localtime_r(&seconds, &tm);
    char text[32];
    std::strftime(text, sizeof text, utc ? "%Y-%m-%d %H:%M UTC" : "%Y-%m-%d %H:%M", &tm);
    return text;
}

// "3,401 chunks", "1 manifest"
std::string counted(int64_t count, const std::string &noun)
{
    return formatCount(count) + " " + noun + (count == 1 ? "" : "s");
}

// "310 MiB (41 chunks, 30 manifests)"
std::string freedText(const v1::StorageCollection &c)
{
    return formatByteSize(c.chunk_bytes_freed() + c.manifest_bytes_freed()) + " (" + counted(c.chunks_freed(), "chunk")
        + ", " + counted(c.manifests_freed(), "manifest") + ")";
}

std::string retentionText(int64_t hours)
{
    return hours == 0 ? "ended sessions' checkpoints kept forever (retention_hours = 0)"
                      : "ended sessions kept " + std::to_string(hours) + " h";
}

int runShow(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::StorageInfo storage;
    const grpc::Status status = call.unary(&OperationsStub::GetStorage, v1::GetStorageRequest{}, storage);
    if (!status.ok())
        return call.fail(err, "cannot read the checkpoint store's figures", status);
    if (inv.output == OutputFormat::Json)
        out << storageToJson(storage).dump(2) << "\n";
    else
        out << formatStorage(storage);
    return toInt(ExitCode::Ok);
}

int runCollect(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::CollectStorageRequest request;
    request.set_dry_run(inv.dryRun);
    v1::StorageCollection collection;
    const grpc::Status status = call.unary(&OperationsStub::CollectStorage, request, collection);
    if (!status.ok())
        return call.fail(err, inv.dryRun ? "cannot count what a collection would free" : "cannot collect checkpoints",
                         status);
    if (inv.output == OutputFormat::Json)
        out << storageCollectionToJson(collection).dump(2) << "\n";
    else
        out << formatCollection(collection);
    // Something kept the collection from freeing what it could: scripts should hear of it.
    if (!collection.problem().empty()) {
        err << "paddockctl storage collect: " << collection.problem() << "\n";
        return toInt(ExitCode::Error);
    }
    return toInt(ExitCode::Ok);
}

} // namespace

std::string formatByteSize(int64_t bytes)
{
    if (bytes < 1024)
        return std::to_string(bytes) + " B";
    const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = static_cast<double>(bytes) / 1024.0;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < std::size(units)) {
        value /= 1024.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, value < 10 ? "%.1f %s" : "%.0f %s", value, units[unit]);
    return text;
}

std::string formatCount(int64_t count)
{
    std::string digits = std::to_string(count < 0 ? -count : count);
    for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3)
        digits.insert(static_cast<size_t>(at), ",");
    return count < 0 ? "-" + digits : digits;
}

json storageCollectionToJson(const v1::StorageCollection &c)
{
    return {{"dry_run", c.dry_run()},
            {"time_unix_ms", c.time_unix_ms()},
            {"duration_ms", c.duration_ms()},
            {"chunks_freed", c.chunks_freed()},
            {"chunk_bytes_freed", c.chunk_bytes_freed()},
            {"manifests_freed", c.manifests_freed()},
            {"manifest_bytes_freed", c.manifest_bytes_freed()},
            {"chunks_kept", c.chunks_kept()},
            {"manifests_kept", c.manifests_kept()},
            {"kept_for_grace", c.kept_for_grace()},
            {"missing_manifests", c.missing_manifests()},
            {"live_sessions", c.live_sessions()},
            {"retained_sessions", c.retained_sessions()},
            {"expired_sessions", c.expired_sessions()},
            {"chunks_swept", c.chunks_swept()},
            {"problem", c.problem()}};
}

json storageToJson(const v1::StorageInfo &s)
{
    json out{{"store", s.store()},
             {"where", s.where()},
             {"retention_hours", s.retention_hours()},
             {"grace_ms", s.grace_ms()},
             {"chunks", s.chunks()},
             {"chunk_bytes", s.chunk_bytes()},
             {"manifests", s.manifests()},
             {"manifest_bytes", s.manifest_bytes()},
             {"bytes_stored", s.bytes_stored()},
             {"logical_bytes", s.logical_bytes()},
             {"unreadable_manifests", s.unreadable_manifests()},
             {"dedup_ratio", s.dedup_ratio()},
             {"would_free", storageCollectionToJson(s.would_free())},
             {"computed_unix_ms", s.computed_unix_ms()}};
    out["last_collection"] = s.has_last_collection() ? storageCollectionToJson(s.last_collection()) : json();
    return out;
}

std::string formatStorage(const v1::StorageInfo &s, bool utc)
{
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1fx", s.dedup_ratio());
    std::string text = "checkpoints: " + s.where() + "\n";
    text += "  " + formatByteSize(s.bytes_stored()) + " stored in " + counted(s.chunks(), "chunk") + " and "
        + counted(s.manifests(), "manifest") + "\n";
    text += "  " + formatByteSize(s.logical_bytes()) + " of workspaces"
        + (s.chunk_bytes() > 0 ? " (dedup " + std::string(ratio) + ")" : "");
    if (s.unreadable_manifests() > 0)
        text += "; " + counted(s.unreadable_manifests(), "manifest") + " cannot be read, not counted";
    text += "\n  collection would free " + freedText(s.would_free()) + "\n";
    text += "  " + retentionText(s.retention_hours()) + "\n";
    if (s.has_last_collection())
        text += "  last collection " + formatMinute(s.last_collection().time_unix_ms(), utc) + ": freed "
            + freedText(s.last_collection()) + "\n";
    if (!s.would_free().problem().empty())
        text += "  warning: " + s.would_free().problem() + "\n";
    return text;
}

std::string formatCollection(const v1::StorageCollection &c)
{
    std::string text = (c.dry_run() ? "a collection now would free " : "collected ") + freedText(c) + " in "
        + std::to_string(c.duration_ms()) + " ms\n";
    text += "kept " + counted(c.chunks_kept(), "chunk") + " and " + counted(c.manifests_kept(), "manifest") + " for "
        + counted(c.live_sessions(), "live session") + " and " + formatCount(c.retained_sessions())
        + " ended within the retention (" + formatCount(c.expired_sessions()) + " ended before it)";
    if (c.kept_for_grace() > 0)
        text += "; " + formatCount(c.kept_for_grace()) + " younger than the grace period";
    text += "\n";
    if (c.missing_manifests() > 0)
        text += counted(c.missing_manifests(), "manifest") + " named by sessions "
            + (c.missing_manifests() == 1 ? "is" : "are") + " not in the store\n";
    return text;
}

StorageSubcommands addStorageCommands(CLI::App &app, Invocation &inv)
{
    StorageSubcommands commands;
    commands.storage = app.add_subcommand(
        "storage", "The checkpoint store: bytes stored, deduplication, what a collection would free");
    commands.collect = commands.storage->add_subcommand(
        "collect", "Collect now the checkpoints no session keeps (operators)");
    commands.collect->add_flag("--dry-run", inv.dryRun, "Only say what a collection would free");
    return commands;
}

std::optional<Command> parsedStorageCommand(const StorageSubcommands &commands)
{
    if (commands.collect && commands.collect->parsed())
        return Command::StorageCollect;
    if (commands.storage && commands.storage->parsed())
        return Command::Storage;
    return std::nullopt;
}

int runStorageCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    return inv.command == Command::StorageCollect ? runCollect(inv, call, out, err) : runShow(inv, call, out, err);
}

} // namespace paddock::cli
