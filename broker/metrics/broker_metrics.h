#pragma once
// The broker's instruments (docs/metrics.md, "paddockd"): what its hot paths count, one call at
// each site. The figures paddockd reads from its state when scraped (sessions by status, the
// review queue, the pools' health) are collected by broker/daemon/broker_metrics_endpoint.h
// instead, so nothing here keeps a copy of the store.
//
// Threads: any. Each call is a relaxed atomic add or two (metrics/registry.h); the first use of
// a new label value (a model, an action) takes its family's mutex once.

#include "metrics/registry.h"

#include <chrono>
#include <cstdint>
#include <string_view>

namespace paddock::broker_metrics {

struct BrokerMetrics {
    metrics::Counter &appends;                   // paddock_store_appends_total
    metrics::Counter &eventsAppended;            // paddock_store_events_appended_total
    metrics::Histogram &appendSeconds;           // paddock_store_append_duration_seconds
    metrics::CounterFamily &steps;               // paddock_engine_steps_total{action}
    metrics::HistogramFamily &modelCallSeconds;  // paddock_model_call_duration_seconds{model,outcome}
    metrics::CounterFamily &modelTokens;         // paddock_model_tokens_total{model,direction}
    metrics::CounterFamily &modelCachedTokens;   // paddock_model_cached_input_tokens_total{model}
    metrics::Counter &checkpoints;               // paddock_checkpoints_total
    metrics::Counter &checkpointBytes;           // paddock_checkpoint_stored_bytes_total
};

// Registered in metrics::registry() at first use.
const BrokerMetrics &brokerMetrics();

// An append acknowledged (committed) with `events` events, queued at enqueuedAt.
void countAppend(std::chrono::steady_clock::time_point enqueuedAt, size_t events) noexcept;
// A step finished (its lease given back), by the action it took (the engine's actionName).
void countStep(std::string_view action);
// A model call answered (ok) or failed, asked at `since`, for a session of model `model` (its
// configured name, not the provider's); tokens as the response reported them (input includes the
// cached ones).
void countModelCall(std::string_view model, std::chrono::steady_clock::time_point since, bool ok, int64_t inputTokens,
                    int64_t outputTokens, int64_t cachedTokens);
// A checkpoint made durable in the checkpoint store, with the bytes it wrote there (new chunks
// and its manifest).
void countCheckpoint(int64_t bytesStored) noexcept;

} // namespace paddock::broker_metrics
