#include "models/sandbox_state.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QJsonObject>

namespace paddock::console {
namespace {

QString tr(const char *text) { return QCoreApplication::translate("SandboxState", text); }

} // namespace

bool SandboxState::apply(const EventRecord &event)
{
    if (!event.kind.startsWith(u"sandbox."))
        return false;
    const QJsonObject payload = QJsonDocument::fromJson(event.payloadJson).object();
    if (event.kind == u"sandbox.claimed") {
        ++claims;
        pool = payload.value(u"pool").toString();
        sandboxId = payload.value(u"sandbox_id").toString();
        tier = payload.value(u"tier").toString();
        runtime = payload.value(u"runtime").toString();
        host = payload.value(u"host").toString();
        warm = payload.value(u"warm").toBool();
        claimMs = payload.value(u"claim_ms").toDouble(-1);
        phase = Phase::Claimed;
        failure.clear();
    } else if (event.kind == u"sandbox.failed") {
        phase = Phase::Failed;
        const QString reason = payload.value(u"reason").toString();
        const QString error = payload.value(u"error").toString();
        failure = error.isEmpty() ? reason : reason + QStringLiteral(" (") + error + u')';
    } else if (event.kind == u"sandbox.released") {
        phase = Phase::Released;
    }
    return true;
}

QString SandboxState::poolText(const SessionInfo &session) const { return pool.isEmpty() ? session.pool : pool; }
QString SandboxState::tierText(const SessionInfo &session) const { return tier.isEmpty() ? session.tier : tier; }
QString SandboxState::sandboxText(const SessionInfo &session) const
{
    return sandboxId.isEmpty() ? session.sandboxId : sandboxId;
}

QString SandboxState::runtimeText() const
{
    QString text = runtime;
    if (!host.isEmpty())
        text += (text.isEmpty() ? QString() : QStringLiteral(" on ")) + host;
    return text;
}

QString SandboxState::claimText() const
{
    if (claimMs < 0)
        return {};
    // Warm claims take microseconds to a few milliseconds; cold ones, hundreds.
    const QString latency = claimMs < 1 ? tr("%1 µs").arg(claimMs * 1000, 0, 'f', 0)
                                        : tr("%1 ms").arg(claimMs, 0, 'f', claimMs < 10 ? 1 : 0);
    QString text = tr("%1, %2").arg(latency, warm ? tr("warm sandbox") : tr("cold start"));
    if (claims > 1)
        text += tr(" (claim %1)").arg(claims);
    return text;
}

QString SandboxState::stateText(const SessionInfo &session) const
{
    switch (phase) {
    case Phase::Failed: return tr("failed: %1").arg(failure);
    case Phase::Released: return tr("released");
    case Phase::Claimed:
        // A session that ended gave its sandbox back even if no sandbox.released reached us.
        return isTerminal(session.status) ? tr("released (session %1)").arg(statusName(session.status)) : tr("claimed");
    case Phase::None: break;
    }
    return session.status == SessionStatus::Queued ? tr("not claimed yet") : tr("none");
}

bool SandboxState::live(const SessionInfo &session) const
{
    return !sandboxText(session).isEmpty() && phase != Phase::Failed && phase != Phase::Released && !isTerminal(session.status);
}

} // namespace paddock::console
