#include "views/sandbox_card.h"

#include "views/resource_curve_plot.h"
#include "views/theme.h"

#include <QDateTime>
#include <QFormLayout>
#include <QLabel>
#include <QTimer>
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
    m_checkpointLabel = makeValue();
    m_checkpointLabel->setWordWrap(true);
    m_stateLabel = makeValue();
    m_stateLabel->setWordWrap(true);
    form->addRow(tr("Pool"), m_poolLabel);
    form->addRow(tr("Tier"), m_tierLabel);
    form->addRow(tr("Sandbox"), m_sandboxLabel);
    form->addRow(tr("Runtime"), m_runtimeLabel);
    form->addRow(tr("Claim"), m_claimLabel);
    form->addRow(tr("Checkpoint"), m_checkpointLabel);
    form->addRow(tr("State"), m_stateLabel);
    layout->addLayout(form);
    auto *ageTimer = new QTimer(this);
    connect(ageTimer, &QTimer::timeout, this, [this] {
        m_checkpointLabel->setText(m_state.checkpointText(QDateTime::currentMSecsSinceEpoch()));
    });
    ageTimer->start(5000);
    m_samplesTitle = new QLabel(tr("CPU and memory"), this);
    m_samplesTitle->setFont(title->font());
    layout->addWidget(m_samplesTitle);
    m_plot = new ResourceCurvePlot(this);
    m_plot->setObjectName(QStringLiteral("sandboxSamplePlot"));
    m_plot->setCompact(true);
    m_plot->setSeries(&m_series);
    layout->addWidget(m_plot, 1);
    m_commandResources = new QLabel(this);
    m_commandResources->setObjectName(QStringLiteral("commandResources"));
    m_commandResources->setWordWrap(true);
    m_commandResources->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_commandResources);
    clear();
}

QString SandboxCard::poolName() const { return m_state.poolText(m_session); }
QString SandboxCard::sandboxId() const { return m_state.sandboxText(m_session); }

void SandboxCard::addSamples(const QString &sandboxId, const QList<ResourcePoint> &samples)
{
    if (sandboxId != this->sandboxId())
        return;   // a late batch of the previous sandbox
    if (sandboxId != m_seriesSandbox) {
        m_series.clear();
        m_seriesSandbox = sandboxId;
    }
    if (m_series.append(samples) > 0)
        refreshCommandResources();   // a sample may fall inside a command that had none so far
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
    m_state = {};
    m_commands.clear();
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
    bool commands = false;
    for (const EventRecord &event : events) {
        changed |= m_state.apply(event);
        commands |= m_commands.apply(event);
    }
    if (changed)
        refresh();
    else if (commands)
        refreshCommandResources();
}

QString SandboxCard::stateText() const { return m_stateLabel->text(); }

QString SandboxCard::commandResourcesText() const { return m_commandResources->text(); }

void SandboxCard::refreshCommandResources()
{
    // Samples of the previous sandbox (kept until the new one's first arrive) say nothing about
    // the new one's commands.
    static const ResourceSeries kNoSamples;
    const QString text = m_commands.betweenSamplesText(m_seriesSandbox == sandboxId() ? m_series : kNoSamples);
    m_commandResources->setText(text);
    m_commandResources->setVisible(!text.isEmpty());
}

void SandboxCard::refresh()
{
    auto orDash = [](const QString &s) { return s.isEmpty() ? QStringLiteral("–") : s; };
    m_poolLabel->setText(orDash(m_state.poolText(m_session)));
    m_tierLabel->setText(orDash(m_state.tierText(m_session)));
    m_sandboxLabel->setText(orDash(m_state.sandboxText(m_session)));
    m_runtimeLabel->setText(orDash(m_state.runtimeText()));
    m_claimLabel->setText(orDash(m_state.claimText()));
    m_checkpointLabel->setText(m_state.checkpointText(QDateTime::currentMSecsSinceEpoch()));
    m_checkpointLabel->setToolTip(m_state.checkpoint);
    m_stateLabel->setText(m_state.stateText(m_session));
    Theme::setTextRole(m_stateLabel, m_state.failed() ? TextRole::Error : TextRole::Normal);

    const bool live = m_state.live(m_session);
    if (!m_unavailable.isEmpty())
        m_plot->setEmptyText(m_unavailable);
    else if (sandboxId().isEmpty())
        m_plot->setEmptyText(tr("No sandbox yet"));
    else
        m_plot->setEmptyText(live ? tr("Waiting for samples of %1…").arg(sandboxId()) : tr("No samples of %1").arg(sandboxId()));
    refreshCommandResources();
    const QString watch = live ? poolName() + u'/' + sandboxId() : QString();
    if (watch != m_watched) {
        m_watched = watch;
        emit sandboxChanged(live ? poolName() : QString(), live ? sandboxId() : QString());
    }
}

} // namespace paddock::console
