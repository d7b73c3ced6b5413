#pragma once
// `paddock-pool --check-config`: what a start checks that can be checked without starting. On top of
// the loader's checks (pool_config.h, `listen` included): each tier's runtime is on PATH (and usable
// here), the sandbox init is where the config says, the state and snapshot directories exist or can
// be created, and which cgroup layout limits will use. Nothing is created, mounted or bound.
//
// Threads: plain functions; call from one thread.

#include "common/config_problems.h"
#include "pool/core/pool_config.h"

#include <string>

namespace paddock::pool {

// config has its defaults applied (applyPoolDefaults). Adds every problem found; returns the
// summary printed after "config OK: " (tiers and runtimes, listen address, state dir, cgroups).
std::string checkPoolConfig(const PoolConfig &config, ConfigProblems &problems);

} // namespace paddock::pool
