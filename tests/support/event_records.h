#pragma once
// Events as the console's models take them, each at a time the test chooses: `ms` after kT0.
// Shared by the trace, span and timeline tests.

#include "models/console_types.h"

namespace paddock::console::test {

inline constexpr qint64 kT0 = 1'800'000'000'000;

inline EventRecord at(qint64 seq, qint64 ms, const char *kind, const QByteArray &payload = "{}", qint64 costMicros = 0)
{
    return EventRecord{seq, kT0 + ms, QString::fromLatin1(kind), payload, costMicros};
}

} // namespace paddock::console::test
