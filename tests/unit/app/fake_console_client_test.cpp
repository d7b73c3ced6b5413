#include "app/client/fake_console_client.h"

#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

TEST(FakeConsoleClientTest, RecordsCallsAndEmitsWhatTestsPush)
{
    FakeConsoleClient client;
    QSignalSpy state(&client, &ConsoleClient::connectionStateChanged);
    QSignalSpy sessions(&client, &ConsoleClient::sessionsChanged);
    QSignalSpy events(&client, &ConsoleClient::eventsArrived);
    QSignalSpy actions(&client, &ConsoleClient::actionFinished);
    QSignalSpy history(&client, &ConsoleClient::historyArrived);

    client.connectToBroker({});
    EXPECT_EQ(client.connectionState(), ConnectionState::Connected);
    client.setConnectionState(ConnectionState::Broken);
    client.setConnectionState(ConnectionState::Broken);
    EXPECT_EQ(state.count(), 2);

    SessionInfo s;
    s.id = QStringLiteral("s1");
    client.pushSessions({s});
    EXPECT_EQ(sessions.count(), 1);
    EXPECT_EQ(client.takeSessionChanges().size(), 1);
    EXPECT_TRUE(client.takeSessionChanges().isEmpty());

    client.followSession(QStringLiteral("s1"), 5);
    client.pushEvents(QStringLiteral("s1"), {EventRecord{5, 0, QStringLiteral("k"), "{}", 0}});
    EXPECT_EQ(events.count(), 1);
    EXPECT_EQ(client.takeEvents(QStringLiteral("s1")).size(), 1);
    EXPECT_EQ(client.followedFrom(QStringLiteral("s1")), 5);

    client.setHistoryProvider([](const QString &, qint64 from, int count) {
        QList<EventRecord> out;
        for (qint64 seq = from; seq < from + count; ++seq)
            out.append(EventRecord{seq, 0, QStringLiteral("k"), "{}", 0});
        return out;
    });
    client.fetchHistory(QStringLiteral("s1"), 1, 4);
    ASSERT_EQ(history.count(), 1);
    EXPECT_EQ(history.at(0).at(1).value<QList<EventRecord>>().size(), 4);

    client.cancelSession(QStringLiteral("s1"));
    client.failNextAction(QStringLiteral("session s2 not found"));
    client.pauseSession(QStringLiteral("s2"));
    ASSERT_EQ(actions.count(), 2);
    EXPECT_TRUE(actions.at(0).at(1).toBool());
    EXPECT_FALSE(actions.at(1).at(1).toBool());
    EXPECT_EQ(actions.at(1).at(2).toString(), QStringLiteral("session s2 not found"));

    client.setAutoFlush(false);
    SubmitRequest request;
    request.playbook = QStringLiteral("demo");
    client.submitSession(request);
    EXPECT_EQ(actions.count(), 2);
    client.flush();
    EXPECT_EQ(actions.count(), 3);
    EXPECT_EQ(client.lastSubmit().playbook, QStringLiteral("demo"));
    EXPECT_TRUE(client.calls().contains(QStringLiteral("cancel s1")));
    EXPECT_TRUE(client.calls().contains(QStringLiteral("submit demo")));
    EXPECT_TRUE(client.calls().contains(QStringLiteral("history s1 1 4")));
}

} // namespace
} // namespace paddock::console
