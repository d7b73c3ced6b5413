// The console's trace shows a running command's output as it is printed: the real pool and broker
// (tests/integration/daemons_fixture.h), the real gRPC console client and main window following
// the session. The command prints a line, sleeps 3 s and prints another; once the trace's call row
// shows the first line, the broker's log must still hold no result for the command (checked
// against the log, not a guess of wall-clock time).

#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "tests/integration/daemons_fixture.h"
#include "tests/support/qt_wait.h"

#include <QApplication>

namespace paddock::test {
namespace {

using nlohmann::json;

QApplication &application()
{
    static QApplication *app = [] {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");
        static int argc = 1;
        static char name[] = "paddock_live_trace_test";
        static char *argv[] = {name, nullptr};
        return new QApplication(argc, argv);
    }();
    return *app;
}

class LiveTrace : public DaemonsTest {
protected:
    LiveTrace() { application(); }
};

// The summary of the trace's run_command call row; empty when there is none yet.
QString callRow(const console::TraceModel &trace)
{
    for (int row = 0; row < trace.rowCount(); ++row) {
        const QModelIndex index = trace.index(row, 0);
        if (index.data(console::TraceModel::KindRole).toString() == u"tool.call"
            && index.data(console::TraceModel::SummaryRole).toString().startsWith(u"run_command"))
            return index.data(console::TraceModel::SummaryRole).toString();
    }
    return {};
}

TEST_F(LiveTrace, TheRunningCallsRowShowsItsOutputBeforeTheCommandEnds)
{
    const auto playbook = writeFile("slow.toml", R"(
name = "slow"
goal = "print, wait, print"

[[step]]
tool = "run_command"
command = "echo first line; sleep 3; echo second line"
)");
    const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const QString id = QString::fromStdString(json::parse(submitted.out).value("id", ""));

    console::GrpcConsoleClient client;
    console::MainWindow window(&client, console::MainWindow::Options{.persistSettings = false});
    window.resize(1280, 800);
    window.show();
    window.connectToBroker(QString::fromStdString(m_broker->address));
    ASSERT_TRUE(waitFor([&] { return window.sessionModel()->rowOf(id) >= 0; }, 30'000)) << window.connectionText().toStdString();
    window.openSession(id);

    ASSERT_TRUE(waitFor([&] { return callRow(*window.traceModel()).contains(u"first line"); }, 60'000))
        << "the call's row never showed the first line: " << callRow(*window.traceModel()).toStdString();
    const json log = eventsOf(id.toStdString());
    EXPECT_FALSE(std::any_of(log.begin(), log.end(), [](const json &e) { return e["kind"] == "tool.result"; }))
        << "the trace showed the first line only once the command had ended";

    ASSERT_TRUE(waitFor([&] { return callRow(*window.traceModel()).contains(u"second line"); }, 60'000))
        << callRow(*window.traceModel()).toStdString();
    window.close();
}

} // namespace
} // namespace paddock::test
