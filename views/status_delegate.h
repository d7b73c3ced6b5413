#pragma once
// Paints a session's status as a coloured dot and label, and greys rows whose data is stale.
//
// Threads: GUI thread only (delegates paint on it).

#include <QStyledItemDelegate>

namespace paddock::console {

class StatusDelegate : public QStyledItemDelegate {
    Q_OBJECT

public:
    // statusRole: the model's role that holds an int SessionStatus; staleRole: a bool role, or -1.
    StatusDelegate(int statusRole, int staleRole, QObject *parent = nullptr);

    void paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const override;
    QSize sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const override;

private:
    int m_statusRole;
    int m_staleRole;
};

} // namespace paddock::console
