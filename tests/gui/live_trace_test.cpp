// The console's trace shows a running command's output as it is printed: the real pool and broker
// (tests/integration/daemons_fixture.h), the real gRPC console client and main window following
// the session. The command prints a line, sleeps 3 s and prints another; once the trace's call row
// shows the first line, the broker's log must still hold no result for the command (checked
// against the log, not a guess of wall-clock time).
//
// And a model's answer as it streams: an `openai` session against the fake chat-completions server
// (SSE, held twice mid-answer), the details pane open on the answer and growing while the broker's
// log still holds no model.response.

#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/session_view.h"
#include "views/trace_view.h"
#include "tests/integration/daemons_fixture.h"
#include "tests/support/qt_wait.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include <QApplication>
#include <QPixmap>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

namespace paddock::test {
namespace {

using llm::test::FakeChatServer;
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

    // paddockctl submit with `args`: the new session's id, empty (and a failure) when it failed.
    QString submit(std::vector<std::string> args)
    {
        args.insert(args.begin(), "submit");
        args.insert(args.end(), {"--output", "json"});
        const CliResult submitted = cli(args);
        EXPECT_EQ(submitted.exitCode, 0) << submitted.err;
        const json session = json::parse(submitted.out, nullptr, false);
        return session.is_object() ? QString::fromStdString(session.value("id", "")) : QString();
    }

    // The console's window on the test's broker, following session `id`; null (and a failure)
    // when the session never showed in its list.
    std::unique_ptr<console::MainWindow> openWindowOn(console::GrpcConsoleClient &client, const QString &id)
    {
        auto window = std::make_unique<console::MainWindow>(&client, console::MainWindow::Options{.persistSettings = false});
        window->resize(1280, 800);
        window->show();
        window->connectToBroker(QString::fromStdString(m_broker->address));
        if (!waitFor([&] { return window->sessionModel()->rowOf(id) >= 0; }, 30'000)) {
            ADD_FAILURE() << "the session never showed: " << window->connectionText().toStdString();
            return nullptr;
        }
        window->openSession(id);
        return window;
    }
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
    const QString id = submit({"--playbook", playbook.string()});
    ASSERT_FALSE(id.isEmpty());

    console::GrpcConsoleClient client;
    const auto shown = openWindowOn(client, id);
    ASSERT_TRUE(shown);
    console::MainWindow &window = *shown;

    ASSERT_TRUE(waitFor([&] { return callRow(*window.traceModel()).contains(u"first line"); }, 60'000))
        << "the call's row never showed the first line: " << callRow(*window.traceModel()).toStdString();
    const json log = eventsOf(id.toStdString());
    EXPECT_FALSE(std::any_of(log.begin(), log.end(), [](const json &e) { return e["kind"] == "tool.result"; }))
        << "the trace showed the first line only once the command had ended";

    ASSERT_TRUE(waitFor([&] { return callRow(*window.traceModel()).contains(u"second line"); }, 60'000))
        << callRow(*window.traceModel()).toStdString();
    window.close();
}

// The answer the fake model streams, 5 bytes an event after the role's; it ends the session.
constexpr std::string_view kAnswer =
    "I read the README and the build files: the project builds with CMake and its tests pass.";

class LiveModelAnswer : public LiveTrace {
protected:
    std::map<std::string, std::string> configFiles() const override
    {
        return {{"broker.toml", "[models.openai]\n"
                                "base_url = \"" + m_chat.baseUrl() + "\"\n"
                                "model = \"gpt-test\"\n"
                                "api_key_env = \"\"\n"
                                "max_retries = 0\n"}};
    }

    static bool logHas(const json &log, std::string_view kind)
    {
        return std::any_of(log.begin(), log.end(), [&](const json &e) { return e.value("kind", "") == kind; });
    }

    // The trace row whose details name the streamed answer with `marker`; -1 when none does.
    static int rowWhoseDetailsSay(const console::TraceModel &trace, const QString &marker)
    {
        for (int row = 0; row < trace.rowCount(); ++row) {
            if (trace.detailsWithResult(row).contains(marker))
                return row;
        }
        return -1;
    }

    // Each row's kind and summary, for a failure's message.
    static std::string rowsOf(const console::TraceModel &trace)
    {
        std::string rows;
        for (int row = 0; row < trace.rowCount(); ++row) {
            const QModelIndex index = trace.index(row, 0);
            rows += index.data(console::TraceModel::KindRole).toString().toStdString() + ": "
                  + index.data(console::TraceModel::SummaryRole).toString().toStdString() + "\n";
        }
        return rows;
    }

    FakeChatServer m_chat;   // before SetUp, so that configFiles() can name it
};

TEST_F(LiveModelAnswer, TheDetailsPaneGrowsWithTheAnswerBeforeTheModelResponse)
{
    m_chat.respond({{200,
                     llm::test::toolCallCompletion("call_1", "finish",
                                                   {{"status", "succeeded"}, {"summary", "looked at the project"}},
                                                   std::string(kAnswer), 400, 30),
                     {}}});
    // Held after 3 pieces of text (15 bytes), then after 11 (55 bytes).
    m_chat.streamPlans({llm::test::StreamPlan{.holdAfter = 4, .holdAgainAfter = 12}});

    const QString id = submit({"--goal", "Look at the project", "--model", "openai"});
    ASSERT_FALSE(id.isEmpty());

    console::GrpcConsoleClient client;
    const auto shown = openWindowOn(client, id);
    ASSERT_TRUE(shown);
    console::MainWindow &window = *shown;

    // The first hold: the row the answer folds into says so, and its details pane is opened on it.
    const QString soFar = QStringLiteral("the model's answer so far");
    const console::TraceModel &trace = *window.traceModel();
    ASSERT_TRUE(waitFor([&] { return rowWhoseDetailsSay(trace, soFar) >= 0; }, 60'000))
        << "no row showed the streaming answer; held: " << m_chat.streamGate().held();
    console::SessionView *view = window.sessionView();
    view->traceView()->setCurrentIndex(view->traceView()->indexOfRow(rowWhoseDetailsSay(trace, soFar)));
    view->setDetailsExpanded(true);
    const QString first = QString::fromUtf8(kAnswer.substr(0, 10));
    ASSERT_TRUE(waitFor([&] { return view->detailsText().contains(first); }, 30'000)) << view->detailsText().toStdString();
    EXPECT_FALSE(view->detailsText().contains(QString::fromUtf8(kAnswer.substr(0, 30))))
        << "more of the answer than the server had sent: " << view->detailsText().toStdString();

    // Let 40 more bytes go: the open pane grows with them, unselected and unasked, while the log
    // still holds no model.response (the stream is held a second time).
    m_chat.streamGate().release();
    ASSERT_TRUE(m_chat.streamGate().waitUntilHeld(2));
    const QString more = QString::fromUtf8(kAnswer.substr(0, 50));
    ASSERT_TRUE(waitFor([&] { return view->detailsText().contains(more); }, 30'000))
        << "the open details pane did not follow the answer: " << view->detailsText().toStdString();
    EXPECT_TRUE(view->detailsText().contains(soFar)) << view->detailsText().toStdString();
    EXPECT_FALSE(logHas(eventsOf(id.toStdString()), "model.response")) << "the answer had already ended";

    // How it looks, for docs/screenshots (PADDOCK_SCREENSHOTS_OUT, as screenshot_test).
    const std::filesystem::path shot = *m_dir / "session-streaming.png";
    EXPECT_TRUE(window.grab().save(QString::fromStdString(shot.string())));
    if (const char *out = std::getenv("PADDOCK_SCREENSHOTS_OUT"); out && *out) {
        std::filesystem::create_directories(out);
        std::filesystem::copy_file(shot, std::filesystem::path(out) / shot.filename(),
                                   std::filesystem::copy_options::overwrite_existing);
    }

    // The rest: the deltas fold into the model.response's row, which says how the answer came.
    m_chat.streamGate().release();
    const QString streamedIn = QStringLiteral("streamed in");
    ASSERT_TRUE(waitFor([&] { return rowWhoseDetailsSay(trace, streamedIn) >= 0; }, 60'000)) << rowsOf(trace) << eventsOf(id.toStdString()).dump(1).substr(0, 6000);
    const int responseRow = rowWhoseDetailsSay(trace, streamedIn);
    EXPECT_EQ(trace.index(responseRow, 0).data(console::TraceModel::KindRole).toString(), u"model.response");
    EXPECT_TRUE(trace.detailsWithResult(responseRow).contains(QString::fromUtf8(kAnswer)))
        << trace.detailsWithResult(responseRow).toStdString();
    EXPECT_EQ(rowWhoseDetailsSay(trace, soFar), -1) << "a row still shows the answer as streaming";
    window.close();
}

} // namespace
} // namespace paddock::test
