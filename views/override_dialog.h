#pragma once
// Override a session's tier: the tiers the pools offer (price and limits beside each) and a reason,
// which is required (it is recorded with the decision, chooser "human"). The move happens at the
// session's next step: its workspace is snapshotted and restored into a sandbox of the new tier.
//
// Threads: GUI thread only.

#include "models/console_types.h"

#include <QDialog>

class QLabel;
class QLineEdit;
class QPushButton;

namespace paddock::console {

class TierPicker;

class OverrideDialog : public QDialog {
    Q_OBJECT

public:
    OverrideDialog(const SessionInfo &session, const QList<TierInfo> &tiers, QWidget *parent = nullptr);

    QString tier() const;
    QString reason() const;

    TierPicker *tierPicker() const { return m_picker; }
    QLineEdit *reasonEdit() const { return m_reason; }
    QPushButton *overrideButton() const { return m_ok; }
    // Why Override is disabled (empty when it is enabled).
    QString problem() const;

private:
    void updateState();

    SessionInfo m_session;
    TierPicker *m_picker = nullptr;
    QLineEdit *m_reason = nullptr;
    QLabel *m_hint = nullptr;
    QPushButton *m_ok = nullptr;
};

} // namespace paddock::console
