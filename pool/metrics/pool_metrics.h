#pragma once
// The pool's instruments (docs/metrics.md, "paddock-pool"), counted by one call where each thing
// happens. The tiers' sandboxes, claim latencies and cold fallbacks are not here: the pool keeps
// them already (SandboxPool::stats), and its /metrics reads them when scraped
// (pool/server/pool_metrics_endpoint.h).
//
// Threads: any; each call is a relaxed atomic add (metrics/registry.h).

#include "metrics/registry.h"

#include <cstdint>
#include <string_view>

namespace paddock::pool_metrics {

struct PoolMetrics {
    metrics::CounterFamily &egressRefusals;   // paddock_pool_egress_refusals_total{reason}
    metrics::Counter &checkpointsCommitted;   // paddock_pool_checkpoints_total
    metrics::Counter &checkpointSentBytes;    // paddock_pool_checkpoint_sent_bytes_total
    metrics::Counter &restoreReceivedBytes;   // paddock_pool_restore_received_bytes_total
};

// Registered in metrics::registry() at first use.
const PoolMetrics &poolMetrics();

// The egress proxy refused a sandbox's attempt; reason is its code (address_policy.h's
// Decision::reason, bad_request, too_many_connections).
void countEgressRefusal(std::string_view reason);

// Checkpoints leave the pool for the broker's checkpoint store (docs/checkpoints.md): the bytes of
// chunks and deltas sent (TakeCheckpoint, ReadCheckpointChunks), each checkpoint the broker
// committed, and the chunk bytes a restore brought in.
void countCheckpointSent(uint64_t bytes);
void countCheckpointCommitted();
void countRestoreReceived(uint64_t bytes);

} // namespace paddock::pool_metrics
