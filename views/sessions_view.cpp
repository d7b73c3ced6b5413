#include "views/sessions_view.h"

#include "models/session_filter_proxy.h"
#include "models/session_group_model.h"
#include "models/session_table_model.h"
#include "views/status_delegate.h"
#include "views/theme.h"

#include <QApplication>
#include <QComboBox>
#include <QPainter>
#include <QStyledItemDelegate>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QStackedWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QTreeView>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
constexpr int kDurationRefreshMs = 1000;

// The tier, and after it a small badge naming who chose it (default, agent, platform, human), so a
// human override or an agent's own pick stands out in the fleet.
class TierBadgeDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;

    static QColor badgeColor(const QString &chooser)
    {
        if (chooser == u"human")
            return Theme::statusColor(SessionStatus::WaitingApproval);
        if (chooser == u"agent")
            return Theme::statusColor(SessionStatus::Running);
        if (chooser == u"platform")
            return Theme::okColor();
        return Theme::mutedTextColor();
    }

    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override
    {
        const QString chooser = index.data(SessionTableModel::TierChooserRole).toString();
        if (chooser.isEmpty()) {
            QStyledItemDelegate::paint(painter, option, index);
            return;
        }
        QStyleOptionViewItem opt = option;
        initStyleOption(&opt, index);
        const QString tier = opt.text;
        opt.text.clear();
        QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
        style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);

        painter->save();
        const QRect r = opt.rect.adjusted(4, 0, -4, 0);
        const bool selected = opt.state & QStyle::State_Selected;
        painter->setPen(opt.palette.color(selected ? QPalette::HighlightedText : QPalette::Text));
        const int tierWidth = opt.fontMetrics.horizontalAdvance(tier);
        painter->drawText(r, Qt::AlignVCenter | Qt::AlignLeft, tier);
        // A little smaller than the tier and semi-bold, so it reads as a label and stays legible.
        QFont small = opt.font;
        small.setPointSizeF(small.pointSizeF() * 0.85);
        small.setWeight(QFont::DemiBold);
        painter->setFont(small);
        const QFontMetrics fm(small);
        const QRect badge(r.left() + tierWidth + 6, r.center().y() - fm.height() / 2, fm.horizontalAdvance(chooser) + 8,
                          fm.height());
        const QColor color = badgeColor(chooser);
        painter->setRenderHint(QPainter::Antialiasing);
        QColor fill = color;
        fill.setAlpha(50);
        painter->setBrush(fill);
        painter->setPen(QPen(color, 1));
        painter->drawRoundedRect(QRectF(badge).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4);
        painter->setPen(selected ? opt.palette.color(QPalette::HighlightedText) : color);
        painter->drawText(badge, Qt::AlignCenter, chooser);
        painter->restore();
    }
};

struct StatusChoice {
    const char *label;
    QSet<SessionStatus> statuses;
};

const QList<StatusChoice> &statusChoices()
{
    static const QList<StatusChoice> choices = {
        {QT_TRANSLATE_NOOP("SessionsView", "All statuses"), {}},
        {QT_TRANSLATE_NOOP("SessionsView", "Active"),
         {SessionStatus::Queued, SessionStatus::Running, SessionStatus::WaitingApproval, SessionStatus::Paused}},
        {QT_TRANSLATE_NOOP("SessionsView", "Needs attention"), {SessionStatus::WaitingApproval, SessionStatus::Failed}},
        {QT_TRANSLATE_NOOP("SessionsView", "Finished"),
         {SessionStatus::Succeeded, SessionStatus::Failed, SessionStatus::Cancelled}},
        {QT_TRANSLATE_NOOP("SessionsView", "Running"), {SessionStatus::Running}},
        {QT_TRANSLATE_NOOP("SessionsView", "Waiting approval"), {SessionStatus::WaitingApproval}},
        {QT_TRANSLATE_NOOP("SessionsView", "Paused"), {SessionStatus::Paused}},
        {QT_TRANSLATE_NOOP("SessionsView", "Queued"), {SessionStatus::Queued}},
        {QT_TRANSLATE_NOOP("SessionsView", "Succeeded"), {SessionStatus::Succeeded}},
        {QT_TRANSLATE_NOOP("SessionsView", "Failed"), {SessionStatus::Failed}},
        {QT_TRANSLATE_NOOP("SessionsView", "Cancelled"), {SessionStatus::Cancelled}},
    };
    return choices;
}

void setupItemView(QAbstractItemView *view)
{
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view->setAlternatingRowColors(true);
    view->setTextElideMode(Qt::ElideRight);
}
} // namespace

SessionsView::SessionsView(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(6);

    auto *filterRow = new QHBoxLayout;
    m_search = new QLineEdit(this);
    m_search->setObjectName(QStringLiteral("sessionSearch"));
    m_search->setPlaceholderText(tr("Search id, goal, agent or playbook (Ctrl+F)"));
    m_search->setClearButtonEnabled(true);
    // Narrow enough that at 1280 px the toolbar keeps every action (Override tier… included) out of
    // its overflow menu; the search takes all the room that is left.
    m_search->setMinimumWidth(220);
    m_statusFilter = new QComboBox(this);
    m_statusFilter->setObjectName(QStringLiteral("statusFilter"));
    for (const StatusChoice &choice : statusChoices())
        m_statusFilter->addItem(tr(choice.label));
    m_groupButton = new QToolButton(this);
    m_groupButton->setText(tr("Group by status"));
    m_groupButton->setCheckable(true);
    m_groupButton->setToolButtonStyle(Qt::ToolButtonTextOnly);
    m_count = new QLabel(this);
    Theme::setTextRole(m_count, TextRole::Muted);
    m_toolBar = new QToolBar(this);
    m_toolBar->setToolButtonStyle(Qt::ToolButtonTextOnly);
    m_toolBar->setIconSize(QSize(16, 16));

    filterRow->addWidget(m_search, 2);
    filterRow->addWidget(m_statusFilter);
    filterRow->addWidget(m_groupButton);
    filterRow->addWidget(m_count);
    filterRow->addWidget(m_toolBar);
    layout->addLayout(filterRow);

    m_staleBanner = new QLabel(this);
    m_staleBanner->setObjectName(QStringLiteral("staleBanner"));
    m_staleBanner->setWordWrap(true);
    m_staleBanner->setVisible(false);
    m_staleBanner->setText(tr("The connection to the broker is lost: this is the last data received, and it may be "
                              "stale. Paddock reconnects by itself; File > Connect chooses another broker."));
    layout->addWidget(m_staleBanner);

    m_stack = new QStackedWidget(this);
    m_table = new QTableView(m_stack);
    m_table->setObjectName(QStringLiteral("sessionsTable"));
    setupItemView(m_table);
    m_table->setSortingEnabled(true);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->setVisible(false);
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 10);
    m_table->horizontalHeader()->setHighlightSections(false);
    m_table->setShowGrid(false);
    m_tree = new QTreeView(m_stack);
    m_tree->setObjectName(QStringLiteral("sessionsTree"));
    setupItemView(m_tree);
    m_tree->setUniformRowHeights(true);
    m_tree->setAllColumnsShowFocus(true);
    m_stack->addWidget(m_table);
    m_stack->addWidget(m_tree);
    layout->addWidget(m_stack, 1);

    m_durationTimer = new QTimer(this);
    m_durationTimer->setInterval(kDurationRefreshMs);
    connect(m_durationTimer, &QTimer::timeout, this, [this] {
        if (m_tableModel)
            m_tableModel->refreshDurations();
    });

    connect(m_statusFilter, &QComboBox::currentIndexChanged, this, &SessionsView::applyStatusFilter);
    connect(m_groupButton, &QToolButton::toggled, this, &SessionsView::setGrouped);
    connect(m_table, &QTableView::activated, this, &SessionsView::onActivated);
    connect(m_tree, &QTreeView::activated, this, &SessionsView::onActivated);
}

void SessionsView::setModels(SessionTableModel *table, SessionFilterProxy *proxy, SessionGroupModel *groups)
{
    m_tableModel = table;
    m_proxy = proxy;
    m_groups = groups;

    connect(m_search, &QLineEdit::textChanged, m_proxy, &SessionFilterProxy::setSearchText);
    m_table->setModel(m_proxy);
    m_tree->setModel(m_groups);

    auto *delegate = new StatusDelegate(SessionTableModel::StatusRole, SessionTableModel::StaleRole, this);
    m_table->setItemDelegateForColumn(SessionTableModel::Status, delegate);
    // On the tree, column 0 holds the group label on group rows and the status on sessions; the
    // delegate only draws a dot where a status is known, which is both.
    m_tree->setItemDelegateForColumn(SessionTableModel::Status, delegate);
    auto *tierBadge = new TierBadgeDelegate(this);
    m_table->setItemDelegateForColumn(SessionTableModel::Tier, tierBadge);
    m_tree->setItemDelegateForColumn(SessionTableModel::Tier, tierBadge);

    QHeaderView *header = m_table->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::Interactive);
    header->setStretchLastSection(false);
    const QList<QPair<int, int>> widths = {
        {SessionTableModel::Status, 160}, {SessionTableModel::Id, 110},   {SessionTableModel::Agent, 110},
        {SessionTableModel::Tier, 130},   {SessionTableModel::Pool, 80},  {SessionTableModel::Steps, 60},
        {SessionTableModel::Cost, 80},    {SessionTableModel::Duration, 80}, {SessionTableModel::LastEvent, 130},
    };
    for (const auto &[column, width] : widths) {
        header->resizeSection(column, width);
        m_tree->header()->resizeSection(column, width);
    }
    header->setSectionResizeMode(SessionTableModel::Goal, QHeaderView::Stretch);
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(SessionTableModel::Goal, QHeaderView::Stretch);
    m_tree->header()->resizeSection(SessionTableModel::Status, 200);
    m_table->sortByColumn(SessionTableModel::LastEvent, Qt::DescendingOrder);

    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this] { emit currentSessionChanged(currentSessionId()); });
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this] { emit currentSessionChanged(currentSessionId()); });
    connect(m_tableModel, &SessionTableModel::staleChanged, this, &SessionsView::updateStale);
    for (QAbstractItemModel *model : {static_cast<QAbstractItemModel *>(m_proxy), static_cast<QAbstractItemModel *>(m_tableModel)}) {
        connect(model, &QAbstractItemModel::rowsInserted, this, &SessionsView::updateCount);
        connect(model, &QAbstractItemModel::rowsRemoved, this, &SessionsView::updateCount);
        connect(model, &QAbstractItemModel::modelReset, this, &SessionsView::updateCount);
        connect(model, &QAbstractItemModel::layoutChanged, this, &SessionsView::updateCount);
    }
    connect(m_groups, &QAbstractItemModel::rowsInserted, this, &SessionsView::expandGroups);
    connect(m_groups, &QAbstractItemModel::modelReset, this, &SessionsView::expandGroups);
    connect(m_groups, &QAbstractItemModel::dataChanged, this, &SessionsView::expandGroups);
    updateCount();
    updateStale(m_tableModel->isStale());
}

QString SessionsView::currentSessionId() const
{
    const QAbstractItemView *view = isGrouped() ? static_cast<QAbstractItemView *>(m_tree) : m_table;
    const QModelIndex index = view->currentIndex();
    if (!index.isValid())
        return {};
    return index.data(SessionTableModel::SessionIdRole).toString();
}

void SessionsView::selectSession(const QString &id)
{
    if (!m_proxy || id.isEmpty())
        return;
    if (isGrouped()) {
        const QModelIndex index = m_groups->indexOfSession(id);
        if (index.isValid()) {
            m_tree->setCurrentIndex(index);
            m_tree->scrollTo(index);
        }
        return;
    }
    const int row = m_tableModel->rowOf(id);
    if (row < 0)
        return;
    const QModelIndex index = m_proxy->mapFromSource(m_tableModel->index(row, 0));
    if (index.isValid()) {
        m_table->setCurrentIndex(index);
        m_table->scrollTo(index);
    }
}

bool SessionsView::isGrouped() const { return m_stack->currentWidget() == m_tree; }

void SessionsView::setGrouped(bool grouped)
{
    if (grouped == isGrouped())
        return;
    const QString id = currentSessionId();
    m_groupButton->setChecked(grouped);
    m_stack->setCurrentWidget(grouped ? static_cast<QWidget *>(m_tree) : m_table);
    if (grouped)
        expandGroups();
    selectSession(id);
    (grouped ? static_cast<QWidget *>(m_tree) : m_table)->setFocus();
    emit groupedChanged(grouped);
}

void SessionsView::focusSearch()
{
    m_search->setFocus(Qt::ShortcutFocusReason);
    m_search->selectAll();
}

void SessionsView::applyStatusFilter(int comboIndex)
{
    if (!m_proxy || comboIndex < 0 || comboIndex >= statusChoices().size())
        return;
    m_proxy->setStatusFilter(statusChoices().at(comboIndex).statuses);
}

void SessionsView::onActivated(const QModelIndex &index)
{
    if (!index.isValid())
        return;
    if (index.data(SessionGroupModel::IsGroupRole).toBool()) {
        m_tree->setExpanded(index, !m_tree->isExpanded(index));
        return;
    }
    const QString id = index.data(SessionTableModel::SessionIdRole).toString();
    if (!id.isEmpty())
        emit openSessionRequested(id);
}

void SessionsView::updateStale(bool stale)
{
    m_staleBanner->setVisible(stale);
    if (stale) {
        Theme::setTextRole(m_staleBanner, TextRole::Error);
    }
}

void SessionsView::updateCount()
{
    if (!m_proxy)
        return;
    const int shown = m_proxy->rowCount();
    const int total = m_tableModel->rowCount();
    m_count->setText(shown == total ? tr("%n session(s)", nullptr, total) : tr("%1 of %2 sessions").arg(shown).arg(total));
}

void SessionsView::expandGroups()
{
    if (!m_groups || !isGrouped())
        return;
    // Groups are always present; empty ones are hidden so the tree lists only what is there.
    for (int row = 0; row < m_groups->rowCount(); ++row) {
        const QModelIndex group = m_groups->index(row, 0);
        const bool empty = group.data(SessionGroupModel::GroupCountRole).toInt() == 0;
        // setRowHidden relayouts the whole tree even when nothing changes; only call it on a change.
        if (m_tree->isRowHidden(row, QModelIndex()) != empty)
            m_tree->setRowHidden(row, QModelIndex(), empty);
        if (!empty && !m_tree->isExpanded(group))
            m_tree->expand(group);
    }
}

void SessionsView::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    m_durationTimer->start();
    if (m_tableModel)
        m_tableModel->refreshDurations();
}

void SessionsView::hideEvent(QHideEvent *event)
{
    QWidget::hideEvent(event);
    m_durationTimer->stop();
}

} // namespace paddock::console
