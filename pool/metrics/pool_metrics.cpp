#include "pool/metrics/pool_metrics.h"

namespace paddock::pool_metrics {

const PoolMetrics &poolMetrics()
{
    static const PoolMetrics instruments{
        metrics::registry().counterFamily("paddock_pool_egress_refusals_total",
                                          "Connections out of sandboxes that the egress proxy refused, by reason",
                                          {"reason"}),
        metrics::registry().counter("paddock_pool_checkpoints_total",
                                    "Workspace checkpoints of this pool's sandboxes that a broker committed"),
        metrics::registry().counter("paddock_pool_checkpoint_sent_bytes_total",
                                    "Bytes of checkpoint chunks and deltas sent to brokers"),
        metrics::registry().counter("paddock_pool_restore_received_bytes_total",
                                    "Bytes of checkpoint chunks received to restore workspaces"),
    };
    return instruments;
}

void countEgressRefusal(std::string_view reason)
{
    poolMetrics().egressRefusals.with({reason}).inc();
}

void countCheckpointSent(uint64_t bytes)
{
    poolMetrics().checkpointSentBytes.inc(bytes);
}

void countCheckpointCommitted()
{
    poolMetrics().checkpointsCommitted.inc();
}

void countRestoreReceived(uint64_t bytes)
{
    poolMetrics().restoreReceivedBytes.inc(bytes);
}

} // namespace paddock::pool_metrics
