#include "views/trace_view.h"

#include "models/trace_model.h"
#include "views/theme.h"

#include <QApplication>
#include <QHeaderView>
#include <QIdentityProxyModel>
#include <QKeyEvent>
#include <QPainter>
#include <QScrollBar>
#include <QTimer>

namespace paddock::console {

namespace {
constexpr int kFollowIntervalMs = 100;

// Egress, snapshots, restores, moves and debug shells get their own colour and a glyph before the
// kind, so they stand out among the tool calls.
QColor categoryColor(EventCategory category)
{
    const bool dark = Theme::isDark();
    switch (category) {
    case EventCategory::EgressAllowed: return dark ? QColor(0x2d, 0xd4, 0xbf) : QColor(0x00, 0x7a, 0x78);
    case EventCategory::EgressRefused: return dark ? QColor(0xff, 0x8a, 0x4c) : QColor(0xbc, 0x4c, 0x00);
    case EventCategory::Snapshot:
    case EventCategory::Restore: return dark ? QColor(0x8c, 0x9e, 0xff) : QColor(0x40, 0x51, 0xb5);
    case EventCategory::Move: return dark ? QColor(0xc3, 0xd8, 0x25) : QColor(0x5f, 0x70, 0x00);
    case EventCategory::DebugShell: return dark ? QColor(0xf0, 0x88, 0x3e) : QColor(0x95, 0x38, 0x00);
    case EventCategory::Other: break;
    }
    return {};
}

QString categoryGlyph(EventCategory category)
{
    switch (category) {
    case EventCategory::EgressAllowed: return QStringLiteral("↗");
    case EventCategory::EgressRefused: return QStringLiteral("⊘");
    case EventCategory::Snapshot: return QStringLiteral("◉");
    case EventCategory::Restore: return QStringLiteral("↺");
    case EventCategory::Move: return QStringLiteral("⇄");
    case EventCategory::DebugShell: return QStringLiteral("›");
    case EventCategory::Other: break;
    }
    return {};
}

class NoAutoFetchProxy : public QIdentityProxyModel {
public:
    using QIdentityProxyModel::QIdentityProxyModel;
    bool canFetchMore(const QModelIndex &) const override { return false; }
    void fetchMore(const QModelIndex &) override {}
};
} // namespace

void TraceDelegate::paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const bool selected = opt.state & QStyle::State_Selected;
    const bool isError = index.data(TraceModel::IsErrorRole).toBool();
    const int column = index.column();

    if (column == TraceModel::Kind) {
        const auto category = EventCategory(index.data(TraceModel::CategoryRole).toInt());
        const QString glyph = categoryGlyph(category);
        const QString kind = glyph.isEmpty() ? opt.text : glyph + u' ' + opt.text;
        opt.text.clear();
        QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
        style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);
        const QColor color = isError ? Theme::errorColor()
                           : category != EventCategory::Other ? categoryColor(category)
                                                              : Theme::kindColor(index.data().toString());
        painter->save();
        painter->setRenderHint(QPainter::Antialiasing);
        const QRect r = opt.rect.adjusted(4, 2, -4, -2);
        const int textWidth = opt.fontMetrics.horizontalAdvance(kind) + 12;
        QRectF pill(r.left(), r.top(), qMin(textWidth, r.width()), r.height());
        QColor fill = color;
        fill.setAlpha(Theme::isDark() ? 60 : 34);
        painter->setPen(Qt::NoPen);
        painter->setBrush(fill);
        painter->drawRoundedRect(pill, 4, 4);
        painter->setPen(selected ? opt.palette.color(QPalette::HighlightedText) : color);
        painter->drawText(pill, Qt::AlignCenter, kind);
        painter->restore();
        return;
    }
    // A tool call expands to its result's output, so it is expandable too.
    if (column == TraceModel::Summary
        && (index.data(TraceModel::HasDetailsRole).toBool() || index.data(TraceModel::KindRole).toString() == u"tool.call"))
        opt.text = QStringLiteral("▸ ") + opt.text;
    if (isError && !selected) {
        opt.palette.setColor(QPalette::Text, Theme::errorColor());
    } else if (!selected && (column == TraceModel::Seq || column == TraceModel::Time)) {
        opt.palette.setColor(QPalette::Text, Theme::mutedTextColor());
    }
    QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);
}

QSize TraceDelegate::sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    // Room for the kind's pill; with uniform row heights this is asked once.
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    size.setHeight(qMax(size.height(), option.fontMetrics.height()) + 6);
    return size;
}

TraceView::TraceView(QWidget *parent)
    : QTableView(parent)
{
    setObjectName(QStringLiteral("traceView"));
    setShowGrid(false);
    setTabKeyNavigation(false);
    setCornerButtonEnabled(false);
    verticalHeader()->setVisible(false);
    verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 8);
    horizontalHeader()->setHighlightSections(false);
    horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    setSelectionMode(QAbstractItemView::SingleSelection);
    setEditTriggers(QAbstractItemView::NoEditTriggers);
    setAlternatingRowColors(true);
    setVerticalScrollMode(QAbstractItemView::ScrollPerItem);
    setTextElideMode(Qt::ElideRight);
    setWordWrap(false);
    setItemDelegate(new TraceDelegate(this));

    m_followTimer = new QTimer(this);
    m_followTimer->setInterval(kFollowIntervalMs);
    connect(m_followTimer, &QTimer::timeout, this, &TraceView::onTick);
    m_followTimer->start();
}

void TraceView::setTraceModel(TraceModel *model)
{
    m_model = model;
    if (!m_proxy)
        m_proxy = new NoAutoFetchProxy(this);
    m_proxy->setSourceModel(model);
    setModel(m_proxy);
    QHeaderView *h = horizontalHeader();
    h->setStretchLastSection(false);
    h->setSectionResizeMode(QHeaderView::Interactive);
    const QList<QPair<int, int>> widths = {
        {TraceModel::Seq, 64},    {TraceModel::Time, 100}, {TraceModel::Kind, 150},
        {TraceModel::Tokens, 70}, {TraceModel::Latency, 80}, {TraceModel::Cost, 80},
    };
    for (const auto &[column, width] : widths)
        h->resizeSection(column, width);
    h->setSectionResizeMode(TraceModel::Summary, QHeaderView::Stretch);

    m_tailPending = true;
    connect(model, &TraceModel::eventsAppended, this, [this] { m_tailPending = true; });
    connect(model, &TraceModel::historyPrepended, this, &TraceView::onHistoryPrepended);
    connect(model, &QAbstractItemModel::modelReset, this, [this] { setFollowing(true); m_tailPending = true; });
}

QModelIndex TraceView::indexOfRow(int row, int column) const
{
    return m_proxy ? m_proxy->index(row, column) : QModelIndex();
}

void TraceView::setFollowing(bool following)
{
    if (following)
        m_tailPending = true;
    if (m_following == following)
        return;
    m_following = following;
    emit followingChanged(following);
}

void TraceView::onTick()
{
    // Scrolling once per tick, not once per batch, keeps a flood of events from re-laying-out the
    // view more than ten times a second (Wireshark's packet list does the same).
    if (!m_following || !m_tailPending || !isVisible())
        return;
    m_tailPending = false;
    m_scrollingByProgram = true;
    scrollToBottom();
    m_scrollingByProgram = false;
}

void TraceView::verticalScrollbarValueChanged(int value)
{
    // Deliberately not the base class: it fetches more at the maximum, and a trace's older
    // history is above, at the minimum.
    QScrollBar *bar = verticalScrollBar();
    if (!m_scrollingByProgram) {
        const bool atBottom = value >= bar->maximum();
        if (atBottom != m_following)
            setFollowing(atBottom);
    }
    if (value == bar->minimum() && m_model && m_model->canFetchMore(QModelIndex()))
        m_model->fetchMore(QModelIndex());
}

void TraceView::onHistoryPrepended(int count)
{
    // Rows went in above the user; move by as many so what they were reading stays put.
    if (m_following)
        return;
    m_scrollingByProgram = true;
    // The scroll bar's range grows only when the view lays out its rows, later; do it now or the
    // new value would be clamped to the old range.
    executeDelayedItemsLayout();
    updateGeometries();
    QScrollBar *bar = verticalScrollBar();
    bar->setValue(bar->value() + count);
    m_scrollingByProgram = false;
}

void TraceView::keyPressEvent(QKeyEvent *event)
{
    // Rows are what matters here: Home and End go to the first and last event (a table would move
    // to the first and last column).
    if ((event->key() == Qt::Key_End || event->key() == Qt::Key_Home) && !(event->modifiers() & Qt::ShiftModifier)) {
        const bool end = event->key() == Qt::Key_End;
        if (model() && model()->rowCount() > 0) {
            const int column = currentIndex().isValid() ? currentIndex().column() : 0;
            setCurrentIndex(model()->index(end ? model()->rowCount() - 1 : 0, column));
        }
        if (end) {
            setFollowing(true);
            onTick();
        } else {
            scrollToTop();
        }
        event->accept();
        return;
    }
    QTableView::keyPressEvent(event);
}

} // namespace paddock::console
