#include "views/sandbox_inspector.h"

#include "models/console_format.h"
#include "models/post_mortem_model.h"
#include "models/snapshot_files_model.h"
#include "views/debug_shell_panel.h"
#include "views/resource_curve_plot.h"
#include "views/snapshot_browser.h"
#include "views/theme.h"

#include <QComboBox>
#include <QDateTime>
#include <QEvent>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
QLabel *boldLabel(const QString &text, QWidget *parent, double scale = 1.1)
{
    auto *label = new QLabel(text, parent);
    QFont font = label->font();
    font.setWeight(QFont::DemiBold);
    font.setPointSizeF(font.pointSizeF() * scale);
    label->setFont(font);
    return label;
}

QPlainTextEdit *outputPane(QWidget *parent, const QString &name)
{
    auto *edit = new QPlainTextEdit(parent);
    edit->setObjectName(name);
    edit->setReadOnly(true);
    edit->setLineWrapMode(QPlainTextEdit::NoWrap);
    edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    return edit;
}
} // namespace

SandboxInspector::SandboxInspector(QWidget *parent)
    : QWidget(parent)
{
    setObjectName(QStringLiteral("sandboxInspector"));
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    auto *splitter = new QSplitter(Qt::Horizontal, this);
    splitter->setObjectName(QStringLiteral("inspectorSplitter"));

    QWidget *left = createFailureList(splitter);
    QWidget *right = createFailureDetails(splitter);

    splitter->addWidget(left);
    splitter->addWidget(right);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 5);
    splitter->setSizes({400, 860});
    layout->addWidget(splitter, 1);

    connect(m_refresh, &QToolButton::clicked, this, &SandboxInspector::refreshRequested);
    connect(m_retry, &QPushButton::clicked, this, [this] {
        const QString tier = m_retryTier->currentData().toString();
        if (m_retryKnown && !tier.isEmpty())
            emit retryRequested(tier);
    });
    connect(m_retryTier, &QComboBox::currentIndexChanged, this, &SandboxInspector::updateRetry);
    connect(m_openSession, &QPushButton::clicked, this, [this] {
        if (!m_current.sessionId.isEmpty())
            emit openSessionRequested(m_current.sessionId);
    });
    showPostMortem({});
}

// Left: recent failures.
QWidget *SandboxInspector::createFailureList(QWidget *splitter)
{
    auto *left = new QWidget(splitter);
    auto *leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    auto *listHeader = new QHBoxLayout;
    listHeader->addWidget(boldLabel(tr("Recent failures"), left));
    listHeader->addStretch();
    m_refresh = new QToolButton(left);
    m_refresh->setText(tr("Refresh"));
    m_refresh->setToolTip(tr("Ask the pools for their post-mortems again (F5)"));
    listHeader->addWidget(m_refresh);
    leftLayout->addLayout(listHeader);
    m_failures = new QTableView(left);
    m_failures->setObjectName(QStringLiteral("failuresTable"));
    m_failures->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_failures->setSelectionMode(QAbstractItemView::SingleSelection);
    m_failures->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_failures->setAlternatingRowColors(true);
    m_failures->setShowGrid(false);
    m_failures->setWordWrap(false);
    m_failures->verticalHeader()->setVisible(false);
    m_failures->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_failures->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 8);
    leftLayout->addWidget(m_failures, 1);
    m_listStatus = new QLabel(left);
    m_listStatus->setObjectName(QStringLiteral("failuresStatus"));
    m_listStatus->setWordWrap(true);
    Theme::setTextRole(m_listStatus, TextRole::Muted);
    leftLayout->addWidget(m_listStatus);
    return left;
}

// Right: the chosen failure, what happened and how to retry it, over the tabs.
QWidget *SandboxInspector::createFailureDetails(QWidget *splitter)
{
    auto *right = new QWidget(splitter);
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(8, 0, 0, 0);
    auto *titleRow = new QHBoxLayout;
    m_reason = boldLabel(QString(), right, 1.25);
    m_reason->setObjectName(QStringLiteral("inspectorReason"));
    m_title = boldLabel(tr("Choose a failure on the left"), right, 1.25);
    m_title->setObjectName(QStringLiteral("inspectorTitle"));
    m_title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_openSession = new QPushButton(tr("Open session"), right);
    m_openSession->setEnabled(false);
    titleRow->addWidget(m_reason);
    titleRow->addWidget(m_title, 1);
    titleRow->addWidget(m_openSession);
    rightLayout->addLayout(titleRow);
    m_meta = new QLabel(right);
    m_meta->setObjectName(QStringLiteral("inspectorMeta"));
    m_meta->setWordWrap(true);
    m_meta->setTextInteractionFlags(Qt::TextSelectableByMouse);
    Theme::setTextRole(m_meta, TextRole::Muted);
    rightLayout->addWidget(m_meta);
    m_command = new QLabel(right);
    m_command->setObjectName(QStringLiteral("inspectorCommand"));
    m_command->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_command->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    rightLayout->addWidget(m_command);

    auto *retryRow = new QHBoxLayout;
    retryRow->addWidget(new QLabel(tr("Retry on tier"), right));
    m_retryTier = new QComboBox(right);
    m_retryTier->setObjectName(QStringLiteral("retryTier"));
    retryRow->addWidget(m_retryTier);
    m_retry = new QPushButton(tr("Retry"), right);
    m_retry->setObjectName(QStringLiteral("retryButton"));
    retryRow->addWidget(m_retry);
    m_retryNote = new QLabel(right);
    m_retryNote->setObjectName(QStringLiteral("retryNote"));
    m_retryNote->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    Theme::setTextRole(m_retryNote, TextRole::Muted);
    retryRow->addWidget(m_retryNote, 1);
    rightLayout->addLayout(retryRow);

    m_tabs = new QTabWidget(right);
    m_tabs->setObjectName(QStringLiteral("inspectorTabs"));
    auto *resources = new QWidget(m_tabs);
    auto *resourcesLayout = new QVBoxLayout(resources);
    resourcesLayout->setContentsMargins(0, 0, 0, 0);
    m_plot = new ResourceCurvePlot(resources);
    resourcesLayout->addWidget(m_plot, 1);
    m_commandResources = new QLabel(resources);
    m_commandResources->setObjectName(QStringLiteral("commandResources"));
    m_commandResources->setWordWrap(true);
    m_commandResources->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_commandResources->setVisible(false);
    resourcesLayout->addWidget(m_commandResources);
    m_tabs->addTab(resources, tr("Resources"));

    m_tabs->addTab(createOutputTab(), tr("Output"));
    m_tabs->addTab(createProcessesTab(), tr("Processes"));

    m_browser = new SnapshotBrowser(m_tabs);
    m_tabs->addTab(m_browser, tr("Snapshot files"));
    m_shell = new DebugShellPanel(m_tabs);
    m_tabs->addTab(m_shell, tr("Debug shell"));
    rightLayout->addWidget(m_tabs, 1);
    return right;
}

QWidget *SandboxInspector::createOutputTab()
{
    auto *output = new QWidget(m_tabs);
    auto *outputLayout = new QVBoxLayout(output);
    outputLayout->setContentsMargins(0, 4, 0, 0);
    m_outputNote = new QLabel(output);
    Theme::setTextRole(m_outputNote, TextRole::Muted);
    outputLayout->addWidget(m_outputNote);
    auto *outputSplit = new QSplitter(Qt::Vertical, output);
    auto *stdoutBox = new QWidget(outputSplit);
    auto *stdoutLayout = new QVBoxLayout(stdoutBox);
    stdoutLayout->setContentsMargins(0, 0, 0, 0);
    stdoutLayout->addWidget(new QLabel(tr("stdout (the last 64 KiB)"), stdoutBox));
    m_stdout = outputPane(stdoutBox, QStringLiteral("postMortemStdout"));
    stdoutLayout->addWidget(m_stdout);
    auto *stderrBox = new QWidget(outputSplit);
    auto *stderrLayout = new QVBoxLayout(stderrBox);
    stderrLayout->setContentsMargins(0, 0, 0, 0);
    stderrLayout->addWidget(new QLabel(tr("stderr (the last 64 KiB)"), stderrBox));
    m_stderr = outputPane(stderrBox, QStringLiteral("postMortemStderr"));
    stderrLayout->addWidget(m_stderr);
    outputLayout->addWidget(outputSplit, 1);
    return output;
}

QWidget *SandboxInspector::createProcessesTab()
{
    auto *processes = new QWidget(m_tabs);
    auto *processesLayout = new QVBoxLayout(processes);
    processesLayout->setContentsMargins(0, 4, 0, 0);
    m_processesNote = new QLabel(processes);
    m_processesNote->setWordWrap(true);
    Theme::setTextRole(m_processesNote, TextRole::Muted);
    processesLayout->addWidget(m_processesNote);
    m_processes = new QTableWidget(0, 5, processes);
    m_processes->setObjectName(QStringLiteral("postMortemProcesses"));
    m_processes->setHorizontalHeaderLabels({tr("PID"), tr("PPID"), tr("State"), tr("RSS"), tr("Command")});
    m_processes->horizontalHeader()->setStretchLastSection(true);
    m_processes->verticalHeader()->setVisible(false);
    m_processes->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_processes->setShowGrid(false);
    processesLayout->addWidget(m_processes, 1);
    return processes;
}

void SandboxInspector::setModels(PostMortemListModel *failures, SnapshotFilesModel *files)
{
    m_failuresModel = failures;
    m_failures->setModel(failures);
    QHeaderView *h = m_failures->horizontalHeader();
    h->setStretchLastSection(true);
    const QList<QPair<int, int>> widths = {{PostMortemListModel::Time, 110}, {PostMortemListModel::Reason, 120},
                                           {PostMortemListModel::Session, 100}, {PostMortemListModel::Tier, 70},
                                           {PostMortemListModel::Pool, 70}, {PostMortemListModel::Exit, 70}};
    for (const auto &[column, width] : widths)
        h->resizeSection(column, width);
    m_browser->setModel(files);
    connect(m_failures->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex &index) {
        if (m_selecting || !index.isValid())
            return;
        const QString pool = index.data(PostMortemListModel::PoolRole).toString();
        const QString sandbox = index.data(PostMortemListModel::SandboxIdRole).toString();
        if (pool != m_current.pool || sandbox != m_current.sandboxId)
            emit postMortemRequested(pool, sandbox);
    });
    // A refreshed list keeps the open failure selected.
    connect(failures, &QAbstractItemModel::modelReset, this, [this] { selectInList(m_current.pool, m_current.sandboxId); });
}

void SandboxInspector::selectInList(const QString &pool, const QString &sandboxId)
{
    if (!m_failuresModel)
        return;
    const int row = m_failuresModel->rowOf(pool, sandboxId);
    m_selecting = true;
    if (row >= 0) {
        m_failures->selectRow(row);
        m_failures->scrollTo(m_failuresModel->index(row, 0));
    } else {
        m_failures->clearSelection();
    }
    m_selecting = false;
}

void SandboxInspector::showLoading(const QString &pool, const QString &sandboxId)
{
    PostMortemInfo pending;
    pending.pool = pool;
    pending.sandboxId = sandboxId;
    showPostMortem(pending);
    m_title->setText(tr("Reading the post-mortem of %1 on %2…").arg(sandboxId, pool));
    selectInList(pool, sandboxId);
}

void SandboxInspector::showError(const QString &message)
{
    m_reason->clear();
    m_title->setText(message);
    Theme::setTextRole(m_title, TextRole::Error);
}

void SandboxInspector::setCommandResources(const CommandResources &command)
{
    const QString text = postMortemCommandText(command, m_current, m_series);
    m_commandResources->setText(text);
    m_commandResources->setVisible(!text.isEmpty());
}

QString SandboxInspector::commandResourcesText() const { return m_commandResources->text(); }

void SandboxInspector::setListStatus(const QString &text, bool isError)
{
    m_listStatus->setText(text);
    Theme::setTextRole(m_listStatus, isError ? TextRole::Error : TextRole::Muted);
}

void SandboxInspector::showPostMortem(const PostMortemInfo &pm)
{
    m_current = pm;
    const bool any = !pm.sandboxId.isEmpty();
    Theme::setTextRole(m_title, TextRole::Normal);
    m_reason->setText(any ? postMortemReasonLabel(pm.reason) : QString());
    m_reason->setVisible(any);
    if (!any) {
        m_title->setText(tr("Choose a failure on the left"));
        m_meta->setText(tr("A failed session's sandbox also opens from the sessions table (right-click > Inspect "
                           "sandbox) and from a session's toolbar."));
        m_command->clear();
    } else {
        m_title->setText(tr("sandbox %1").arg(pm.sandboxId));
        QStringList meta;
        if (!pm.sessionId.isEmpty())
            meta << tr("session %1").arg(pm.sessionId);
        meta << tr("pool %1").arg(pm.pool);
        if (!pm.tier.isEmpty())
            meta << tr("tier %1").arg(pm.tier) + (pm.runtime.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(pm.runtime));
        meta << postMortemExitText(pm);
        if (pm.durationMs > 0)
            meta << tr("after %1").arg(formatDuration(qint64(pm.durationMs)));
        if (pm.timeUnixMs > 0)
            meta << QDateTime::fromMSecsSinceEpoch(pm.timeUnixMs).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
        if (!pm.detail.isEmpty())
            meta << pm.detail;
        m_meta->setText(meta.join(QStringLiteral(" · ")));
        m_command->setText(pm.argv.isEmpty() ? QString() : QStringLiteral("$ ") + pm.argv.join(u' '));
    }
    m_openSession->setEnabled(any && !pm.sessionId.isEmpty());
    refreshHeaderColors();

    // Resources up to the failure.
    m_series.setSamples(pm.samples);
    m_series.setLimits(pm.memoryLimitBytes, pm.cpuLimit);
    m_plot->setSeries(&m_series);
    m_plot->setEmptyText(any ? tr("No resource samples were kept (the sandbox ended within its first second)")
                             : tr("No failure chosen"));
    setCommandResources({});
    m_plot->setFailureAt(!pm.samples.isEmpty() && pm.timeUnixMs > 0 ? (pm.timeUnixMs - m_series.originUnixMs()) / 1000.0 : -1,
                         tr("the failure"));

    // Output.
    m_stdout->setPlainText(QString::fromUtf8(pm.lastStdout));
    m_stderr->setPlainText(QString::fromUtf8(pm.lastStderr));
    m_outputNote->setText(any ? tr("%1 of stdout and %2 of stderr produced in all; the last 64 KiB of each kept")
                                    .arg(formatBytes(pm.stdoutBytes), formatBytes(pm.stderrBytes))
                              : QString());

    // Processes.
    m_processes->setRowCount(int(pm.processes.size()));
    for (int row = 0; row < pm.processes.size(); ++row) {
        const ProcessEntry &p = pm.processes.at(row);
        const QStringList cells = {QString::number(p.pid), QString::number(p.ppid), p.state, formatBytes(p.rssBytes), p.command};
        for (int column = 0; column < cells.size(); ++column)
            m_processes->setItem(row, column, new QTableWidgetItem(cells.at(column)));
    }
    m_processesNote->setText(!pm.processesNote.isEmpty() ? pm.processesNote
                             : pm.processes.isEmpty() && any ? tr("No process list was taken")
                                                             : QString());

    // Snapshot.
    if (!any)
        m_browser->setStatusText(tr("No failure chosen"));
    else if (pm.snapshotRef.isEmpty())
        m_browser->setStatusText(pm.snapshotError.isEmpty() ? tr("No workspace snapshot was kept of this sandbox")
                                                            : tr("No workspace snapshot: %1").arg(pm.snapshotError),
                                 true);
    else
        m_browser->setStatusText(tr("Listing snapshot %1…").arg(pm.snapshotRef));
    m_shell->setTarget(pm.pool, pm.sandboxId, pm.snapshotRef, pm.tier);
    updateRetry();
}

void SandboxInspector::refreshHeaderColors()
{
    const bool any = !m_current.sandboxId.isEmpty();
    const QColor color = m_current.reason == u"nonzero_exit" ? Theme::statusColor(SessionStatus::WaitingApproval) : Theme::errorColor();
    m_reason->setStyleSheet(any ? QStringLiteral("color: %1; padding: 0 8px 0 0;").arg(color.name()) : QString());
}

void SandboxInspector::setRetrySession(const SessionInfo &session, bool known)
{
    m_retrySession = session;
    m_retryKnown = known;
    updateRetry();
}

void SandboxInspector::setTiers(const QStringList &tiers)
{
    const QString current = m_retryTier->currentData().toString();
    m_retryTier->clear();
    for (const QString &tier : tiers)
        m_retryTier->addItem(tier, tier);
    // Another tier than the failed one is the point; preselect the first that differs.
    int index = current == m_current.tier ? -1 : m_retryTier->findData(current);
    if (index < 0) {
        for (int i = 0; i < m_retryTier->count(); ++i) {
            if (m_retryTier->itemData(i).toString() != m_current.tier) {
                index = i;
                break;
            }
        }
    }
    m_retryTier->setCurrentIndex(qMax(0, index));
    m_shell->setTiers(tiers);
    updateRetry();
}

void SandboxInspector::updateRetry()
{
    const QString tier = m_retryTier->currentData().toString();
    const bool canRetry = m_retryKnown && !tier.isEmpty() && !m_current.sessionId.isEmpty();
    m_retry->setEnabled(canRetry);
    m_retryTier->setEnabled(m_retryKnown);
    if (m_current.sessionId.isEmpty()) {
        m_retryNote->setText(m_current.sandboxId.isEmpty() ? QString() : tr("this sandbox served no session"));
    } else if (!m_retryKnown) {
        m_retryNote->setText(tr("session %1 is not in this broker's list, so there is nothing to resubmit").arg(m_current.sessionId));
    } else {
        const QString what = !m_retrySession.playbook.isEmpty()
                                 ? tr("playbook %1").arg(m_retrySession.playbook)
                                 : tr("goal \"%1\" (%2)").arg(m_retrySession.goal.left(60), m_retrySession.model);
        m_retryNote->setText(tr("submits %1 again as a new session on tier %2%3")
                                 .arg(what, tier.isEmpty() ? QStringLiteral("?") : tier,
                                      tier == m_current.tier ? tr(" (the same tier)") : QString()));
    }
    m_retryNote->setToolTip(m_retryNote->text());
}

void SandboxInspector::showTab(Tab tab) { m_tabs->setCurrentIndex(int(tab)); }

QString SandboxInspector::headerText() const
{
    return QStringList{m_reason->text(), m_title->text(), m_meta->text(), m_command->text()}.join(u'\n');
}

QString SandboxInspector::outputText() const { return m_stdout->toPlainText() + m_stderr->toPlainText(); }

QString SandboxInspector::retryText() const { return m_retryNote->text(); }

void SandboxInspector::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        refreshHeaderColors();
}

} // namespace paddock::console
