#include "models/console_types.h"

namespace paddock::console {

QString statusName(SessionStatus status)
{
    switch (status) {
    case SessionStatus::Queued: return QStringLiteral("queued");
    case SessionStatus::Running: return QStringLiteral("running");
    case SessionStatus::WaitingApproval: return QStringLiteral("waiting_approval");
    case SessionStatus::Paused: return QStringLiteral("paused");
    case SessionStatus::Succeeded: return QStringLiteral("succeeded");
    case SessionStatus::Failed: return QStringLiteral("failed");
    case SessionStatus::Cancelled: return QStringLiteral("cancelled");
    case SessionStatus::Unknown: break;
    }
    return QStringLiteral("unknown");
}

bool isTerminal(SessionStatus status)
{
    return status == SessionStatus::Succeeded || status == SessionStatus::Failed
        || status == SessionStatus::Cancelled;
}

} // namespace paddock::console
