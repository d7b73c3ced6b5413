#pragma once
// paddockctl storage and paddockctl storage collect [--dry-run]: the broker's checkpoint store,
// what it holds, its deduplication and what a collection would free, and a collection now
// (docs/checkpoints.md, "Retention and collection"; docs/cli.md).
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace paddock::cli {

struct StorageSubcommands {
    CLI::App *storage = nullptr, *collect = nullptr;
};

StorageSubcommands addStorageCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedStorageCommand(const StorageSubcommands &commands);
int runStorageCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

// "512 B", "12 KiB", "1.2 GiB", "310 MiB": one decimal below 10 of a unit.
std::string formatByteSize(int64_t bytes);
// "3,401".
std::string formatCount(int64_t count);

nlohmann::json storageCollectionToJson(const v1::StorageCollection &collection);
nlohmann::json storageToJson(const v1::StorageInfo &storage);
// `storage`: where, what is stored, the workspaces it holds, what a collection would free, the
// retention and the last collection; times local unless utc.
std::string formatStorage(const v1::StorageInfo &storage, bool utc = false);
// `storage collect`: what was freed (or would be) and what was kept, and why.
std::string formatCollection(const v1::StorageCollection &collection);

} // namespace paddock::cli
