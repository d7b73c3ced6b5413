#pragma once
// The brokers sharing one PostgreSQL database, and the configuration they must share.
//
// Any broker may step any session, so the parts of broker.toml that decide what a step does must be
// the same on every broker of a database: the top-level engine settings (lease_ms, default_tier,
// allow_local_execution, the pool timings, sandbox_idle_release_ms), the pools (name and endpoint),
// [[principal]], [models], [prices], [checkpoints] and the policy file's content. What is the host's
// own may differ: data_dir, socket, workers, log_level, listen_tcp and its TLS files, [store],
// [metrics], the pools' TLS and token files, [checkpoints] credentials_file.
//
// At start, on PostgreSQL, paddockd joins the roster (the brokers table, one row per running broker
// with a digest of each shared section): a broker still running (one of its connections is in
// pg_stat_activity under its application_name, "paddockd <instance>") whose digests differ refuses
// the start, naming the sections, that broker's host and pid, and the fix. Rows of brokers that are
// gone are removed.
//
// Known limits: two brokers that start in the same instant with different configurations may both
// join (the check and the insert are two statements); a configuration change means restarting
// every broker (a rolling change is refused by the brokers still on the old one).
//
// Threads: the caller's (Broker::start).

#include "broker/config/broker_config.h"
#include "broker/store/event_store.h"
#include "common/result.h"

#include <map>
#include <string>

namespace paddock::daemon {

// Section name ("top level", "[[pool]]", "[models]", "policy file", ...) -> digest of its shared
// settings (16 hex digits of SHA-256).
using ConfigSections = std::map<std::string, std::string>;

// The digests of config's shared sections. The config file (if any) is read again for the sections
// it holds; pools come from config (flags included); the policy file by content.
Result<ConfigSections> sharedConfigSections(const broker_config::BrokerConfig &config);

// A new broker instance's name: 16 random hex digits.
std::string newBrokerInstance();
// The application_name of every connection of instance's store.
std::string brokerApplicationName(const std::string &instance);

// Joins the roster as instance, or refuses (FailedPrecondition) when a running broker's sections
// differ.
Status joinBrokerRoster(store::EventStore &store, const std::string &instance, const ConfigSections &sections);

} // namespace paddock::daemon
