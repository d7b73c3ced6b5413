#include "views/sandbox_card.h"

#include "views/resource_curve_plot.h"
#include "views/theme.h"

#include <QFormLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QVBoxLayout>

namespace paddock::console {

SandboxCard::SandboxCard(QWidget *parent)
    : QFrame(parent)
{
    setObjectName(QStringLiteral("sandboxCard"));
    setFrameShape(QFrame::StyledPanel);
    auto *layout = new QVBoxLayout(this);
    auto *title = new QLabel(tr("Sandbox"), this);
    QFont titleFont = title->font();
    titleFont.setWeight(QFont::DemiBold);
    titleFont.setPointSizeF(titleFont.pointSizeF() * 1.1);
    title->setFont(titleFont);
    layout->addWidget(title);

    auto *form = new QFormLayout;
    form->setHorizontalSpacing(14);
    form->setVerticalSpacing(4);
    auto makeValue = [this] {
        auto *label = new QLabel(this);
        label->setTextInteractionFlags(Qt::TextSelectableByMouse);
        return label;
    };
    m_poolLabel = makeValue();
    m_tierLabel = makeValue();
    m_sandboxLabel = makeValue();
    m_runtimeLabel = makeValue();
    m_claimLabel = makeValue();
    m_stateLabel = makeValue();
    m_stateLabel->setWordWrap(true);
    form->addRow(tr("Pool"), m_poolLabel);
    form->addRow(tr("Tier"), m_tierLabel);
    form->addRow(tr("Sandbox"), m_sandboxLabel);
    form->addRow(tr("Runtime"), m_runtimeLabel);
    form->addRow(tr("Claim"), m_claimLabel);
    form->addRow(tr("State"), m_stateLabel);
    layout->addLayout(form);
    m_samplesTitle = new QLabel(tr("CPU and memory"), this);
    m_samplesTitle->setFont(title->font());
    layout->addWidget(m_samplesTitle);
    m_plot = new ResourceCurvePlot(this);
    m_plot->setObjectName(QStringLiteral("sandboxSamplePlot"));
    m_plot->setCompact(true);
    m_plot->setSeries(&m_series);
    layout->addWidget(m_plot, 1);
    clear();
}

QString SandboxCard::poolName() const { return m_pool.isEmpty() ? m_session.pool : m_pool; }
QString SandboxCard::sandboxId() const { return m_sandboxId.isEmpty() ? m_session.sandboxId : m_sandboxId; }

void SandboxCard::addSamples(const QString &sandboxId, const QList<ResourcePoint> &samples)
{
    if (sandboxId != this->sandboxId())
        return;   // a late batch of the previous sandbox
    if (sandboxId != m_seriesSandbox) {
        m_series.clear();
        m_seriesSandbox = sandboxId;
    }
    m_series.append(samples);
}

void SandboxCard::setLimits(qint64 memoryBytes, double cpu)
{
    m_series.setLimits(memoryBytes, cpu);
}

void SandboxCard::setSamplesUnavailable(const QString &why)
{
    m_unavailable = why;
    refresh();
}

void SandboxCard::clear()
{
    m_session = {};
    m_pool.clear();
    m_tier.clear();
    m_sandboxId.clear();
    m_runtime.clear();
    m_host.clear();
    m_state.clear();
    m_failed = false;
    m_claimMs = -1;
    m_warm = false;
    m_claims = 0;
    m_series.clear();
    m_seriesSandbox.clear();
    refresh();
}

void SandboxCard::setSession(const SessionInfo &session)
{
    m_session = session;
    refresh();
}

void SandboxCard::addEvents(const QList<EventRecord> &events)
{
    bool changed = false;
    for (const EventRecord &event : events) {
        if (!event.kind.startsWith(u"sandbox."))
            continue;
        const QJsonObject payload = QJsonDocument::fromJson(event.payloadJson).object();
        changed = true;
        if (event.kind == u"sandbox.claimed") {
            ++m_claims;
            m_pool = payload.value(u"pool").toString();
            m_sandboxId = payload.value(u"sandbox_id").toString();
            m_tier = payload.value(u"tier").toString();
            m_runtime = payload.value(u"runtime").toString();
            m_host = payload.value(u"host").toString();
            m_warm = payload.value(u"warm").toBool();
            m_claimMs = payload.value(u"claim_ms").toDouble(-1);
            m_failed = false;
            m_state = tr("claimed");
        } else if (event.kind == u"sandbox.failed") {
            m_failed = true;
            const QString reason = payload.value(u"reason").toString();
            const QString error = payload.value(u"error").toString();
            m_state = tr("failed: %1").arg(error.isEmpty() ? reason : reason + QStringLiteral(" (") + error + u')');
        } else if (event.kind == u"sandbox.released") {
            m_failed = false;
            m_state = tr("released");
        }
    }
    if (changed)
        refresh();
}

QString SandboxCard::stateText() const { return m_stateLabel->text(); }

void SandboxCard::refresh()
{
    auto orDash = [](const QString &s) { return s.isEmpty() ? QStringLiteral("–") : s; };
    m_poolLabel->setText(orDash(m_pool.isEmpty() ? m_session.pool : m_pool));
    m_tierLabel->setText(orDash(m_tier.isEmpty() ? m_session.tier : m_tier));
    m_sandboxLabel->setText(orDash(m_sandboxId.isEmpty() ? m_session.sandboxId : m_sandboxId));
    QString runtime = m_runtime;
    if (!m_host.isEmpty())
        runtime += (runtime.isEmpty() ? QString() : QStringLiteral(" on ")) + m_host;
    m_runtimeLabel->setText(orDash(runtime));
    if (m_claimMs >= 0) {
        // Warm claims take microseconds to a few milliseconds; cold ones, hundreds.
        const QString latency = m_claimMs < 1 ? tr("%1 µs").arg(m_claimMs * 1000, 0, 'f', 0)
                                : tr("%1 ms").arg(m_claimMs, 0, 'f', m_claimMs < 10 ? 1 : 0);
        QString claim = tr("%1, %2").arg(latency, m_warm ? tr("warm sandbox") : tr("cold start"));
        if (m_claims > 1)
            claim += tr(" (claim %1)").arg(m_claims);
        m_claimLabel->setText(claim);
    } else {
        m_claimLabel->setText(QStringLiteral("–"));
    }
    QString state = m_state;
    if (isTerminal(m_session.status) && !m_failed && m_state != tr("released") && !m_state.isEmpty())
        state = tr("released (session %1)").arg(statusName(m_session.status));
    if (state.isEmpty())
        state = m_session.status == SessionStatus::Queued ? tr("not claimed yet") : tr("none");
    m_stateLabel->setText(state);
    Theme::setTextRole(m_stateLabel, m_failed ? TextRole::Error : TextRole::Normal);

    const bool live = !sandboxId().isEmpty() && !m_failed && m_state != tr("released") && !isTerminal(m_session.status);
    if (!m_unavailable.isEmpty())
        m_plot->setEmptyText(m_unavailable);
    else if (sandboxId().isEmpty())
        m_plot->setEmptyText(tr("No sandbox yet"));
    else
        m_plot->setEmptyText(live ? tr("Waiting for samples of %1…").arg(sandboxId()) : tr("No samples of %1").arg(sandboxId()));
    const QString watch = live ? poolName() + u'/' + sandboxId() : QString();
    if (watch != m_watched) {
        m_watched = watch;
        emit sandboxChanged(live ? poolName() : QString(), live ? sandboxId() : QString());
    }
}

} // namespace paddock::console
