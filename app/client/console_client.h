#pragma once
// The console's only door to the broker. GrpcConsoleClient speaks gRPC on its own threads;
// FakeConsoleClient is driven by tests. Nothing else in the console sees gRPC.
//
// Threads: a ConsoleClient lives on the GUI thread and emits its signals there. Data arrives as
// "notify, then pull": a signal says there is something new, the receiver takes it with take*().
// Implementations coalesce notifications to one per 20-100 ms, so a flood of events costs the GUI
// thread one batch per interval, never one call per event.

#include "models/console_types.h"

#include <QObject>

namespace paddock::console {

class ConsoleClient : public QObject {
    Q_OBJECT

public:
    using QObject::QObject;
    ~ConsoleClient() override = default;

    // "unix:/path", "/path" or "host:port". Reconnects with backoff until disconnectFromBroker().
    virtual void connectToBroker(const QString &address) = 0;
    virtual void disconnectFromBroker() = 0;
    virtual QString address() const = 0;
    virtual ConnectionState connectionState() const = 0;

    // Sessions: while connected, a watch delivers the initial set, then each change.
    virtual QList<SessionInfo> takeSessionChanges() = 0;

    // A session's live tail from fromSeq. Events arrive through eventsArrived(id) and takeEvents(id).
    virtual void followSession(const QString &id, qint64 fromSeq) = 0;
    virtual void unfollowSession(const QString &id) = 0;
    virtual QList<EventRecord> takeEvents(const QString &id) = 0;
    // Older history: up to count events from fromSeq, answered by historyArrived.
    virtual void fetchHistory(const QString &id, qint64 fromSeq, int count) = 0;

    virtual void refreshPools() = 0;

    // Actions; each is answered by actionFinished.
    virtual void submitSession(const SubmitRequest &request) = 0;
    virtual void cancelSession(const QString &id) = 0;
    virtual void pauseSession(const QString &id) = 0;
    virtual void resumeSession(const QString &id) = 0;

signals:
    // detail says, for people, what happened ("connected to unix:/run/...", "broker unreachable: ...").
    void connectionStateChanged(paddock::console::ConnectionState state, const QString &detail);
    void sessionsChanged();
    void eventsArrived(const QString &sessionId);
    void historyArrived(const QString &sessionId, const QList<paddock::console::EventRecord> &events);
    void poolsChanged(const QList<paddock::console::PoolInfo> &pools, bool localExecution);
    // action: "submit", "cancel", "pause", "resume". sessionId is the new session for a submit.
    void actionFinished(const QString &action, bool ok, const QString &message, const QString &sessionId);
};

} // namespace paddock::console
