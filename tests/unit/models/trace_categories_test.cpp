// The trace's new kinds: egress attempts, snapshots, restores, moves between pools and debug
// shells get their category and a summary that says what happened; a failed command's post-mortem
// reference is read from its tool.result.

#include "model_test_support.h"
#include "models/trace_model.h"

#include <QAbstractItemModelTester>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::event;

std::string summaryOf(TraceModel &model, int row)
{
    return model.index(row, TraceModel::Summary).data().toString().toStdString();
}

TEST(TraceCategoriesTest, EgressSnapshotsMovesAndShellsAreNamed)
{
    TraceModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setSession(QStringLiteral("s1"));
    model.appendEvents({
        event(1, QStringLiteral("egress.allowed"), R"({"host":"pypi.org","port":443,"address":"151.101.0.223","bytes_sent":512,"bytes_received":4096})"),
        event(2, QStringLiteral("egress.refused"), R"({"host":"169.254.169.254","port":80,"reason":"metadata address"})"),
        event(3, QStringLiteral("sandbox.snapshot"), R"({"snapshot_ref":"lite-1","sandbox_id":"sb-1","file_count":12,"size_bytes":3400})"),
        event(4, QStringLiteral("sandbox.restored"), R"({"snapshot_ref":"lite-1","sandbox_id":"sb-2"})"),
        event(5, QStringLiteral("sandbox.moved"), R"({"from_pool":"a","to_pool":"b","snapshot_ref":"lite-1","reason":"pool a unreachable"})"),
        event(6, QStringLiteral("debug_shell.exec"), R"({"shell_id":"sh-1","argv":["/bin/sh","-c","ls -la"],"exit_code":0,"by":"ops"})"),
        event(7, QStringLiteral("tool.result"), R"({"name":"run_command","command":"make","exit_code":2,"post_mortem":{"pool":"local","sandbox_id":"sb-1"}})"),
        event(8, QStringLiteral("sandbox.lost"), R"({"pool":"a","sandbox_id":"sb-9","error":"unreachable"})"),
        event(9, QStringLiteral("sandbox.moved"), R"({"from_pool":"a","to_pool":"b","snapshot_ref":null,"workspace":"empty"})"),
    });
    ASSERT_EQ(model.rowCount(), 9);
    auto category = [&](int row) { return EventCategory(model.index(row, 0).data(TraceModel::CategoryRole).toInt()); };
    EXPECT_EQ(category(0), EventCategory::EgressAllowed);
    EXPECT_EQ(category(1), EventCategory::EgressRefused);
    EXPECT_EQ(category(2), EventCategory::Snapshot);
    EXPECT_EQ(category(3), EventCategory::Restore);
    EXPECT_EQ(category(4), EventCategory::Move);
    EXPECT_EQ(category(5), EventCategory::DebugShell);
    EXPECT_EQ(category(6), EventCategory::Other);
    // Kinds the broker no longer writes (sandbox.snapshot, snapshot_ref) still get their category
    // and their fields in words.
    EXPECT_EQ(summaryOf(model, 0), "allowed pypi.org:443 (151.101.0.223)");
    EXPECT_EQ(summaryOf(model, 1), "refused 169.254.169.254:80, metadata address");
    EXPECT_EQ(summaryOf(model, 2), "file_count=12 sandbox_id=sb-1 size_bytes=3400 snapshot_ref=lite-1");
    EXPECT_EQ(summaryOf(model, 3), "restored an empty workspace into sb-2");
    EXPECT_EQ(summaryOf(model, 4), "moved from a to b, pool a unreachable");
    EXPECT_EQ(summaryOf(model, 5), "$ ls -la, exit 0, by ops");
    EXPECT_TRUE(summaryOf(model, 6).ends_with("post-mortem kept"));
    EXPECT_EQ(model.index(6, 0).data(TraceModel::PostMortemRefRole).toStringList(),
              (QStringList{QStringLiteral("local"), QStringLiteral("sb-1")}));
    EXPECT_TRUE(model.index(0, 0).data(TraceModel::PostMortemRefRole).toStringList().isEmpty());
    EXPECT_FALSE(model.index(1, 0).data(TraceModel::IsErrorRole).toBool());   // a refusal is the policy working
    EXPECT_TRUE(model.index(7, 0).data(TraceModel::IsErrorRole).toBool());
    EXPECT_EQ(summaryOf(model, 7), "lost sb-9 from pool a with its pool: unreachable");
    EXPECT_EQ(category(7), EventCategory::Move);
    EXPECT_EQ(summaryOf(model, 8), "moved from a to b, empty workspace (no checkpoint yet)");
}

// Checkpoints in the store and restores from them (docs/checkpoints.md): the rows name the
// checkpoint and what it cost, and a restore's duration is its latency.
TEST(TraceCategoriesTest, CheckpointsAndRestoresSayWhatTheyCost)
{
    TraceModel model;
    model.setSession(QStringLiteral("s1"));
    const QByteArray manifest = "3f2a9c0d1e2f0000000000000000000000000000000000000000000000000000";
    model.setFoldBookkeeping(false);   // a checkpoint alone, as its own row
    model.appendEvents({
        event(1, QStringLiteral("checkpoint"), R"({"manifest":")" + manifest + R"(","store":"broker","files":4,"changed":1,"removed":0,"sent_bytes":812,"duration_ms":2.5})"),
        event(2, QStringLiteral("sandbox.restored"), R"({"manifest":")" + manifest + R"(","sandbox_id":"sb-2","restored_files":14,"restore_ms":41})"),
        event(3, QStringLiteral("sandbox.moved"), R"({"from_pool":"east","to_pool":"west","manifest":")" + manifest + R"(","restore_ms":55})"),
    });
    ASSERT_EQ(model.rowCount(), 3);
    EXPECT_EQ(summaryOf(model, 0), "checkpoint 4 files, 1 changed, 0 removed, 812 B sent, 2.5 ms");
    EXPECT_EQ(summaryOf(model, 1), "restored checkpoint 3f2a9c0d1e2f into sb-2: 14 files in 41 ms");
    EXPECT_EQ(summaryOf(model, 2), "moved from east to west, restored checkpoint 3f2a9c0d1e2f in 55 ms");
    EXPECT_EQ(model.index(0, 0).data(TraceModel::LatencyMsRole).toLongLong(), 3);
    EXPECT_EQ(model.index(1, 0).data(TraceModel::LatencyMsRole).toLongLong(), 41);
    EXPECT_EQ(model.index(2, 0).data(TraceModel::LatencyMsRole).toLongLong(), 55);
}

} // namespace
} // namespace paddock::console
