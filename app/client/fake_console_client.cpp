#include "app/client/fake_console_client.h"

namespace paddock::console {

FakeConsoleClient::FakeConsoleClient(QObject *parent) : ConsoleClient(parent) {}

void FakeConsoleClient::connectToBroker(const QString &address)
{
    m_address = address.isEmpty() ? QStringLiteral("unix:/fake/broker.sock") : address;
    m_calls << QStringLiteral("connect ") + m_address;
    setConnectionState(m_connectOnRequest ? ConnectionState::Connected : ConnectionState::Connecting,
                       QStringLiteral("connected to ") + m_address);
}

void FakeConsoleClient::disconnectFromBroker()
{
    m_calls << QStringLiteral("disconnect");
    setConnectionState(ConnectionState::Disconnected, QStringLiteral("disconnected"));
}

QList<SessionInfo> FakeConsoleClient::takeSessionChanges()
{
    return std::exchange(m_sessions, {});
}

void FakeConsoleClient::followSession(const QString &id, qint64 fromSeq)
{
    m_calls << QStringLiteral("follow %1 %2").arg(id).arg(fromSeq);
    m_follows.insert(id, fromSeq);
}

void FakeConsoleClient::unfollowSession(const QString &id)
{
    m_calls << QStringLiteral("unfollow ") + id;
    m_follows.remove(id);
    m_events.remove(id);
}

QList<EventRecord> FakeConsoleClient::takeEvents(const QString &id)
{
    auto it = m_events.find(id);
    return it == m_events.end() ? QList<EventRecord>() : std::exchange(*it, {});
}

void FakeConsoleClient::fetchHistory(const QString &id, qint64 fromSeq, int count)
{
    m_calls << QStringLiteral("history %1 %2 %3").arg(id).arg(fromSeq).arg(count);
    if (!m_historyProvider)
        return;   // the test answers with pushHistory()
    m_histories.append({id, m_historyProvider(id, fromSeq, count)});
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::refreshPools()
{
    m_calls << QStringLiteral("pools");
}

void FakeConsoleClient::action(const QString &name, const QString &id)
{
    PendingAction result{name, true, {}, id};
    if (m_failArmed) {
        m_failArmed = false;
        result.ok = false;
        result.message = m_failNext;
    } else {
        result.message = name == QLatin1String("submit") ? QStringLiteral("submitted session ") + id
                                                         : QStringLiteral("%1 %2: done").arg(name, id);
    }
    m_actions.append(result);
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::submitSession(const SubmitRequest &request)
{
    m_lastSubmit = request;
    m_calls << QStringLiteral("submit ") + (request.playbook.isEmpty() ? request.goal : request.playbook);
    action(QStringLiteral("submit"), QStringLiteral("fake-%1").arg(++m_submitted));
}

void FakeConsoleClient::cancelSession(const QString &id)
{
    m_calls << QStringLiteral("cancel ") + id;
    action(QStringLiteral("cancel"), id);
}

void FakeConsoleClient::pauseSession(const QString &id)
{
    m_calls << QStringLiteral("pause ") + id;
    action(QStringLiteral("pause"), id);
}

void FakeConsoleClient::resumeSession(const QString &id)
{
    m_calls << QStringLiteral("resume ") + id;
    action(QStringLiteral("resume"), id);
}

void FakeConsoleClient::pushSessions(const QList<SessionInfo> &sessions)
{
    m_sessions.append(sessions);
    m_sessionsDirty = true;
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushEvents(const QString &sessionId, const QList<EventRecord> &events)
{
    m_events[sessionId].append(events);
    if (!m_eventsDirty.contains(sessionId))
        m_eventsDirty << sessionId;
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushHistory(const QString &sessionId, const QList<EventRecord> &events)
{
    m_histories.append({sessionId, events});
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushPools(const QList<PoolInfo> &pools, bool localExecution)
{
    emit poolsChanged(pools, localExecution);
}

void FakeConsoleClient::setConnectionState(ConnectionState state, const QString &detail)
{
    if (state == m_state)
        return;
    m_state = state;
    emit connectionStateChanged(state, detail);
}

void FakeConsoleClient::setHistoryProvider(std::function<QList<EventRecord>(const QString &, qint64, int)> provider)
{
    m_historyProvider = std::move(provider);
}

void FakeConsoleClient::failNextAction(const QString &message)
{
    m_failArmed = true;
    m_failNext = message;
}

void FakeConsoleClient::flush()
{
    if (std::exchange(m_sessionsDirty, false) && !m_sessions.isEmpty())
        emit sessionsChanged();
    const QStringList ids = std::exchange(m_eventsDirty, {});
    for (const QString &id : ids) {
        if (!m_events.value(id).isEmpty())
            emit eventsArrived(id);
    }
    const auto histories = std::exchange(m_histories, {});
    for (const PendingHistory &history : histories)
        emit historyArrived(history.id, history.events);
    const auto actions = std::exchange(m_actions, {});
    for (const PendingAction &a : actions)
        emit actionFinished(a.action, a.ok, a.message, a.sessionId);
}

QStringList FakeConsoleClient::followed() const
{
    QStringList ids = m_follows.keys();
    ids.sort();
    return ids;
}

} // namespace paddock::console
