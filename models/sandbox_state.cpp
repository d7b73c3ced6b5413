#include "models/sandbox_state.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace paddock::console {
namespace {

QString tr(const char *text) { return QCoreApplication::translate("SandboxState", text); }

} // namespace

bool SandboxState::apply(const EventRecord &event)
{
    if (!event.kind.startsWith(u"sandbox.") && event.kind != u"checkpoint")
        return false;
    const QJsonObject payload = QJsonDocument::fromJson(event.payloadJson).object();
    // A checkpoint names the workspace; a sandbox given back with one names it too.
    if (const QString manifest = payload.value(u"manifest").toString();
        !manifest.isEmpty() && (event.kind == u"checkpoint" || event.kind == u"sandbox.released")) {
        if (manifest != checkpoint)
            checkpointAfterCall.clear();   // a checkpoint taken at the release: after no call
        checkpoint = manifest;
        checkpointUnixMs = event.timeUnixMs;
        if (event.kind == u"checkpoint") {
            checkpointStore = payload.value(u"store").toString();
            checkpointAfterCall = payload.value(u"after_call").toString();
        }
    }
    if (event.kind == u"sandbox.restored" || event.kind == u"sandbox.moved")
        restoreMs = payload.value(u"restore_ms").toDouble(restoreMs);
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

QString SandboxState::checkpointText(qint64 nowUnixMs) const
{
    if (checkpoint.isEmpty())
        return tr("none yet");
    const QString where = checkpointStore == u"s3" ? tr("in the S3 bucket") : tr("in the broker's store");
    const qint64 ageS = std::max<qint64>(0, (nowUnixMs - checkpointUnixMs) / 1000);
    const QString age = ageS < 120 ? tr("%1 s old").arg(ageS)
        : ageS < 7200             ? tr("%1 min old").arg(ageS / 60)
                                  : tr("%1 h old").arg(ageS / 3600);
    QString text = tr("%1 %2, %3").arg(checkpoint.left(12), where, age);
    if (!checkpointAfterCall.isEmpty())
        text += tr(", after call %1").arg(checkpointAfterCall);
    if (restoreMs >= 0)
        text += tr("; last restore %1 ms").arg(restoreMs, 0, 'f', restoreMs < 10 ? 1 : 0);
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
