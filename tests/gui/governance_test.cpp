// The governance views in the real window over the real client and the broker paddockd runs, in
// this process (tests/support/in_process_broker: real SQLite store, agents, decisions, policy, cost,
// reviews, real gRPC on a unix socket), offscreen, driven with QTest input: the review queue, the
// decisions view and the cost view, and tier overrides from the sessions table and the decisions
// view. The override tests run their sessions on a real paddock-pool (two bubblewrap tiers) with the
// broker's step workers.

#include "app/client/grpc_console_client.h"
#include "app/governance_controller.h"
#include "app/main_window.h"
#include "models/decision_table_model.h"
#include "models/pools_model.h"
#include "models/review_queue_model.h"
#include "models/session_table_model.h"
#include "views/cost_view.h"
#include "views/override_dialog.h"
#include "views/tier_picker.h"
#include "views/decisions_view.h"
#include "views/review_queue_view.h"
#include "views/sessions_view.h"

#include "broker/core/event.h"
#include "rpc/broker_stubs.h"
#include "tests/integration/daemons_fixture.h"
#include "tests/support/in_process_broker.h"
#include "tests/unit/views/views_test_support.h"

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <QAction>
#include <QComboBox>
#include <QCryptographicHash>
#include <QDateTime>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QTimer>
#include <QApplication>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QTest>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>

using namespace paddock::console;

namespace {

using test::ensureApplication;
using test::waitFor;

class GovernanceViewsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ensureApplication();
        static int counter = 0;
        m_dir = std::filesystem::temp_directory_path()
                / ("pgov-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        m_broker = std::make_unique<paddock::test::InProcessBroker>(m_dir);
        if (runsSessions()) {
            // A real pool with two bubblewrap tiers, and the broker's step workers running.
            PADDOCK_SKIP_IF_MISSING((std::vector<std::string>{"paddock-pool", "paddock-sandbox-init"}));
            m_poolDir = std::make_unique<paddock::test::TempDir>("pgov-pool");
            const auto config = *m_poolDir / "pool.toml";
            std::ofstream(config) << kPoolToml;
            auto pool = paddock::test::startPool(*m_poolDir, std::chrono::seconds(30), {"--config", config.string()});
            ASSERT_TRUE(pool) << "cannot start paddock-pool: " << pool.error().message;
            m_pool = std::make_unique<paddock::test::PoolProcess>(std::move(*pool));
            m_broker->addPool("local", m_pool->endpoint);
            m_broker->runSteps(true);
        }
        auto started = m_broker->start();
        ASSERT_TRUE(started.has_value()) << started.error().message;
        m_client = std::make_unique<GrpcConsoleClient>();
        m_window = std::make_unique<MainWindow>(m_client.get(), MainWindow::Options{false});
        m_window->show();
        m_window->connectToBroker(QString::fromStdString(m_broker->address()));
        ASSERT_TRUE(waitFor([this] { return m_client->connectionState() == ConnectionState::Connected; }));
    }

    void TearDown() override
    {
        m_window.reset();
        m_stub.reset();
        m_client.reset();
        m_broker.reset();
        if (m_pool && HasFailure())
            std::cerr << "---- paddock-pool log (tail) ----\n" << m_pool->daemon.logTail(60);
        if (m_pool)
            m_pool->daemon.terminate();
        m_pool.reset();
        m_poolDir.reset();
        std::filesystem::remove_all(m_dir);
    }

    // Whether this fixture's sessions run (a real pool and the step workers).
    virtual bool runsSessions() const { return false; }

    // Two tiers of one runtime, so the test needs nothing but bubblewrap.
    static constexpr const char *kPoolToml = R"([[tier]]
name = "lite"
runtime = "bwrap"
cpu = 0.5
memory_mb = 512
warm_count = 1
price_per_hour = 0.02

[[tier]]
name = "standard"
runtime = "bwrap"
cpu = 2
memory_mb = 4096
warm_count = 1
price_per_hour = 0.12
)";

    // A session of the broker's (queued: nothing runs its steps here), submitted over gRPC.
    std::string submit()
    {
        paddock::v1::SubmitSessionRequest request;
        request.set_playbook_toml("name = \"one\"\ngoal = \"tidy the records\"\n[[step]]\ntool = \"run_command\"\n"
                                  "command = \"echo hello\"\n");
        paddock::v1::Session session;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const grpc::Status status = stub().sessions->SubmitSession(&context, request, &session);
        EXPECT_TRUE(status.ok()) << status.error_message();
        return session.id();
    }

    // A review item as the step engine opens one: an approval.requested event in the session's log
    // (docs/events.md), requested by someone other than this test's principal.
    std::string openReview(const std::string &sessionId, const std::string &kind, const std::string &risk,
                           const std::string &change, const std::string &format)
    {
        static int counter = 0;
        const std::string id = "rv-test-" + std::to_string(++counter);
        const QByteArray digest = QCryptographicHash::hash(QByteArray::fromStdString(change), QCryptographicHash::Sha256).toHex();
        nlohmann::json payload{{"review_id", id},
                               {"kind", kind},
                               {"summary", "Rewrite " + std::to_string(counter) + " customer records"},
                               {"change", change},
                               {"change_format", format},
                               {"change_hash", "sha256:" + digest.toStdString()},
                               {"impact", "3 records"},
                               {"risk", risk},
                               {"justification", "the tier names changed upstream"},
                               {"policy_verdict", "writes 3 records; policy allows 1 without review"},
                               {"requester", "alice"},
                               {"target_count", 3},
                               {"cost_micros", 40'000},
                               {"expires_unix_ms", QDateTime::currentMSecsSinceEpoch() + 3'600'000},
                               {"tool_call_id", ""},
                               {"payload", nlohmann::json::object()}};
        paddock::store::AppendRequest request;
        request.sessionId = sessionId;
        request.events.push_back({paddock::core::kind::ApprovalRequested, payload.dump()});
        auto appended = m_broker->store().appendSync(std::move(request));
        EXPECT_TRUE(appended.has_value()) << (appended ? std::string() : appended.error().message);
        return id;
    }

    // The broker's own view of an item (over its own gRPC connection, not the console's).
    paddock::v1::ReviewItem brokerItem(const std::string &id)
    {
        paddock::v1::ListReviewItemsRequest request;
        request.set_state("all");
        paddock::v1::ListReviewItemsResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const grpc::Status status = stub().governance->ListReviewItems(&context, request, &response);
        EXPECT_TRUE(status.ok()) << status.error_message();
        for (const auto &item : response.items()) {
            if (item.id() == id)
                return item;
        }
        return {};
    }

    paddock::rpc::BrokerStubs &stub()
    {
        if (!m_stub)
            m_stub = std::make_unique<paddock::rpc::BrokerStubs>(m_broker->newChannel());
        return *m_stub;
    }

    // Waits until the review queue shows ids (polled every 2 s).
    bool queueShows(const QStringList &ids)
    {
        ReviewQueueModel *model = m_window->governance()->reviewModel();
        return waitFor([&] {
            for (const QString &id : ids) {
                if (model->rowOf(id) < 0)
                    return false;
            }
            return true;
        });
    }

    std::filesystem::path m_dir;
    std::unique_ptr<paddock::test::TempDir> m_poolDir;
    std::unique_ptr<paddock::test::PoolProcess> m_pool;
    std::unique_ptr<paddock::test::InProcessBroker> m_broker;
    std::unique_ptr<paddock::rpc::BrokerStubs> m_stub;
    std::unique_ptr<GrpcConsoleClient> m_client;
    std::unique_ptr<MainWindow> m_window;
};

// Each governance page, reached with its shortcut, answers from the broker: an empty queue, no
// decisions yet, and a cost summary; nothing is refused, and nothing is offered that cannot be done.
TEST_F(GovernanceViewsTest, EveryGovernancePageAnswersFromTheBroker)
{
    QTest::keyClick(m_window.get(), Qt::Key_5, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Reviews);
    ReviewQueueView *reviews = m_window->reviewQueueView();
    ASSERT_TRUE(waitFor([&] { return !reviews->queueStatusText().isEmpty(); })) << "the queue never answered";
    EXPECT_EQ(reviews->queueStatusText(), QStringLiteral("Nothing waits for review."));
    EXPECT_FALSE(reviews->approveButton()->isEnabled()) << "nothing selected to approve";
    EXPECT_FALSE(reviews->rejectButton()->isEnabled());

    QTest::keyClick(m_window.get(), Qt::Key_6, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Decisions);
    DecisionsView *decisions = m_window->decisionsView();
    ASSERT_TRUE(waitFor([&] { return !decisions->statusText().isEmpty(); }));
    EXPECT_EQ(decisions->statusText(), QStringLiteral("No environment decisions match."));
    EXPECT_FALSE(decisions->overrideButton()->isEnabled()) << "nothing selected to override";

    QTest::keyClick(m_window.get(), Qt::Key_7, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Cost);
    CostView *cost = m_window->costView();
    ASSERT_TRUE(waitFor([&] { return !cost->totalsText().isEmpty(); })) << cost->spendStatusText().toStdString();
    EXPECT_TRUE(cost->spendStatusText().isEmpty()) << cost->spendStatusText().toStdString();

    QTest::keyClick(m_window.get(), Qt::Key_1, Qt::ControlModifier);
    EXPECT_EQ(m_window->currentPage(), MainWindow::Page::Sessions);
}

// An approver selects an item, reads its change, types a reason and presses `a`: the item leaves the
// queue, and the broker has it approved by this principal with the hash of the change that was read.
TEST_F(GovernanceViewsTest, ApproveAReviewItemFromTheKeyboard)
{
    const std::string session = submit();
    const std::string diff = "--- a/records/customers.json\n+++ b/records/customers.json\n@@ -1,3 +1,3 @@\n {\n"
                             "-  \"tier\": \"silver\"\n+  \"tier\": \"gold\"\n }\n";
    const QString id = QString::fromStdString(openReview(session, "bulk_change", "high", diff, "diff"));

    QTest::keyClick(m_window.get(), Qt::Key_5, Qt::ControlModifier);
    ReviewQueueView *view = m_window->reviewQueueView();
    ASSERT_TRUE(queueShows({id})) << view->queueStatusText().toStdString();
    EXPECT_TRUE(m_window->pageAction(MainWindow::Page::Reviews)->text().contains(QStringLiteral("(1)")));

    // Select it with the mouse: the full change is fetched and shown.
    QTableView *table = view->tableView();
    const QModelIndex row = table->model()->index(0, 0);
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(row).center());
    ASSERT_TRUE(waitFor([&] { return view->changeView()->toPlainText().contains(QStringLiteral("+  \"tier\": \"gold\"")); }))
        << view->detailText().toStdString();
    EXPECT_TRUE(view->detailText().contains(QStringLiteral("the tier names changed upstream")));
    EXPECT_TRUE(view->detailText().contains(QStringLiteral("policy allows 1 without review")));
    EXPECT_FALSE(view->approveButton()->isEnabled()) << "a high-risk item needs a reason";

    QTest::keyClicks(view->reasonEdit(), QStringLiteral("checked against the upstream list"));
    table->setFocus();
    QTest::keyClick(table, Qt::Key_A);
    ASSERT_TRUE(waitFor([&] { return m_window->governance()->reviewModel()->rowOf(id) < 0; }))
        << view->queueStatusText().toStdString();

    const paddock::v1::ReviewItem item = brokerItem(id.toStdString());
    EXPECT_EQ(item.state(), "approved");
    EXPECT_EQ(item.decision_reason(), "checked against the upstream list");
    EXPECT_FALSE(item.decider().empty());
    EXPECT_NE(item.decider(), "alice");
}

// Three items of one kind, selected with Shift+click, rejected with `r` after the confirmation
// (accepted through QTest): all three are rejected in the broker.
TEST_F(GovernanceViewsTest, BulkRejectThreeItemsAfterTheConfirmation)
{
    QStringList ids;
    for (int i = 0; i < 3; ++i) {
        const std::string session = submit();
        ids << QString::fromStdString(openReview(session, "bulk_change", "low",
                                                 R"([{"key":"customers/)" + std::to_string(i) + R"(","value":{"tier":"gold"}}])",
                                                 "records"));
    }
    QTest::keyClick(m_window.get(), Qt::Key_5, Qt::ControlModifier);
    ReviewQueueView *view = m_window->reviewQueueView();
    ASSERT_TRUE(queueShows(ids)) << view->queueStatusText().toStdString();

    QTableView *table = view->tableView();
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(table->model()->index(0, 0)).center());
    QTest::mouseClick(table->viewport(), Qt::LeftButton, Qt::ShiftModifier,
                      table->visualRect(table->model()->index(2, 0)).center());
    ASSERT_EQ(view->selectedItemIds().size(), 3);
    QTest::keyClicks(view->reasonEdit(), QStringLiteral("not now: the upstream list is wrong"));

    QString confirmation;
    QTimer::singleShot(0, [&] {
        auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
        ASSERT_NE(box, nullptr) << "no confirmation";
        confirmation = box->text();
        for (QAbstractButton *button : box->buttons()) {
            if (box->buttonRole(button) == QMessageBox::AcceptRole)
                QTest::mouseClick(button, Qt::LeftButton);
        }
    });
    table->setFocus();
    QTest::keyClick(table, Qt::Key_R);
    EXPECT_TRUE(confirmation.startsWith(QStringLiteral("Reject 3 review items?"))) << confirmation.toStdString();
    EXPECT_TRUE(confirmation.contains(QStringLiteral("Requesters: 3 × alice")));
    ASSERT_TRUE(waitFor([&] { return m_window->governance()->reviewModel()->itemCount() == 0; }))
        << view->queueStatusText().toStdString();
    for (const QString &id : std::as_const(ids)) {
        const paddock::v1::ReviewItem item = brokerItem(id.toStdString());
        EXPECT_EQ(item.state(), "rejected") << id.toStdString();
        EXPECT_EQ(item.decision_reason(), "not now: the upstream list is wrong");
    }
}

// Sessions that run on a real pool: a human moves one to another tier from the sessions table or
// the Decisions view, while it is paused; after resuming it finishes on the new tier with its files.
class GovernanceOverrideTest : public GovernanceViewsTest {
protected:
    bool runsSessions() const override { return true; }

    // Submitted, and paused once its first step has written a file in a lite sandbox (while its
    // second step sleeps); after the override and a resume, its third step reads the file on the
    // new tier.
    std::string submitPaused()
    {
        paddock::v1::SubmitSessionRequest request;
        request.set_playbook_toml(R"(name = "moves"
goal = "write notes, then read them on the tier a human picked"
[[step]]
tool = "write_file"
path = "notes.txt"
content = "written before the override\n"
[[step]]
tool = "run_command"
command = "sleep 2"
[[step]]
tool = "run_command"
command = "cat notes.txt"
expect_stdout = "written before the override"
[[step]]
tool = "finish"
summary = "read the notes on the new tier"
)");
        paddock::v1::Session session;
        {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
            const grpc::Status status = stub().sessions->SubmitSession(&context, request, &session);
            EXPECT_TRUE(status.ok()) << status.error_message();
        }
        EXPECT_TRUE(waitFor([&] {
            auto state = m_broker->store().getSession(session.id());
            return state && state->steps >= 1;
        })) << "the first step never ran";
        paddock::v1::SessionActionRequest pause;
        pause.set_id(session.id());
        pause.set_reason("held for a tier change");
        paddock::v1::Session paused;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const grpc::Status status = stub().sessions->PauseSession(&context, pause, &paused);
        EXPECT_TRUE(status.ok()) << "the session ran to its end before it could be paused: " << status.error_message();
        EXPECT_EQ(paused.tier(), "lite");
        return session.id();
    }

    // The payloads of the session's events of one kind, from the store.
    std::vector<nlohmann::json> eventsOf(const std::string &id, const char *kind)
    {
        std::vector<nlohmann::json> out;
        auto events = m_broker->store().readEvents(id, 1, 10'000);
        EXPECT_TRUE(events.has_value());
        for (const auto &event : events ? *events : std::vector<paddock::core::Event>{}) {
            if (event.kind == kind)
                out.push_back(nlohmann::json::parse(event.payload, nullptr, false));
        }
        return out;
    }

    void resume(const std::string &id)
    {
        paddock::v1::SessionActionRequest request;
        request.set_id(id);
        paddock::v1::Session session;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const grpc::Status status = stub().sessions->ResumeSession(&context, request, &session);
        ASSERT_TRUE(status.ok()) << status.error_message();
    }

    // The session's decisions as the broker lists them (newest first).
    std::vector<paddock::v1::EnvironmentDecision> decisionsOf(const std::string &id)
    {
        paddock::v1::ListDecisionsRequest request;
        request.set_session_id(id);
        paddock::v1::ListDecisionsResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        const grpc::Status status = stub().governance->ListDecisions(&context, request, &response);
        EXPECT_TRUE(status.ok()) << status.error_message();
        return {response.decisions().begin(), response.decisions().end()};
    }

    // Answers the override dialog that `open` brings up: lists its tiers into `listed`, picks
    // `tier`, types the reason and presses Override.
    void overrideThroughTheDialog(const std::function<void()> &open, const QString &tier, const QString &reason,
                                  QString *listed)
    {
        bool answered = false;
        QTimer::singleShot(0, [&] {
            auto *dialog = qobject_cast<OverrideDialog *>(QApplication::activeModalWidget());
            ASSERT_NE(dialog, nullptr) << "no override dialog";
            answered = true;
            for (int i = 0; i < dialog->tierPicker()->count(); ++i)
                *listed += dialog->tierPicker()->itemText(i) + u'\n';
            dialog->tierPicker()->selectTier(tier);
            EXPECT_FALSE(dialog->overrideButton()->isEnabled()) << "a reason is required";
            QTest::keyClicks(dialog->reasonEdit(), reason);
            QTest::mouseClick(dialog->overrideButton(), Qt::LeftButton);
        });
        open();
        EXPECT_TRUE(answered) << "the override dialog never opened";
    }

    // The override decision the broker recorded for the session (empty id: none yet).
    paddock::v1::EnvironmentDecision overrideDecision(const std::string &id)
    {
        paddock::v1::EnvironmentDecision found;
        waitFor([&] {
            for (const auto &decision : decisionsOf(id)) {
                if (decision.trigger() == "override") {
                    found = decision;
                    return true;
                }
            }
            return false;
        });
        return found;
    }

    // The sessions table's tier cell of the session (what the badge delegate paints from).
    QModelIndex tierCell(const QString &id)
    {
        QTableView *table = m_window->sessionsView()->tableView();
        for (int r = 0; r < table->model()->rowCount(); ++r) {
            const QModelIndex index = table->model()->index(r, SessionTableModel::Tier);
            if (index.data(SessionTableModel::SessionIdRole).toString() == id)
                return index;
        }
        return {};
    }
};

// Override a session's tier from the sessions table's right-click action: the dialog lists the
// pool's tiers with their prices and limits, the reason is typed, and the broker records the
// decision with chooser human, trigger override and the reason; the table's badge says human. On
// resume the session moves there with its workspace and finishes.
TEST_F(GovernanceOverrideTest, OverrideATierFromTheSessionsTable)
{
    const std::string session = submitPaused();
    const QString id = QString::fromStdString(session);
    ASSERT_TRUE(waitFor([&] { return m_window->sessionModel()->rowOf(id) >= 0; }));
    ASSERT_TRUE(waitFor([&] { return m_window->poolsModel()->poolCount() > 0; })) << "the window never listed the pool";

    QTest::keyClick(m_window.get(), Qt::Key_1, Qt::ControlModifier);
    QTableView *table = m_window->sessionsView()->tableView();
    ASSERT_TRUE(waitFor([&] { return tierCell(id).isValid(); }));
    EXPECT_EQ(tierCell(id).data(SessionTableModel::TierChooserRole).toString(), QStringLiteral("default"))
        << "no tier was given at submit: the default chose";
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(tierCell(id)).center());
    ASSERT_EQ(m_window->currentSessionId(), id);
    QAction *overrideAction = m_window->overrideTierAction();
    ASSERT_TRUE(table->actions().contains(overrideAction)) << "Override tier… is in the table's right-click menu";
    ASSERT_TRUE(overrideAction->isEnabled()) << overrideAction->toolTip().toStdString();

    QString listed;
    overrideThroughTheDialog([&] { overrideAction->trigger(); }, QStringLiteral("standard"),
                             QStringLiteral("the test suite needs 2 GiB"), &listed);
    EXPECT_TRUE(listed.contains(QStringLiteral("lite · $0.020/h · 0.5 CPU · 512 MiB · bwrap"))) << listed.toStdString();
    EXPECT_TRUE(listed.contains(QStringLiteral("standard · $0.120/h · 2 CPU · 4.0 GiB · bwrap"))) << listed.toStdString();

    const paddock::v1::EnvironmentDecision decision = overrideDecision(session);
    ASSERT_FALSE(decision.id().empty()) << "no override decision for " << session;
    EXPECT_EQ(decision.chooser(), "human");
    EXPECT_EQ(decision.requested_tier(), "standard");
    EXPECT_EQ(decision.chosen_tier(), "standard");
    EXPECT_TRUE(decision.reason().ends_with(": the test suite needs 2 GiB")) << decision.reason();
    EXPECT_FALSE(decision.who().empty());
    // The table follows the log: the tier is the new one and its badge names who chose it.
    ASSERT_TRUE(waitFor([&] { return tierCell(id).data(SessionTableModel::TierChooserRole).toString() == u"human"; }))
        << tierCell(id).data(SessionTableModel::TierChooserRole).toString().toStdString();
    EXPECT_EQ(tierCell(id).data(Qt::DisplayRole).toString(), QStringLiteral("standard"));

    // Resumed, it moves to the new tier with its files (the command reads the file written before).
    resume(session);
    ASSERT_TRUE(waitFor([&] {
        const int row = m_window->sessionModel()->rowOf(id);
        return row >= 0 && isTerminal(m_window->sessionModel()->sessionAt(row).status);
    }, 90'000)) << "the session never ended";
    const SessionInfo ended = m_window->sessionModel()->sessionAt(m_window->sessionModel()->rowOf(id));
    EXPECT_EQ(ended.status, SessionStatus::Succeeded) << ended.statusReason.toStdString();
    EXPECT_EQ(ended.tier, QStringLiteral("standard"));
    const auto moves = eventsOf(session, paddock::core::kind::SandboxMoved);
    ASSERT_EQ(moves.size(), 1u) << "the workspace was not moved";
    EXPECT_EQ(moves[0].value("reason", ""), "tier_override") << moves[0];
    EXPECT_EQ(moves[0].value("workspace", ""), "restored") << moves[0];
    // The tier's release filled in the override decision's outcome from the sandbox's samples.
    ASSERT_TRUE(waitFor([&] {
        for (const auto &d : decisionsOf(session)) {
            if (d.id() == decision.id())
                return !d.outcome().empty() && d.outcome() != "pending";
        }
        return false;
    }, 30'000)) << "the override decision has no outcome";
}

// Override from the Decisions view: select the session's start decision with the mouse, press
// Override tier…, and the broker records a human's decision, which the view then lists.
TEST_F(GovernanceOverrideTest, OverrideATierFromTheDecisionsView)
{
    const std::string session = submitPaused();
    const QString id = QString::fromStdString(session);
    ASSERT_TRUE(waitFor([&] { return m_window->sessionModel()->rowOf(id) >= 0; }));
    ASSERT_TRUE(waitFor([&] { return m_window->poolsModel()->poolCount() > 0; })) << "the window never listed the pool";

    QTest::keyClick(m_window.get(), Qt::Key_6, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Decisions);
    DecisionsView *view = m_window->decisionsView();
    const DecisionTableModel *model = m_window->governance()->decisionModel();
    auto rowOfSession = [&](const QString &trigger) {
        for (int row = 0; row < model->decisionCount(); ++row) {
            if (model->decisionAt(row).sessionId == id && model->decisionAt(row).trigger == trigger)
                return row;
        }
        return -1;
    };
    ASSERT_TRUE(waitFor([&] { return rowOfSession(QStringLiteral("session_start")) >= 0; }))
        << view->statusText().toStdString();
    EXPECT_FALSE(view->overrideButton()->isEnabled()) << "nothing selected to override";
    QTableView *table = view->tableView();
    const int row = rowOfSession(QStringLiteral("session_start"));
    EXPECT_EQ(model->decisionAt(row).chooser, QStringLiteral("default"));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(table->model()->index(row, 0)).center());
    ASSERT_EQ(view->selectedSessionId(), id);
    ASSERT_TRUE(view->overrideButton()->isEnabled()) << view->overrideButton()->toolTip().toStdString();

    QString listed;
    overrideThroughTheDialog([&] { QTest::mouseClick(view->overrideButton(), Qt::LeftButton); },
                             QStringLiteral("standard"), QStringLiteral("picked from the decisions"), &listed);
    EXPECT_TRUE(listed.contains(QStringLiteral("standard"))) << listed.toStdString();

    const paddock::v1::EnvironmentDecision decision = overrideDecision(session);
    ASSERT_FALSE(decision.id().empty()) << "no override decision for " << session;
    EXPECT_EQ(decision.chooser(), "human");
    EXPECT_EQ(decision.chosen_tier(), "standard");
    EXPECT_TRUE(decision.reason().ends_with(": picked from the decisions")) << decision.reason();
    // The view lists it (its next refresh), with chooser human; the sessions table's badge too.
    ASSERT_TRUE(waitFor([&] { return rowOfSession(QStringLiteral("override")) >= 0; })) << view->statusText().toStdString();
    EXPECT_EQ(model->decisionAt(rowOfSession(QStringLiteral("override"))).chooser, QStringLiteral("human"));
    ASSERT_TRUE(waitFor([&] { return tierCell(id).data(SessionTableModel::TierChooserRole).toString() == u"human"; }));
}

} // namespace
