#include "views/session_view.h"

#include "models/console_format.h"
#include "models/cost_series.h"
#include "models/span_model.h"
#include "models/trace_model.h"
#include "views/cost_plot.h"
#include "views/sandbox_card.h"
#include "views/span_timeline.h"
#include "views/theme.h"
#include "views/trace_view.h"

#include <QCheckBox>
#include <QDataStream>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSplitter>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
// 2: the timeline joined the trace splitter (a version-1 state would size it as the table).
constexpr quint32 kLayoutVersion = 2;
// A row's span is searched this far from the span's first and last event for a row of its own.
constexpr int kRowSearch = 64;
} // namespace

SessionView::SessionView(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(6);

    layout->addLayout(createHeaderRow());

    m_staleBanner = new QLabel(tr("The connection to the broker is lost: the trace shows the events received so far "
                                  "and may be stale. Paddock reconnects by itself."),
                               this);
    m_staleBanner->setWordWrap(true);
    Theme::setTextRole(m_staleBanner, TextRole::Error);
    m_staleBanner->setVisible(false);
    layout->addWidget(m_staleBanner);

    createTraceSplitter();
    QWidget *side = createSidePane();
    m_mainSplitter->addWidget(m_traceSplitter);
    m_mainSplitter->addWidget(side);
    m_mainSplitter->setStretchFactor(0, 3);
    m_mainSplitter->setStretchFactor(1, 1);
    m_mainSplitter->setSizes({880, 380});
    layout->addWidget(m_mainSplitter, 1);

    auto updateFollow = [this](bool following) {
        m_followButton->setChecked(following);
        m_followButton->setText(following ? tr("Following tail") : tr("Follow tail (End)"));
    };
    connect(m_trace, &TraceView::followingChanged, this, updateFollow);
    connect(m_followButton, &QToolButton::clicked, m_trace, &TraceView::setFollowing);
    updateFollow(true);

    connect(m_everyEvent, &QCheckBox::toggled, this, &SessionView::showEveryEvent);
    connect(m_trace, &QAbstractItemView::activated, this, &SessionView::toggleDetails);
    m_trace->installEventFilter(this);
}

// The title, status and reason beside the follow button and the toolbar.
QLayout *SessionView::createHeaderRow()
{
    auto *headerRow = new QHBoxLayout;
    auto *titles = new QVBoxLayout;
    titles->setSpacing(2);
    m_title = new QLabel(tr("No session open"), this);
    m_title->setObjectName(QStringLiteral("sessionTitle"));
    QFont titleFont = m_title->font();
    titleFont.setPointSizeF(titleFont.pointSizeF() * 1.25);
    titleFont.setWeight(QFont::DemiBold);
    m_title->setFont(titleFont);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto *statusRow = new QHBoxLayout;
    m_status = new QLabel(this);
    QFont statusFont = m_status->font();
    statusFont.setWeight(QFont::DemiBold);
    m_status->setFont(statusFont);
    m_meta = new QLabel(this);
    // The reason can be long; it must not widen the window (the toolbar beside it would overflow).
    m_meta->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_title->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_meta->setTextInteractionFlags(Qt::TextSelectableByMouse);
    Theme::setTextRole(m_meta, TextRole::Muted);
    statusRow->addWidget(m_status);
    statusRow->addWidget(m_meta, 1);
    m_reason = new QLabel(this);
    m_reason->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_reason->setTextInteractionFlags(Qt::TextSelectableByMouse);
    titles->addWidget(m_title);
    titles->addLayout(statusRow);
    titles->addWidget(m_reason);
    headerRow->addLayout(titles, 1);

    m_followButton = new QToolButton(this);
    m_followButton->setCheckable(true);
    m_followButton->setChecked(true);
    m_followButton->setToolTip(tr("Follow the newest events (End)"));
    m_toolBar = new QToolBar(this);
    m_toolBar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    m_everyEvent = new QCheckBox(tr("Every event"), this);
    m_everyEvent->setObjectName(QStringLiteral("traceEveryEvent"));
    m_everyEvent->setToolTip(tr("Show cost and checkpoint events as rows of their own. Unchecked, they fold into their "
                                "step's row, whose summary ends with what was folded (\"+ cost $0.0008, checkpoint 3 "
                                "changed\"); the details pane shows their payloads."));
    headerRow->addWidget(m_everyEvent, 0, Qt::AlignBottom);
    headerRow->addWidget(m_followButton, 0, Qt::AlignBottom);
    headerRow->addWidget(m_toolBar, 0, Qt::AlignBottom);
    return headerRow;
}

// The span timeline over the trace over its details pane, in the main splitter.
void SessionView::createTraceSplitter()
{
    m_mainSplitter = new QSplitter(Qt::Horizontal, this);
    m_mainSplitter->setObjectName(QStringLiteral("sessionMainSplitter"));
    m_traceSplitter = new QSplitter(Qt::Vertical, m_mainSplitter);
    m_traceSplitter->setObjectName(QStringLiteral("sessionTraceSplitter"));
    m_spanModel = new SpanModel(this);
    m_timeline = new SpanTimeline(m_traceSplitter);
    m_timeline->setModel(m_spanModel);
    m_trace = new TraceView(m_traceSplitter);
    m_details = new QPlainTextEdit(m_traceSplitter);
    m_details->setObjectName(QStringLiteral("traceDetails"));
    m_details->setReadOnly(true);
    m_details->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_details->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_details->setPlaceholderText(tr("Select a row and press Enter to see its output"));
    m_details->setVisible(false);
    m_detailsRefresh = new QTimer(this);
    m_detailsRefresh->setSingleShot(true);
    m_detailsRefresh->setInterval(100);
    connect(m_detailsRefresh, &QTimer::timeout, this, &SessionView::refreshDetails);
    m_traceSplitter->addWidget(m_timeline);
    m_traceSplitter->addWidget(m_trace);
    m_traceSplitter->addWidget(m_details);
    m_traceSplitter->setStretchFactor(0, 0);
    m_traceSplitter->setStretchFactor(1, 2);
    m_traceSplitter->setStretchFactor(2, 1);
    m_traceSplitter->setCollapsible(1, false);
    connect(m_timeline, &SpanTimeline::spanActivated, this, &SessionView::selectRowsOfSpan);
}

// Beside the trace: the sandbox card over the cost split and plot.
QWidget *SessionView::createSidePane()
{
    auto *side = new QWidget(m_mainSplitter);
    auto *sideLayout = new QVBoxLayout(side);
    sideLayout->setContentsMargins(0, 0, 0, 0);
    m_card = new SandboxCard(side);
    m_costPlot = new CostPlot(side);
    auto *costTitle = new QLabel(tr("Cost over time"), side);
    costTitle->setFont(m_card->findChild<QLabel *>()->font());
    sideLayout->addWidget(m_card);
    sideLayout->addSpacing(6);
    m_costSplit = new QLabel(side);
    m_costSplit->setObjectName(QStringLiteral("sessionCostSplit"));
    m_costSplit->setWordWrap(true);
    m_costSplit->setToolTip(tr("Model: tokens of the model's responses. Sandbox: the tier's price for the time its "
                               "sandboxes were claimed, and snapshot storage."));
    sideLayout->addWidget(costTitle);
    sideLayout->addWidget(m_costSplit);
    sideLayout->addWidget(m_costPlot, 1);
    return side;
}

void SessionView::setModels(TraceModel *trace, CostSeries *cost)
{
    m_traceModel = trace;
    m_trace->setTraceModel(trace);
    m_costPlot->setSeries(cost);
    m_spanModel->setTraceModel(trace);
    connect(m_trace->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex &current) {
        if (isDetailsExpanded())
            showDetailsFor(current);
        selectSpanOfRow(current);
    });
    connect(trace, &QAbstractItemModel::modelReset, this, [this] { setDetailsExpanded(false); });
    // What grows under the shown row (its folded output or streamed answer) changes its data; a
    // call's result comes as a row of its own.
    connect(trace, &QAbstractItemModel::dataChanged, this, [this](const QModelIndex &topLeft, const QModelIndex &bottomRight) {
        if (m_detailsRow >= topLeft.row() && m_detailsRow <= bottomRight.row())
            refreshDetailsSoon();
    });
    connect(trace, &QAbstractItemModel::rowsInserted, this, [this] {
        if (m_detailsAwaitResult)
            refreshDetailsSoon();
    });
    m_everyEvent->setChecked(!trace->foldBookkeeping());
    connect(trace, &TraceModel::foldBookkeepingChanged, this, [this](bool fold) {
        const QSignalBlocker blocker(m_everyEvent);
        m_everyEvent->setChecked(!fold);
    });
}

void SessionView::showEveryEvent(bool every)
{
    if (!m_traceModel || m_traceModel->foldBookkeeping() == !every)
        return;
    // The rows change under the user: keep the event they were on (folded: the row it went into)
    // selected and in sight, and its details open if they were.
    const QModelIndex current = m_trace->currentIndex();
    const qint64 seq = current.isValid() ? current.data(TraceModel::SeqRole).toLongLong() : 0;
    const bool expanded = isDetailsExpanded();
    const bool following = m_trace->isFollowing();
    m_traceModel->setFoldBookkeeping(!every);
    const int row = seq > 0 ? m_traceModel->rowOfSeq(seq) : -1;
    if (row < 0)
        return;
    const QModelIndex index = m_trace->indexOfRow(row, qMax(0, current.column()));
    m_trace->setCurrentIndex(index);
    if (!following) {
        m_trace->scrollTo(index, QAbstractItemView::PositionAtCenter);
        m_trace->setFollowing(false);
    }
    if (expanded)
        setDetailsExpanded(true);
}

void SessionView::selectRowsOfSpan(int id)
{
    if (!m_traceModel || id < 0 || id >= m_spanModel->count() || m_traceModel->rowCount() == 0)
        return;
    const SpanModel::Span &span = m_spanModel->span(id);
    // Its events that are in the window; a folded one selects the row it folded into.
    const qint64 from = qMax(span.startSeq, m_traceModel->firstSeq());
    const qint64 to = qMin(m_spanModel->lastSeqOf(span), m_traceModel->lastSeq());
    int first = -1;
    int last = -1;
    for (qint64 seq = from; seq <= to && seq < from + kRowSearch && first < 0; ++seq)
        first = m_traceModel->rowOfSeq(seq);
    for (qint64 seq = to; seq >= from && seq > to - kRowSearch && last < 0; --seq)
        last = m_traceModel->rowOfSeq(seq);
    if (first < 0 || last < 0)
        return;
    // The table tells the timeline of its current row; not of the one the timeline set.
    m_syncingSelection = true;
    const QModelIndex top = m_trace->indexOfRow(first, TraceModel::Summary);
    m_trace->selectionModel()->setCurrentIndex(top, QItemSelectionModel::NoUpdate);
    m_trace->selectionModel()->select(QItemSelection(m_trace->indexOfRow(first, 0),
                                                     m_trace->indexOfRow(last, TraceModel::ColumnCount - 1)),
                                      QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_trace->scrollTo(m_trace->indexOfRow(last, TraceModel::Summary));
    m_trace->scrollTo(top);
    m_syncingSelection = false;
}

void SessionView::selectSpanOfRow(const QModelIndex &current)
{
    if (m_syncingSelection || !current.isValid())
        return;
    const int id = m_spanModel->spanAtSeq(current.data(TraceModel::SeqRole).toLongLong());
    m_timeline->setSelectedSpan(id);
    if (id >= 0)
        m_timeline->ensureVisible(id);
}

void SessionView::showSession(const SessionInfo &session)
{
    m_session = session;
    m_card->clear();
    m_card->setSession(session);
    setDetailsExpanded(false);
    m_trace->setFollowing(true);
    refreshHeader();
}

void SessionView::updateSession(const SessionInfo &session)
{
    if (session.id != m_session.id)
        return;
    m_session = session;
    m_card->setSession(session);
    refreshHeader();
}

void SessionView::addEvents(const QList<EventRecord> &events) { m_card->addEvents(events); }

void SessionView::setStale(bool stale)
{
    m_stale = stale;
    m_staleBanner->setVisible(stale && !m_session.id.isEmpty());
    refreshHeader();
}

void SessionView::refreshHeader()
{
    if (m_session.id.isEmpty()) {
        m_title->setText(tr("No session open"));
        m_status->clear();
        m_meta->setText(tr("Open one from Sessions (Ctrl+1) with Enter or a double-click."));
        m_reason->setVisible(false);
        m_costSplit->clear();
        return;
    }
    QString split = tr("Model %1 · sandbox %2").arg(formatCost(m_session.modelCostMicros), formatCost(m_session.sandboxCostMicros));
    if (m_session.budgetMicros > 0)
        split += tr(" · budget %1 (%2% used)")
                     .arg(formatCost(m_session.budgetMicros))
                     .arg(qRound(100.0 * double(m_session.costMicros) / double(m_session.budgetMicros)));
    m_costSplit->setText(split);
    m_title->setText(m_session.goal.isEmpty() ? m_session.id : m_session.goal);
    m_status->setText(statusLabel(m_session.status));
    QPalette pal = m_status->palette();
    pal.setColor(QPalette::WindowText, m_stale ? Theme::mutedTextColor() : Theme::statusColor(m_session.status));
    m_status->setPalette(pal);
    QStringList parts;
    parts << m_session.id;
    if (!m_session.agent.isEmpty())
        parts << tr("agent %1").arg(m_session.agent);
    if (!m_session.playbook.isEmpty())
        parts << tr("playbook %1").arg(m_session.playbook);
    else if (!m_session.model.isEmpty())
        parts << tr("model %1").arg(m_session.model);
    parts << tr("%n step(s)", nullptr, int(m_session.steps));
    parts << formatCost(m_session.costMicros);
    if (m_stale)
        parts << tr("stale");
    m_meta->setText(QStringLiteral("· ") + parts.join(QStringLiteral("  ·  ")));
    m_reason->setText(m_session.statusReason);
    m_reason->setToolTip(m_session.statusReason);
    m_reason->setVisible(!m_session.statusReason.isEmpty());
    m_meta->setToolTip(m_meta->text());
}

QString SessionView::costSplitText() const { return m_costSplit->text(); }

bool SessionView::isDetailsExpanded() const { return m_details->isVisibleTo(this); }

void SessionView::setDetailsExpanded(bool expanded)
{
    m_details->setVisible(expanded);
    if (expanded)
        showDetailsFor(m_trace->currentIndex());
}

QString SessionView::detailsText() const { return m_details->toPlainText(); }

void SessionView::toggleDetails(const QModelIndex &index)
{
    if (isDetailsExpanded() && m_detailsRow == index.row()) {
        setDetailsExpanded(false);
        return;
    }
    m_details->setVisible(true);
    showDetailsFor(index);
}

void SessionView::showDetailsFor(const QModelIndex &index)
{
    m_detailsRow = index.isValid() && m_traceModel ? index.row() : -1;
    m_detailsAwaitResult = false;
    if (m_detailsRow < 0) {
        m_details->clear();
        return;
    }
    m_details->setPlainText(detailsFor(m_detailsRow));
}

void SessionView::refreshDetailsSoon()
{
    if (isDetailsExpanded() && m_detailsRow >= 0 && !m_detailsRefresh->isActive())
        m_detailsRefresh->start();
}

void SessionView::refreshDetails()
{
    if (!isDetailsExpanded() || m_detailsRow < 0 || m_detailsRow >= m_traceModel->rowCount())
        return;
    const QString text = detailsFor(m_detailsRow);
    if (text == m_details->toPlainText())
        return;
    QScrollBar *bar = m_details->verticalScrollBar();
    const bool atEnd = bar->value() == bar->maximum();
    const int value = bar->value();
    m_details->setPlainText(text);
    bar->setValue(atEnd ? bar->maximum() : value);
}

QString SessionView::detailsFor(int row)
{
    // Only a tool call's details depend on a later row (its result's); until that has come, new
    // rows may bring it.
    m_detailsAwaitResult = m_traceModel->index(row, 0).data(TraceModel::KindRole).toString() == u"tool.call"
                        && m_traceModel->resultRowOf(row) < 0;
    return m_traceModel->detailsWithResult(row);   // rows are the same in the view's proxy
}

void SessionView::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    // The status colour depends on the theme.
    if (event->type() == QEvent::PaletteChange)
        refreshHeader();
}

bool SessionView::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == m_trace && event->type() == QEvent::KeyPress) {
        auto *key = static_cast<QKeyEvent *>(event);
        if (key->key() == Qt::Key_Space) {
            toggleDetails(m_trace->currentIndex());
            return true;
        }
        if (key->key() == Qt::Key_Escape && isDetailsExpanded()) {
            setDetailsExpanded(false);
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

QByteArray SessionView::saveLayout() const
{
    QByteArray out;
    QDataStream stream(&out, QIODevice::WriteOnly);
    stream << kLayoutVersion << m_mainSplitter->saveState() << m_traceSplitter->saveState();
    return out;
}

void SessionView::restoreLayout(const QByteArray &state)
{
    QDataStream stream(state);
    quint32 version = 0;
    QByteArray main;
    QByteArray trace;
    stream >> version >> main >> trace;
    if (version != kLayoutVersion || stream.status() != QDataStream::Ok)
        return;
    m_mainSplitter->restoreState(main);
    m_traceSplitter->restoreState(trace);
}

} // namespace paddock::console
