#pragma once
// The Pools view's "Checkpoint store" card: where the broker keeps workspace checkpoints, the bytes
// stored, the workspaces they hold with the deduplication ratio, what a collection now would free,
// how long ended sessions' checkpoints are kept and what the last collection freed (PoolsModel's
// storage(), in the words of storageCardText()). Hidden until the broker has answered with figures;
// a refresh that fails keeps the last figures and says they are not fresh.
//
// Threads: GUI thread only.

#include <QFrame>

class QLabel;

namespace paddock::console {

class PoolsModel;

class StorageCard : public QFrame {
    Q_OBJECT

public:
    explicit StorageCard(QWidget *parent = nullptr);

    // Follows the model's storageChanged.
    void setModel(PoolsModel *model);

    QString whereText() const;
    QString figuresText() const;
    QString detailText() const;
    QString warningText() const;

private:
    void refresh();

    PoolsModel *m_model = nullptr;
    QLabel *m_where = nullptr;
    QLabel *m_figures = nullptr;
    QLabel *m_detail = nullptr;
    QLabel *m_warning = nullptr;
};

} // namespace paddock::console
