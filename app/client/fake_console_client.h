#pragma once
// A ConsoleClient that tests drive: they push sessions, events, history and pools, flip the
// connection state, and read back which calls the console made. No gRPC, no threads.
//
// Threads: GUI thread only, like the real client. Signals are emitted synchronously from the push
// methods (autoFlush, the default), or all at once by flush() to imitate the real client's
// coalescing.

#include "app/client/console_client.h"

#include <QHash>
#include <QStringList>

#include <functional>

namespace paddock::console {

class FakeConsoleClient final : public ConsoleClient {
    Q_OBJECT

public:
    explicit FakeConsoleClient(QObject *parent = nullptr);

    // ConsoleClient
    void connectToBroker(const QString &address) override;
    void disconnectFromBroker() override;
    QString address() const override { return m_address; }
    ConnectionState connectionState() const override { return m_state; }
    QList<SessionInfo> takeSessionChanges() override;
    void followSession(const QString &id, qint64 fromSeq) override;
    void unfollowSession(const QString &id) override;
    QList<EventRecord> takeEvents(const QString &id) override;
    void fetchHistory(const QString &id, qint64 fromSeq, int count) override;
    void refreshPools() override;
    void submitSession(const SubmitRequest &request) override;
    void cancelSession(const QString &id) override;
    void pauseSession(const QString &id) override;
    void resumeSession(const QString &id) override;

    // Driving it.
    void pushSessions(const QList<SessionInfo> &sessions);
    void pushEvents(const QString &sessionId, const QList<EventRecord> &events);
    void pushHistory(const QString &sessionId, const QList<EventRecord> &events);
    void pushPools(const QList<PoolInfo> &pools, bool localExecution);
    // Emits connectionStateChanged when the state changes (like the real client).
    void setConnectionState(ConnectionState state, const QString &detail = {});
    // When set, fetchHistory answers by itself (on flush, or at once with autoFlush).
    void setHistoryProvider(std::function<QList<EventRecord>(const QString &id, qint64 fromSeq, int count)> provider);
    // connectToBroker() goes straight to Connected (default) or stays Connecting.
    void setConnectOnRequest(bool connect) { m_connectOnRequest = connect; }
    // The next action answers ok=false with this message (the broker's refusal).
    void failNextAction(const QString &message);
    // The action answers wait for flush() instead of coming at once.
    void setAutoFlush(bool autoFlush) { m_autoFlush = autoFlush; }
    void flush();

    // What the console did: "connect ADDR", "disconnect", "follow ID FROM", "unfollow ID",
    // "history ID FROM COUNT", "pools", "submit GOAL-OR-PLAYBOOK", "cancel ID", "pause ID", "resume ID".
    QStringList calls() const { return m_calls; }
    void clearCalls() { m_calls.clear(); }
    SubmitRequest lastSubmit() const { return m_lastSubmit; }
    QStringList followed() const;
    qint64 followedFrom(const QString &id) const { return m_follows.value(id, -1); }

private:
    void action(const QString &action, const QString &id);

    struct PendingHistory {
        QString id;
        QList<EventRecord> events;
    };
    struct PendingAction {
        QString action;
        bool ok;
        QString message;
        QString sessionId;
    };

    QString m_address;
    ConnectionState m_state = ConnectionState::Disconnected;
    bool m_connectOnRequest = true;
    bool m_autoFlush = true;
    QList<SessionInfo> m_sessions;
    bool m_sessionsDirty = false;
    QHash<QString, QList<EventRecord>> m_events;
    QStringList m_eventsDirty;
    QList<PendingHistory> m_histories;
    QList<PendingAction> m_actions;
    QHash<QString, qint64> m_follows;
    std::function<QList<EventRecord>(const QString &, qint64, int)> m_historyProvider;
    QString m_failNext;
    bool m_failArmed = false;
    QStringList m_calls;
    SubmitRequest m_lastSubmit;
    int m_submitted = 0;
};

} // namespace paddock::console
