#pragma once
// The store a broker runs on, as broker.toml's [store] names it (broker_config/store_config.h):
// SQLite in <data_dir>/broker.db by default, or PostgreSQL. Opening PostgreSQL at start:
// - a server that is not reachable (not started yet, a network that is not up) is waited for: a
//   retry every second, a log line every few, for up to [store] connect_wait_ms; then the start
//   fails (Unavailable) naming the address and the key;
// - a refused login fails at once (PermissionDenied), naming the user and where paddockd took the
//   password from, and how to set it;
// - a database that does not exist, another application's, or a schema from a newer paddockd
//   fail at once (FailedPrecondition) with the store's message (postgres_event_store.h).
//
// Threads: the caller's (Broker::start, on paddockd's main thread); wait runs on it.

#include "broker/config/broker_config.h"
#include "broker/store/event_store.h"
#include "common/result.h"

#include <chrono>
#include <functional>
#include <memory>

namespace paddock::daemon {

// Sleeps up to the given time between attempts; false when the broker was asked to stop meanwhile
// (the open then fails with Cancelled).
using StartWait = std::function<bool(std::chrono::milliseconds)>;

// A StartWait that only sleeps.
StartWait sleepingStartWait();

// applicationName: what every PostgreSQL connection calls itself (broker_roster.h); unused on SQLite.
Result<std::unique_ptr<store::EventStore>> openBrokerStore(const broker_config::BrokerConfig &config,
                                                           const StartWait &wait, const std::string &applicationName = {});

// The PostgreSQL store's connection error without the advice it ends with (which speaks of libpq's
// own password sources and of retrying), for messages that give paddockd's own.
std::string connectionFailure(const std::string &storeMessage);

} // namespace paddock::daemon
