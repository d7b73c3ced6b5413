#pragma once
// [store] in broker.toml: where the broker keeps its sessions' logs (docs/configuration.md,
// docs/deployment.md "A team on PostgreSQL"). Without the table, SQLite in <data_dir>/broker.db;
// with a url, PostgreSQL:
//
//   [store]
//   url = "postgresql://paddock@db.internal:5432/paddock?sslmode=verify-full&sslrootcert=/etc/paddock/db-ca.pem"
//   password_file = "/etc/paddock/db.password"   # mode 0600; or password_env = "PADDOCK_DB_PASSWORD"
//   connect_wait_ms = 30000                        # a start waits this long for a server that is not up
//
// The password is never in broker.toml: a url with one is refused, and password_file or
// password_env (at most one) says where it is; with neither, libpq's own PGPASSWORD or ~/.pgpass
// apply (or no password at all, e.g. peer authentication over a unix socket).
//
// Threads: plain values and pure functions.

#include "common/config_problems.h"
#include "common/result.h"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace paddock::broker_config {

struct StoreConfig {
    std::string url;                      // empty: SQLite in <data_dir>/broker.db
    std::filesystem::path passwordFile;   // holds the password (one line), mode 0600
    std::string passwordEnv;              // the name of an environment variable holding it
    int64_t connectWaitMs = 30000;        // a start retries a server that is not reachable this long
    std::string where;                    // "file:line" of [store], or "--store"; for messages

    bool postgres() const { return !url.empty(); }
};

// The [store] table's keys.
const ConfigSection &storeSection();

// Reads [store] over `config`; paths relative to the file's folder. Problems name file:line: an
// unknown key, a url libpq cannot parse or that carries a password, both password_file and
// password_env.
StoreConfig parseStoreConfig(const std::filesystem::path &file, const toml::table &table, StoreConfig config,
                             ConfigProblems &problems);

// What is left to check once the flags (--store) are applied: a password setting without a url.
// (The url and the password settings are checked where they are read.)
void validateStoreConfig(const StoreConfig &config, ConfigProblems &problems);

// The libpq connection string for the store: url with the password from password_file or
// password_env. Errors name the file or the variable and the fix (FailedPrecondition: a file that
// is missing, unreadable, readable by others or empty; a variable that is not set), or the url
// (InvalidArgument: not a connection string, or one with a password).
Result<std::string> storeConnectionString(const StoreConfig &config);

// Where the password comes from, for messages: "the file /etc/paddock/db.password (password_file)",
// "the environment variable X (password_env)", or libpq's own sources.
std::string passwordSource(const StoreConfig &config);

// For logs and summaries: "PostgreSQL at user@host:port/db (password from ...)" or "SQLite at
// <data_dir>/broker.db". Never the password.
std::string describeStore(const StoreConfig &config, const std::filesystem::path &dataDir);

} // namespace paddock::broker_config
