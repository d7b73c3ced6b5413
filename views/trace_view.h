#pragma once
// The trace timeline of one session over TraceModel: uniform row heights, follows the tail on a
// 100 ms timer unless the user scrolled away from the bottom, pages older history in when the
// user reaches the top, and keeps the rows under the user still when history is prepended.
//
// A QTableView, not a QTreeView: a tree view re-lays out every row on each insert (it keeps one
// item per row), which at a million rows cost 50-100 ms per batch; a table with fixed row
// heights lays out nothing per row.
//
// Threads: GUI thread only.
//
// Known limits: follow mode is per view, not per session; it resets when another session opens.

#include <QStyledItemDelegate>
#include <QTableView>

class QAbstractProxyModel;
class QTimer;

namespace paddock::console {

class TraceModel;

// Colours the Kind column by event kind, error rows in the error colour, and marks rows whose
// details (tool output, model text) can be expanded.
class TraceDelegate : public QStyledItemDelegate {
    Q_OBJECT

public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;
    QSize sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const override;
};

class TraceView : public QTableView {
    Q_OBJECT

public:
    explicit TraceView(QWidget *parent = nullptr);

    // The view shows the model through a proxy that hides canFetchMore from Qt: Qt's item views
    // fetch more whenever the last row is visible, which while following the tail would page in
    // the whole history. Only reaching the top fetches here. Rows are the model's rows.
    void setTraceModel(TraceModel *model);
    TraceModel *traceModel() const { return m_model; }
    // The view's index of a TraceModel row.
    QModelIndex indexOfRow(int row, int column = 0) const;

    // Following: the view scrolls to the newest event on the next tick after rows arrive.
    bool isFollowing() const { return m_following; }
    void setFollowing(bool following);

signals:
    void followingChanged(bool following);

protected:
    void verticalScrollbarValueChanged(int value) override;
    void keyPressEvent(QKeyEvent *event) override;

private:
    void onTick();
    void onHistoryPrepended(int count);

    TraceModel *m_model = nullptr;
    QAbstractProxyModel *m_proxy = nullptr;
    QTimer *m_followTimer = nullptr;
    bool m_following = true;
    bool m_tailPending = false;
    bool m_scrollingByProgram = false;
};

} // namespace paddock::console
