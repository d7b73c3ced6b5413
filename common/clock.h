#pragma once

#include <cstdint>

namespace paddock {

int64_t nowUnixMs();        // wall clock, for timestamps that users read
int64_t monotonicUs();      // for durations and leases

} // namespace paddock
