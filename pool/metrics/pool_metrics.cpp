#include "pool/metrics/pool_metrics.h"

namespace paddock::pool_metrics {

const PoolMetrics &poolMetrics()
{
    static const PoolMetrics instruments{
        metrics::registry().counterFamily("paddock_pool_egress_refusals_total",
                                          "Connections out of sandboxes that the egress proxy refused, by reason",
                                          {"reason"}),
    };
    return instruments;
}

void countEgressRefusal(std::string_view reason)
{
    poolMetrics().egressRefusals.with({reason}).inc();
}

} // namespace paddock::pool_metrics
