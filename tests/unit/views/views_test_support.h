#pragma once
// Shared by the view tests: one QApplication for the process (offscreen), and sample data.

#include "models/console_types.h"
#include "tests/support/qt_wait.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <QJsonDocument>
#include <QJsonObject>

#include <functional>

namespace paddock::console::test {

inline void ensureApplication()
{
    static QApplication *app = [] {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");
        static int argc = 1;
        static char name[] = "paddock_views_test";
        static char *argv[] = {name, nullptr};
        return new QApplication(argc, argv);
    }();
    Q_UNUSED(app);
}

using paddock::test::waitFor;

// Base of fixtures whose members are widgets: the application must exist before they do.
struct ApplicationGuard {
    ApplicationGuard() { ensureApplication(); }
};

inline SessionInfo session(const QString &id, const QString &goal, SessionStatus status, const QString &playbook = {})
{
    SessionInfo s;
    s.id = id;
    s.agent = QStringLiteral("default");
    s.goal = goal;
    s.playbook = playbook;
    s.model = QStringLiteral("scripted");
    s.tier = QStringLiteral("lite");
    s.pool = QStringLiteral("local");
    s.status = status;
    s.steps = 3;
    s.costMicros = 1234;
    s.createdUnixMs = 1'700'000'000'000;
    s.updatedUnixMs = 1'700'000'005'000;
    s.lastSeq = 8;
    s.lastEventKind = QStringLiteral("tool.result");
    return s;
}

inline EventRecord event(qint64 seq, const QString &kind, const QJsonObject &payload, qint64 costMicros = 0)
{
    EventRecord e;
    e.seq = seq;
    e.timeUnixMs = 1'700'000'000'000 + seq * 250;
    e.kind = kind;
    e.payloadJson = QJsonDocument(payload).toJson(QJsonDocument::Compact);
    e.costMicros = costMicros;
    return e;
}

// A short session: created, claimed, a model response, a tool call and its result, finished.
inline QList<EventRecord> sampleTrace()
{
    QList<EventRecord> events;
    events << event(1, QStringLiteral("session.created"), {{QStringLiteral("goal"), QStringLiteral("Say hello")}});
    events << event(2, QStringLiteral("state.changed"), {{QStringLiteral("status"), QStringLiteral("running")}});
    events << event(3, QStringLiteral("sandbox.claimed"),
                    {{QStringLiteral("pool"), QStringLiteral("local")}, {QStringLiteral("sandbox_id"), QStringLiteral("sb-42")},
                     {QStringLiteral("tier"), QStringLiteral("lite")}, {QStringLiteral("runtime"), QStringLiteral("bwrap")},
                     {QStringLiteral("host"), QStringLiteral("laptop")}, {QStringLiteral("warm"), true},
                     {QStringLiteral("claim_ms"), 1.4}});
    events << event(4, QStringLiteral("model.response"),
                    {{QStringLiteral("model"), QStringLiteral("scripted")}, {QStringLiteral("text"), QStringLiteral("Running it")},
                     {QStringLiteral("usage"), QJsonObject{{QStringLiteral("input_tokens"), 120}, {QStringLiteral("output_tokens"), 30}}},
                     {QStringLiteral("latency_ms"), 12}},
                    2500);
    events << event(5, QStringLiteral("tool.call"),
                    {{QStringLiteral("call_id"), QStringLiteral("c1")}, {QStringLiteral("name"), QStringLiteral("run_command")},
                     {QStringLiteral("arguments"), QJsonObject{{QStringLiteral("command"), QStringLiteral("echo hello-from-sandbox")}}}});
    events << event(6, QStringLiteral("tool.result"),
                    {{QStringLiteral("call_id"), QStringLiteral("c1")}, {QStringLiteral("name"), QStringLiteral("run_command")},
                     {QStringLiteral("command"), QStringLiteral("echo hello-from-sandbox")}, {QStringLiteral("exit_code"), 0},
                     {QStringLiteral("stdout"), QStringLiteral("hello-from-sandbox\n")}, {QStringLiteral("stderr"), QString()},
                     {QStringLiteral("duration_ms"), 3}});
    events << event(7, QStringLiteral("state.changed"), {{QStringLiteral("status"), QStringLiteral("succeeded")}}, 100);
    return events;
}

} // namespace paddock::console::test
