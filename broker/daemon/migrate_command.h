#pragma once
// `paddockd migrate --from broker.db [--to URL] [--password-file FILE | --password-env VAR] [--merge]`:
// the command line around store::migrateToPostgres (broker/store/store_migration.h). The target is
// --to, else broker.toml's [store] url with its password setting; the flags' password settings
// override the file's. Progress ("N of M sessions copied") goes to stderr at most once a second;
// the counts of every table, source against target, to stdout at the end.
//
// Exit codes: 0 copied and checked; 1 the copy failed or a count differed (named; nothing was
// committed); 3 bad input (no source file, a url with a password, no target, a refused login, a
// target that already holds rows without --merge, a schema from a newer paddockd).
//
// Threads: the main thread.

#include "broker/config/broker_config.h"

#include <string>

namespace paddock::daemon {

struct MigrateRequest {
    std::string from;
    std::string to;             // empty: [store] url
    std::string passwordFile;
    std::string passwordEnv;
    bool merge = false;
};

int runMigrate(const MigrateRequest &request, const broker_config::BrokerConfig &config);

} // namespace paddock::daemon
