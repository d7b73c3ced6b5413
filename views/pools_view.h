#pragma once
// Pools: each pool the broker knows with its health and endpoint, and under it each tier with its
// runtime, a warm/claimed/max bar, warm-pool hit rate, claim latency (p50/p99), refill rate, cold
// fallbacks and the idle cost of its warm sandboxes. Under the table: the selected tier's claim
// latency histogram and its pool's health over time. Above the table: the checkpoint store's card
// (storage_card.h).
//
// Threads: GUI thread only.

#include <QStyledItemDelegate>
#include <QWidget>

class QLabel;
class QSplitter;
class QTreeView;

namespace paddock::console {

class PoolsModel;
class PoolsHeaderProxy;
class LatencyHistogramPlot;
class HealthTimelinePlot;
class StorageCard;

// Warm and claimed sandboxes as a stacked bar against the tier's (or pool's) maximum.
class CapacityDelegate : public QStyledItemDelegate {
    Q_OBJECT

public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;
    QSize sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const override;
};

// A green or red dot before the health text.
class HealthDelegate : public QStyledItemDelegate {
    Q_OBJECT

public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;
};

class PoolsView : public QWidget {
    Q_OBJECT

public:
    explicit PoolsView(QWidget *parent = nullptr);

    void setModel(PoolsModel *model);
    QTreeView *treeView() const { return m_tree; }
    LatencyHistogramPlot *latencyPlot() const { return m_latency; }
    HealthTimelinePlot *healthPlot() const { return m_health; }
    StorageCard *storageCard() const { return m_storage; }
    QString summaryText() const;

protected:
    void changeEvent(QEvent *event) override;

private:
    void updateBanner();
    void expandPools();
    void updateCharts();

    PoolsModel *m_model = nullptr;
    PoolsHeaderProxy *m_proxy = nullptr;
    QLabel *m_summary = nullptr;
    QLabel *m_legend = nullptr;
    QLabel *m_localBanner = nullptr;
    QLabel *m_staleBanner = nullptr;
    QTreeView *m_tree = nullptr;
    QSplitter *m_splitter = nullptr;
    LatencyHistogramPlot *m_latency = nullptr;
    HealthTimelinePlot *m_health = nullptr;
    StorageCard *m_storage = nullptr;
};

} // namespace paddock::console
