// The governance views in the real window over the real client and the broker's own service in
// this process (tests/support/in_process_broker: real SQLite store, real gRPC on a unix socket),
// offscreen, driven with QTest input: the review queue, the decisions view and the cost view, and
// tier overrides from the sessions table.

#include "app/client/grpc_console_client.h"
#include "app/governance_controller.h"
#include "app/main_window.h"
#include "models/review_queue_model.h"
#include "models/session_table_model.h"
#include "views/cost_view.h"
#include "views/decisions_view.h"
#include "views/review_queue_view.h"
#include "views/sessions_view.h"

#include "tests/support/in_process_broker.h"
#include "tests/unit/views/views_test_support.h"

#include <QAction>
#include <QApplication>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QTest>

#include <gtest/gtest.h>

#include <filesystem>

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
        ASSERT_TRUE(m_broker->start().has_value());
        m_client = std::make_unique<GrpcConsoleClient>();
        m_window = std::make_unique<MainWindow>(m_client.get(), MainWindow::Options{false});
        m_window->show();
        m_window->connectToBroker(QString::fromStdString(m_broker->address()));
        ASSERT_TRUE(waitFor([this] { return m_client->connectionState() == ConnectionState::Connected; }));
    }

    void TearDown() override
    {
        m_window.reset();
        m_client.reset();
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    std::filesystem::path m_dir;
    std::unique_ptr<paddock::test::InProcessBroker> m_broker;
    std::unique_ptr<GrpcConsoleClient> m_client;
    std::unique_ptr<MainWindow> m_window;
};

// Until a broker implements the governance RPCs it answers UNIMPLEMENTED: each view says so in
// words, nothing spins or crashes, and the window stays usable.
TEST_F(GovernanceViewsTest, ABrokerWithoutGovernanceIsSaidPlainly)
{
    QTest::keyClick(m_window.get(), Qt::Key_5, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Reviews);
    ReviewQueueView *reviews = m_window->reviewQueueView();
    ASSERT_TRUE(waitFor([&] { return !reviews->queueStatusText().isEmpty(); })) << "the queue never answered";
    const QString status = reviews->queueStatusText();
    if (status.contains(QStringLiteral("UNIMPLEMENTED"))) {
        EXPECT_TRUE(status.contains(QStringLiteral("does not offer reviews yet"))) << status.toStdString();
        EXPECT_FALSE(reviews->approveButton()->isEnabled());
        EXPECT_FALSE(reviews->rejectButton()->isEnabled());
    }

    QTest::keyClick(m_window.get(), Qt::Key_6, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Decisions);
    DecisionsView *decisions = m_window->decisionsView();
    ASSERT_TRUE(waitFor([&] { return !decisions->statusText().isEmpty(); }));
    EXPECT_FALSE(decisions->overrideButton()->isEnabled()) << "nothing selected to override";

    QTest::keyClick(m_window.get(), Qt::Key_7, Qt::ControlModifier);
    ASSERT_EQ(m_window->currentPage(), MainWindow::Page::Cost);
    CostView *cost = m_window->costView();
    ASSERT_TRUE(waitFor([&] { return !cost->spendStatusText().isEmpty() || !cost->totalsText().isEmpty(); }));

    QTest::keyClick(m_window.get(), Qt::Key_1, Qt::ControlModifier);
    EXPECT_EQ(m_window->currentPage(), MainWindow::Page::Sessions);
}

} // namespace
