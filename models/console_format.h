#pragma once
// How the console spells costs, durations and statuses. Shared by the models and the views so that
// a number reads the same in the table, the trace and the plots.
//
// Threads: pure functions; call from anywhere.

#include "models/console_types.h"

namespace paddock::console {

// "$0.0123" below $10, "$12.35" from there on; "$0.0000" for zero.
QString formatCost(qint64 micros);
// "850 ms" below a second, "42s", "1m 05s", "2h 03m", "3d 04h"; "-" for a negative duration.
QString formatDuration(qint64 ms);
// A short latency: "850 ms", "1.2 s".
QString formatLatency(qint64 ms);
// For people: "Running", "Waiting approval", ...
QString statusLabel(SessionStatus status);
// Order used when sorting and grouping by status: what needs attention first.
int statusOrder(SessionStatus status);

} // namespace paddock::console
