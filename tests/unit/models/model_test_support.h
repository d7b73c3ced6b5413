#pragma once
// Builders shared by the model tests.

#include "models/console_types.h"

#include <QString>

namespace paddock::console::test {

inline SessionInfo session(const QString &id, SessionStatus status, qint64 lastSeq = 1, qint64 costMicros = 0)
{
    SessionInfo s;
    s.id = id;
    s.agent = QStringLiteral("default");
    s.goal = QStringLiteral("goal of ") + id;
    s.model = QStringLiteral("scripted");
    s.playbook = QStringLiteral("demo");
    s.tier = QStringLiteral("lite");
    s.pool = QStringLiteral("local");
    s.status = status;
    s.lastSeq = lastSeq;
    s.costMicros = costMicros;
    s.createdUnixMs = 1'700'000'000'000;
    s.updatedUnixMs = s.createdUnixMs + 65'000;
    s.lastEventKind = QStringLiteral("tool.result");
    return s;
}

inline EventRecord event(qint64 seq, const QString &kind = QStringLiteral("test.tick"), const QByteArray &payload = "{}",
                         qint64 costMicros = 0)
{
    return EventRecord{seq, 1'700'000'000'000 + seq * 10, kind, payload, costMicros};
}

inline QList<EventRecord> events(qint64 from, qint64 to)
{
    QList<EventRecord> out;
    for (qint64 seq = from; seq <= to; ++seq)
        out.append(event(seq));
    return out;
}

} // namespace paddock::console::test
