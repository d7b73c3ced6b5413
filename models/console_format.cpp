#include "models/console_format.h"

namespace paddock::console {

QString formatCost(qint64 micros)
{
    const double dollars = static_cast<double>(micros) / 1e6;
    if (dollars < 10.0 && dollars > -10.0)
        return QStringLiteral("$") + QString::number(dollars, 'f', 4);
    return QStringLiteral("$") + QString::number(dollars, 'f', 2);
}

QString formatDuration(qint64 ms)
{
    if (ms < 0)
        return QStringLiteral("-");
    if (ms < 1000)
        return QString::number(ms) + QStringLiteral(" ms");
    const qint64 s = ms / 1000;
    auto two = [](qint64 v) { return QStringLiteral("%1").arg(v, 2, 10, QLatin1Char('0')); };
    if (s < 60)
        return QString::number(s) + QStringLiteral("s");
    if (s < 3600)
        return QString::number(s / 60) + QStringLiteral("m ") + two(s % 60) + QStringLiteral("s");
    if (s < 86400)
        return QString::number(s / 3600) + QStringLiteral("h ") + two((s / 60) % 60) + QStringLiteral("m");
    return QString::number(s / 86400) + QStringLiteral("d ") + two((s / 3600) % 24) + QStringLiteral("h");
}

QString formatLatency(qint64 ms)
{
    if (ms < 0)
        return {};
    if (ms < 1000)
        return QString::number(ms) + QStringLiteral(" ms");
    return QString::number(static_cast<double>(ms) / 1000.0, 'f', 1) + QStringLiteral(" s");
}

QString statusLabel(SessionStatus status)
{
    switch (status) {
    case SessionStatus::Queued: return QStringLiteral("Queued");
    case SessionStatus::Running: return QStringLiteral("Running");
    case SessionStatus::WaitingApproval: return QStringLiteral("Waiting approval");
    case SessionStatus::Paused: return QStringLiteral("Paused");
    case SessionStatus::Succeeded: return QStringLiteral("Succeeded");
    case SessionStatus::Failed: return QStringLiteral("Failed");
    case SessionStatus::Cancelled: return QStringLiteral("Cancelled");
    case SessionStatus::Unknown: break;
    }
    return QStringLiteral("Unknown");
}

int statusOrder(SessionStatus status)
{
    switch (status) {
    case SessionStatus::Running: return 0;
    case SessionStatus::WaitingApproval: return 1;
    case SessionStatus::Paused: return 2;
    case SessionStatus::Queued: return 3;
    case SessionStatus::Failed: return 4;
    case SessionStatus::Succeeded: return 5;
    case SessionStatus::Cancelled: return 6;
    case SessionStatus::Unknown: break;
    }
    return 7;
}

} // namespace paddock::console
