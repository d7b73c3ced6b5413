#pragma once
// Pools: each pool the broker knows with its health and endpoint, and under it each tier with its
// runtime, a warm/claimed/max bar, warm-pool hit rate and cold fallbacks.
//
// Threads: GUI thread only.

#include <QStyledItemDelegate>
#include <QWidget>

class QLabel;
class QTreeView;

namespace paddock::console {

class PoolsModel;
class PoolsHeaderProxy;

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

protected:
    void changeEvent(QEvent *event) override;

private:
    void updateBanner();
    void expandPools();

    PoolsModel *m_model = nullptr;
    PoolsHeaderProxy *m_proxy = nullptr;
    QLabel *m_summary = nullptr;
    QLabel *m_legend = nullptr;
    QLabel *m_localBanner = nullptr;
    QLabel *m_staleBanner = nullptr;
    QTreeView *m_tree = nullptr;
};

} // namespace paddock::console
