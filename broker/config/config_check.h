#pragma once
// `paddockd --check-config`: everything a start checks that can be checked without starting. On
// top of the config's own values (validateBrokerConfig): each pool's TLS and token files, the
// broker's listener certificate and key, the principals against this machine's users, the policy
// file, the secrets file next to the config, the playbook directory, the PostgreSQL store's
// password file or variable, and whether the data and socket directories exist or can be created.
// Nothing is created, opened for writing or dialled (the database is not contacted either):
// the pools are not contacted, so tiers named by default_tier or [[tier_rule]] are not checked
// against what the pools offer.
//
// Threads: plain functions; call from one thread.

#include "broker/config/broker_config.h"
#include "common/config_problems.h"

#include <string>

namespace paddock::broker_config {

// Adds every problem found. Returns the summary printed after "config OK: " (which file, the pools
// and how each is reached, the listeners, the data directory, the policy).
std::string checkBrokerConfig(const BrokerConfig &config, ConfigProblems &problems);

} // namespace paddock::broker_config
