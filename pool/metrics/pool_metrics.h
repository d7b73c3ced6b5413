#pragma once
// The pool's instruments (docs/metrics.md, "paddock-pool"), counted by one call where each thing
// happens. The tiers' sandboxes, claim latencies and cold fallbacks are not here: the pool keeps
// them already (SandboxPool::stats), and its /metrics reads them when scraped
// (pool/server/pool_metrics_endpoint.h).
//
// Threads: any; each call is a relaxed atomic add (metrics/registry.h).

#include "metrics/registry.h"

#include <string_view>

namespace paddock::pool_metrics {

struct PoolMetrics {
    metrics::CounterFamily &egressRefusals;   // paddock_pool_egress_refusals_total{reason}
};

// Registered in metrics::registry() at first use.
const PoolMetrics &poolMetrics();

// The egress proxy refused a sandbox's attempt; reason is its code (address_policy.h's
// Decision::reason, bad_request, too_many_connections).
void countEgressRefusal(std::string_view reason);

} // namespace paddock::pool_metrics
