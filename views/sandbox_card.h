#pragma once
// The sandbox a session works in: pool, tier, sandbox id, runtime and host, claim latency (warm or
// cold), and its state (claimed, failed: reason, released). Filled from the session's row and from
// the sandbox.* events of its trace.
//
// Threads: GUI thread only.

#include "models/console_types.h"

#include <QFrame>

class QLabel;

namespace paddock::console {

class SandboxCard : public QFrame {
    Q_OBJECT

public:
    explicit SandboxCard(QWidget *parent = nullptr);

    void clear();
    void setSession(const SessionInfo &session);
    // Looks only at sandbox.* events; cheap to call with every batch.
    void addEvents(const QList<EventRecord> &events);

    QString stateText() const;

private:
    void refresh();

    SessionInfo m_session;
    QString m_pool;
    QString m_tier;
    QString m_sandboxId;
    QString m_runtime;
    QString m_host;
    QString m_state;
    bool m_failed = false;
    double m_claimMs = -1;
    bool m_warm = false;
    int m_claims = 0;

    QLabel *m_poolLabel = nullptr;
    QLabel *m_tierLabel = nullptr;
    QLabel *m_sandboxLabel = nullptr;
    QLabel *m_runtimeLabel = nullptr;
    QLabel *m_claimLabel = nullptr;
    QLabel *m_stateLabel = nullptr;
};

} // namespace paddock::console
