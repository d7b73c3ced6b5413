#pragma once
// A debug shell over a failed sandbox's snapshot: pick a tier, open (a fresh sandbox restored from
// the snapshot), type commands (each runs through DebugExec with /bin/sh -c and is audited in the
// failed session's log), read their output, close. Up/Down recall earlier commands.
//
// Threads: GUI thread only. The panel asks with signals; the window calls the client and hands the
// answers back.

#include "models/sandbox_types.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;

namespace paddock::console {

class DebugShellPanel : public QWidget {
    Q_OBJECT

public:
    explicit DebugShellPanel(QWidget *parent = nullptr);

    // The post-mortem the shell would restore (empty ref: no snapshot, so no shell).
    void setTarget(const QString &pool, const QString &sandboxId, const QString &snapshotRef, const QString &failedTier);
    void setTiers(const QStringList &tiers);
    // Why the principal may not open shells (models/permissions.h), or empty: the Open button is
    // disabled with this as its tooltip.
    void setRefusal(const QString &reason);

    void shellOpened(const DebugShellInfo &shell, const QString &error);
    void appendOutput(const QByteArray &stdoutData, const QByteArray &stderrData);
    void execFinished(int exitCode, int signal, const QString &error);
    void shellClosed(const QString &error);

    QString shellId() const { return m_shell.shellId; }
    bool isBusy() const { return m_busy; }
    QString transcript() const;
    QLineEdit *commandEdit() const { return m_command; }
    QComboBox *tierCombo() const { return m_tier; }
    QPushButton *openButton() const { return m_open; }

signals:
    void openRequested(const QString &tier);
    void execRequested(const QString &shellId, const QString &commandLine);
    void closeRequested(const QString &shellId);

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    void submit();
    void append(const QString &text, const QColor &color = {});
    void updateState();

    QString m_pool;
    QString m_sandboxId;
    QString m_snapshotRef;
    QString m_failedTier;
    DebugShellInfo m_shell;
    bool m_opening = false;
    bool m_busy = false;
    QString m_refusal;
    QStringList m_history;
    int m_historyPos = 0;

    QComboBox *m_tier = nullptr;
    QPushButton *m_open = nullptr;
    QLabel *m_state = nullptr;
    QPlainTextEdit *m_output = nullptr;
    QLineEdit *m_command = nullptr;
};

} // namespace paddock::console
