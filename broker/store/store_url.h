#pragma once
// The PostgreSQL store's address as broker.toml and the command line give it (docs/configuration.md,
// [store]): a libpq URI (postgresql://user@host:5432/db?sslmode=verify-full) or a key=value
// connection string ("host=/run/postgresql dbname=paddock"). The password never travels in it: a
// url that carries one is refused, and the password, read from a file or an environment variable
// by the caller, is added here to the connection string handed to libpq, which is never logged.
//
// Threads: pure functions over values; call from anywhere.

#include "common/result.h"

#include <string>

namespace paddock::store {

// OK when libpq can parse url and it carries no password. InvalidArgument otherwise: libpq's reason
// for one it cannot parse; for a password, a message (without the password) saying to set
// password_file or password_env instead.
Status checkPostgresUrl(const std::string &url);

// Where url points, for messages: "user@host:port/db" (a socket directory as the host), never the
// password.
std::string describePostgresUrl(const std::string &url);

// The user url logs in as: its user, else PGUSER, else the OS user (libpq's default).
std::string postgresUser(const std::string &url);

// url as a libpq key=value connection string, with password added when it is not empty (url's own
// keys, sslmode and sslrootcert included, are kept). InvalidArgument when libpq cannot parse url.
Result<std::string> postgresConninfo(const std::string &url, const std::string &password);

// A value for a libpq key=value connection string: always quoted, \ and ' escaped.
std::string conninfoQuoted(const std::string &value);

} // namespace paddock::store
