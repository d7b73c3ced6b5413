#pragma once
// Sessions: every session of the broker, live. A table over SessionFilterProxy (search, status
// filter, sort) or, with "group by status", a tree over SessionGroupModel. Enter or a double-click
// opens a session. The actions (submit, pause/resume, cancel) belong to the main window, which
// puts them on this view's toolbar and in its menus, so each has one shortcut.
//
// Threads: GUI thread only.

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QModelIndex;
class QStackedWidget;
class QTableView;
class QTimer;
class QToolBar;
class QToolButton;
class QTreeView;

namespace paddock::console {

class SessionTableModel;
class SessionFilterProxy;
class SessionGroupModel;

class SessionsView : public QWidget {
    Q_OBJECT

public:
    explicit SessionsView(QWidget *parent = nullptr);

    // The models are owned by the caller and outlive the view.
    void setModels(SessionTableModel *table, SessionFilterProxy *proxy, SessionGroupModel *groups);

    // The selected session in whichever view is showing; empty when none.
    QString currentSessionId() const;
    void selectSession(const QString &id);

    bool isGrouped() const;
    void setGrouped(bool grouped);
    void focusSearch();

    QToolBar *toolBar() const { return m_toolBar; }
    QLineEdit *searchEdit() const { return m_search; }
    QComboBox *statusCombo() const { return m_statusFilter; }
    QTableView *tableView() const { return m_table; }
    QTreeView *treeView() const { return m_tree; }

signals:
    void openSessionRequested(const QString &id);
    void currentSessionChanged(const QString &id);
    void groupedChanged(bool grouped);

protected:
    void showEvent(QShowEvent *event) override;
    void hideEvent(QHideEvent *event) override;

private:
    void applyStatusFilter(int comboIndex);
    void onActivated(const QModelIndex &index);
    void updateStale(bool stale);
    void updateCount();
    void expandGroups();

    SessionTableModel *m_tableModel = nullptr;
    SessionFilterProxy *m_proxy = nullptr;
    SessionGroupModel *m_groups = nullptr;

    QToolBar *m_toolBar = nullptr;
    QLineEdit *m_search = nullptr;
    QComboBox *m_statusFilter = nullptr;
    QToolButton *m_groupButton = nullptr;
    QLabel *m_count = nullptr;
    QLabel *m_staleBanner = nullptr;
    QStackedWidget *m_stack = nullptr;
    QTableView *m_table = nullptr;
    QTreeView *m_tree = nullptr;
    QTimer *m_durationTimer = nullptr;
};

} // namespace paddock::console
