#include "views/pools_view.h"

#include "models/pools_model.h"
#include "views/pool_charts.h"
#include "views/storage_card.h"
#include "views/theme.h"

#include <QApplication>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIdentityProxyModel>
#include <QLabel>
#include <QPainter>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

namespace paddock::console {

// The Max column shows the capacity bar, so its header says so.
class PoolsHeaderProxy : public QIdentityProxyModel {
public:
    using QIdentityProxyModel::QIdentityProxyModel;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override
    {
        if (orientation == Qt::Horizontal && role == Qt::DisplayRole && section == PoolsModel::Max)
            return PoolsView::tr("Capacity (warm · claimed · max)");
        return QIdentityProxyModel::headerData(section, orientation, role);
    }
};

namespace {
int intAt(const QModelIndex &index, int column)
{
    return index.siblingAtColumn(column).data(PoolsModel::SortRole).toInt();
}
} // namespace

void CapacityDelegate::paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    opt.text.clear();
    QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);

    const int warm = intAt(index, PoolsModel::Warm);
    const int claimed = intAt(index, PoolsModel::Claimed);
    const int max = qMax(intAt(index, PoolsModel::Max), warm + claimed);
    const QRect r = opt.rect.adjusted(6, 0, -6, 0);
    const int barWidth = qMax(40, r.width() - 170);
    const int barHeight = qMin(10, r.height() - 4);
    const QRectF bar(r.left(), r.center().y() - barHeight / 2.0 + 0.5, barWidth, barHeight);

    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setPen(Qt::NoPen);
    painter->setBrush(opt.palette.color(QPalette::Midlight));
    painter->drawRoundedRect(bar, 3, 3);
    if (max > 0) {
        const double claimedWidth = bar.width() * claimed / max;
        const double warmWidth = bar.width() * warm / max;
        painter->setBrush(Theme::statusColor(SessionStatus::Running));
        painter->drawRoundedRect(QRectF(bar.left(), bar.top(), claimedWidth, bar.height()), 3, 3);
        painter->setBrush(Theme::okColor());
        painter->drawRoundedRect(QRectF(bar.left() + claimedWidth, bar.top(), warmWidth, bar.height()), 3, 3);
    }
    const bool selected = opt.state & QStyle::State_Selected;
    painter->setPen(opt.palette.color(selected ? QPalette::HighlightedText : QPalette::Text));
    const QRect textRect(int(bar.right()) + 8, r.top(), r.right() - int(bar.right()) - 8, r.height());
    painter->drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                      PoolsView::tr("%1 warm · %2 claimed / %3").arg(warm).arg(claimed).arg(max));
    painter->restore();
}

QSize CapacityDelegate::sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    size.setWidth(qMax(size.width(), 320));
    size.setHeight(qMax(size.height(), option.fontMetrics.height()) + 8);
    return size;
}

void HealthDelegate::paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QString text = opt.text;
    opt.text.clear();
    QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);
    const bool healthy = index.data(PoolsModel::HealthyRole).toBool();
    const QColor color = healthy ? Theme::okColor() : Theme::errorColor();
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    const QRect r = opt.rect.adjusted(6, 0, -4, 0);
    const int dot = 9;
    painter->setPen(Qt::NoPen);
    painter->setBrush(color);
    painter->drawEllipse(QRectF(r.left(), r.center().y() - dot / 2.0 + 0.5, dot, dot));
    const bool selected = opt.state & QStyle::State_Selected;
    painter->setPen(selected ? opt.palette.color(QPalette::HighlightedText) : (healthy ? opt.palette.color(QPalette::Text) : color));
    const QRect textRect = r.adjusted(dot + 6, 0, 0, 0);
    painter->drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                      opt.fontMetrics.elidedText(text, Qt::ElideRight, textRect.width()));
    painter->restore();
}

PoolsView::PoolsView(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    layout->setSpacing(6);
    m_summary = new QLabel(this);
    QFont summaryFont = m_summary->font();
    summaryFont.setWeight(QFont::DemiBold);
    summaryFont.setPointSizeF(summaryFont.pointSizeF() * 1.1);
    m_summary->setFont(summaryFont);
    m_localBanner = new QLabel(tr("Local execution: sandboxes run on this machine, the broker's own host. This is a "
                                  "development mode; a team deployment runs pools on execution hosts."),
                               this);
    m_localBanner->setObjectName(QStringLiteral("localExecutionBanner"));
    m_localBanner->setWordWrap(true);
    QFont bannerFont = m_localBanner->font();
    bannerFont.setWeight(QFont::DemiBold);
    m_localBanner->setFont(bannerFont);
    m_localBanner->setVisible(false);
    m_staleBanner = new QLabel(tr("The connection to the broker is lost: these figures are the last received."), this);
    m_staleBanner->setVisible(false);
    Theme::setTextRole(m_staleBanner, TextRole::Error);

    m_tree = new QTreeView(this);
    m_tree->setObjectName(QStringLiteral("poolsTree"));
    m_tree->setUniformRowHeights(true);
    m_tree->setAllColumnsShowFocus(true);
    m_tree->setAlternatingRowColors(true);
    m_tree->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_tree->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_tree->setItemDelegateForColumn(PoolsModel::Max, new CapacityDelegate(this));
    m_tree->setItemDelegateForColumn(PoolsModel::Health, new HealthDelegate(this));

    m_legend = new QLabel(this);
    auto *summaryRow = new QHBoxLayout;
    summaryRow->addWidget(m_summary);
    summaryRow->addStretch();
    summaryRow->addWidget(m_legend);
    layout->addLayout(summaryRow);
    layout->addWidget(m_localBanner);
    layout->addWidget(m_staleBanner);
    m_storage = new StorageCard(this);
    layout->addWidget(m_storage);
    m_splitter = new QSplitter(Qt::Vertical, this);
    m_splitter->setObjectName(QStringLiteral("poolsSplitter"));
    m_splitter->addWidget(m_tree);
    auto *charts = new QWidget(m_splitter);
    auto *chartsLayout = new QHBoxLayout(charts);
    chartsLayout->setContentsMargins(0, 4, 0, 0);
    m_latency = new LatencyHistogramPlot(charts);
    m_latency->setObjectName(QStringLiteral("latencyHistogram"));
    m_health = new HealthTimelinePlot(charts);
    m_health->setObjectName(QStringLiteral("healthTimeline"));
    chartsLayout->addWidget(m_latency, 1);
    chartsLayout->addWidget(m_health, 1);
    m_splitter->addWidget(charts);
    m_splitter->setStretchFactor(0, 3);
    m_splitter->setStretchFactor(1, 2);
    layout->addWidget(m_splitter, 1);
}

void PoolsView::setModel(PoolsModel *model)
{
    m_model = model;
    m_proxy = new PoolsHeaderProxy(this);
    m_proxy->setSourceModel(model);
    m_tree->setModel(m_proxy);
    // Warm and Claimed are in the capacity bar; their own columns would say it twice.
    m_tree->setColumnHidden(PoolsModel::Warm, true);
    m_tree->setColumnHidden(PoolsModel::Claimed, true);
    QHeaderView *h = m_tree->header();
    h->setStretchLastSection(true);
    const QList<QPair<int, int>> widths = {
        {PoolsModel::Name, 110},     {PoolsModel::Health, 95},        {PoolsModel::Runtime, 65},
        {PoolsModel::Max, 265},      {PoolsModel::HitRate, 90},       {PoolsModel::ClaimLatency, 180},
        {PoolsModel::RefillRate, 60}, {PoolsModel::ColdFallbacks, 75}, {PoolsModel::IdleCost, 100},
        {PoolsModel::Isolation, 200},
    };
    for (const auto &[column, width] : widths)
        h->resizeSection(column, width);

    for (const auto signal : {&QAbstractItemModel::rowsInserted, &QAbstractItemModel::rowsRemoved})
        connect(m_proxy, signal, this, [this] { expandPools(); updateBanner(); });
    connect(m_proxy, &QAbstractItemModel::modelReset, this, [this] { expandPools(); updateBanner(); });
    connect(m_proxy, &QAbstractItemModel::dataChanged, this, &PoolsView::updateBanner);
    connect(m_proxy, &QAbstractItemModel::dataChanged, this, &PoolsView::updateCharts);
    connect(m_proxy, &QAbstractItemModel::modelReset, this, &PoolsView::updateCharts);
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &PoolsView::updateCharts);
    connect(m_model, &PoolsModel::staleChanged, this, [this](bool stale) { m_staleBanner->setVisible(stale); });
    m_storage->setModel(model);
    expandPools();
    updateBanner();
    updateCharts();
}

void PoolsView::expandPools()
{
    m_tree->expandAll();
}

void PoolsView::updateBanner()
{
    if (!m_model)
        return;
    m_legend->setText(tr("<span style=\"color:%1\">■</span> claimed &nbsp; <span style=\"color:%2\">■</span> warm "
                         "&nbsp; <span style=\"color:%3\">■</span> free, up to the tier's maximum")
                          .arg(Theme::statusColor(SessionStatus::Running).name(), Theme::okColor().name(),
                               palette().color(QPalette::Midlight).darker(110).name()));
    m_localBanner->setVisible(m_model->localExecution());
    int healthy = 0;
    int warm = 0;
    int claimed = 0;
    double idleCost = 0;
    const int pools = m_model->rowCount();
    for (int row = 0; row < pools; ++row) {
        const QModelIndex pool = m_model->index(row, 0);
        healthy += pool.data(PoolsModel::HealthyRole).toBool() ? 1 : 0;
        warm += intAt(pool, PoolsModel::Warm);
        claimed += intAt(pool, PoolsModel::Claimed);
        idleCost += pool.data(PoolsModel::IdleCostRole).toDouble();
    }
    if (pools == 0)
        m_summary->setText(tr("No pools reported yet"));
    else
        m_summary->setText(tr("%1 of %n pool(s) healthy · %2 warm · %3 claimed · idle warm capacity $%4/h", nullptr, pools)
                               .arg(healthy).arg(warm).arg(claimed).arg(idleCost, 0, 'f', 3));
}

QString PoolsView::summaryText() const { return m_summary->text(); }

void PoolsView::updateCharts()
{
    if (!m_model)
        return;
    // The selected tier (a pool row means its first tier), else the first pool's first tier.
    QModelIndex current = m_proxy->mapToSource(m_tree->currentIndex());
    if (!current.isValid() && m_model->rowCount() > 0)
        current = m_model->index(0, 0);
    if (!current.isValid()) {
        m_latency->setTier({}, {});
        m_health->setHistory({}, {});
        return;
    }
    current = current.siblingAtColumn(0);
    const QString pool = current.data(PoolsModel::PoolNameRole).toString();
    QModelIndex tier = current;
    if (current.data(PoolsModel::IsPoolRole).toBool())
        tier = m_model->rowCount(current) > 0 ? m_model->index(0, 0, current) : QModelIndex();
    m_latency->setTier(pool, tier.isValid() ? tier.data(PoolsModel::TierInfoRole).value<TierInfo>() : TierInfo{});
    m_health->setHistory(pool, m_model->healthHistory(pool));
}

} // namespace paddock::console

namespace paddock::console {

void PoolsView::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        updateBanner();   // the legend's colours follow the theme
}

} // namespace paddock::console
