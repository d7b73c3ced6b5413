#include "broker/metrics/broker_metrics.h"

#include <algorithm>

namespace paddock::broker_metrics {

const BrokerMetrics &brokerMetrics()
{
    auto &r = metrics::registry();
    static const BrokerMetrics instruments{
        r.counter("paddock_store_appends_total", "Appends committed to the event store and acknowledged"),
        r.counter("paddock_store_events_appended_total", "Events committed to the event store"),
        r.histogram("paddock_store_append_duration_seconds",
                    "Time from an append being queued to its acknowledgement after the commit",
                    metrics::latencyBuckets()),
        r.counterFamily("paddock_engine_steps_total", "Steps the step workers finished, by the action taken",
                        {"action"}),
        r.histogramFamily("paddock_model_call_duration_seconds",
                          "Model calls from request to answer, retries included, by session model and outcome",
                          {"model", "outcome"}, metrics::latencyBuckets()),
        r.counterFamily("paddock_model_tokens_total", "Model tokens by session model and direction (input, output)",
                        {"model", "direction"}),
        r.counterFamily("paddock_model_cached_input_tokens_total",
                        "Input tokens served from the provider's prompt cache (a part of the input tokens)",
                        {"model"}),
        r.counter("paddock_checkpoints_total", "Workspace checkpoints made durable in the checkpoint store"),
        r.counter("paddock_checkpoint_stored_bytes_total",
                  "Bytes written to the checkpoint store by checkpoints (new chunks and manifests)"),
    };
    return instruments;
}

void countAppend(std::chrono::steady_clock::time_point enqueuedAt, size_t events) noexcept
{
    const BrokerMetrics &m = brokerMetrics();
    m.appends.inc();
    m.eventsAppended.inc(events);
    m.appendSeconds.observeSince(enqueuedAt);
}

void countStep(std::string_view action)
{
    brokerMetrics().steps.with({action}).inc();
}

void countModelCall(std::string_view model, std::chrono::steady_clock::time_point since, bool ok, int64_t inputTokens,
                    int64_t outputTokens, int64_t cachedTokens)
{
    const BrokerMetrics &m = brokerMetrics();
    m.modelCallSeconds.with({model, ok ? "ok" : "error"}).observeSince(since);
    if (!ok)
        return;
    m.modelTokens.with({model, "input"}).inc(static_cast<uint64_t>(std::max<int64_t>(inputTokens, 0)));
    m.modelTokens.with({model, "output"}).inc(static_cast<uint64_t>(std::max<int64_t>(outputTokens, 0)));
    m.modelCachedTokens.with({model}).inc(static_cast<uint64_t>(std::max<int64_t>(cachedTokens, 0)));
}

void countCheckpoint(int64_t bytesStored) noexcept
{
    const BrokerMetrics &m = brokerMetrics();
    m.checkpoints.inc();
    m.checkpointBytes.inc(static_cast<uint64_t>(std::max<int64_t>(bytesStored, 0)));
}

} // namespace paddock::broker_metrics
