// The inspector's models and helpers: the recent-failures list, the snapshot file tree, resource
// series and file previews; each model under QAbstractItemModelTester in fatal mode while fed.

#include "models/file_preview.h"
#include "models/post_mortem_model.h"
#include "models/resource_series.h"
#include "models/snapshot_files_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

PostMortemInfo postMortem(const QString &sandbox, const QString &session, qint64 time, const QString &reason = QStringLiteral("oom_killed"))
{
    PostMortemInfo pm;
    pm.pool = QStringLiteral("local");
    pm.sandboxId = sandbox;
    pm.sessionId = session;
    pm.tier = QStringLiteral("lite");
    pm.reason = reason;
    pm.timeUnixMs = time;
    pm.signal = reason == u"oom_killed" ? 9 : 0;
    pm.exitCode = reason == u"oom_killed" ? -1 : 2;
    pm.argv = {QStringLiteral("/bin/sh"), QStringLiteral("-c"), QStringLiteral("make")};
    pm.snapshotRef = sandbox + QStringLiteral("-1");
    return pm;
}

SnapshotFile file(const QString &path, qint64 size, bool dir = false)
{
    SnapshotFile e;
    e.path = path;
    e.size = size;
    e.isDir = dir;
    e.mtimeUnixMs = 1'700'000'000'000;
    return e;
}

TEST(PostMortemListModelTest, NewestFirstWithLabelsAndLookups)
{
    PostMortemListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setPostMortems({postMortem(QStringLiteral("sb-1"), QStringLiteral("s1"), 1000),
                          postMortem(QStringLiteral("sb-3"), QStringLiteral("s2"), 3000, QStringLiteral("nonzero_exit")),
                          postMortem(QStringLiteral("sb-2"), QStringLiteral("s1"), 2000, QStringLiteral("timeout"))});
    ASSERT_EQ(model.rowCount(), 3);
    EXPECT_EQ(model.postMortemAt(0).sandboxId, QStringLiteral("sb-3"));
    EXPECT_EQ(model.postMortemAt(2).sandboxId, QStringLiteral("sb-1"));
    EXPECT_EQ(model.index(0, PostMortemListModel::Reason).data().toString(), QStringLiteral("Non-zero exit"));
    EXPECT_EQ(model.index(0, PostMortemListModel::Exit).data().toString(), QStringLiteral("exit 2"));
    EXPECT_EQ(model.index(2, PostMortemListModel::Exit).data().toString(), QStringLiteral("signal 9 (SIGKILL)"));
    EXPECT_EQ(model.index(2, PostMortemListModel::Reason).data().toString(), QStringLiteral("Out of memory"));
    EXPECT_EQ(model.index(1, 0).data(PostMortemListModel::SandboxIdRole).toString(), QStringLiteral("sb-2"));
    EXPECT_EQ(model.newestRowOfSession(QStringLiteral("s1")), 1);
    EXPECT_EQ(model.newestRowOfSession(QStringLiteral("nope")), -1);
    EXPECT_EQ(model.rowOf(QStringLiteral("local"), QStringLiteral("sb-1")), 2);
    EXPECT_EQ(model.rowOf(QStringLiteral("other"), QStringLiteral("sb-1")), -1);
    EXPECT_EQ(model.index(0, 0).data(PostMortemListModel::PostMortemRole).value<PostMortemInfo>().reason,
              QStringLiteral("nonzero_exit"));
}

TEST(PostMortemListModelTest, SameListUpdatesInPlaceANewOneResets)
{
    PostMortemListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    const QList<PostMortemInfo> list = {postMortem(QStringLiteral("sb-1"), QStringLiteral("s1"), 1000)};
    model.setPostMortems(list);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setPostMortems(list);
    EXPECT_EQ(reset.count(), 0);
    EXPECT_EQ(changed.count(), 1);
    model.setPostMortems({list.first(), postMortem(QStringLiteral("sb-2"), QStringLiteral("s1"), 2000)});
    EXPECT_EQ(reset.count(), 1);
    EXPECT_EQ(model.rowCount(), 2);
    model.clear();
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(PostMortemListModelTest, EveryReasonThePoolNamesHasALabel)
{
    for (const char *reason : {"oom_killed", "timeout", "nonzero_exit", "crashed", "pool_lost", "disk_full", "seccomp_killed"}) {
        const QString raw = QString::fromLatin1(reason);
        EXPECT_NE(postMortemReasonLabel(raw), raw) << reason;
    }
    EXPECT_EQ(postMortemReasonLabel(QStringLiteral("something_new")), QStringLiteral("something_new"));
    EXPECT_EQ(postMortemReasonLabel({}), QStringLiteral("Unknown"));
}

TEST(SnapshotFilesModelTest, BuildsATreeWithMadeUpParentsDirectoriesFirst)
{
    SnapshotFilesModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setFiles(QStringLiteral("local"), QStringLiteral("ref-1"),
                   {file(QStringLiteral("zeta.txt"), 5), file(QStringLiteral("src"), 0, true),
                    file(QStringLiteral("src/main.c"), 120), file(QStringLiteral("build/out/a.o"), 2048),
                    file(QStringLiteral("./README"), 10)});
    EXPECT_EQ(model.pool(), QStringLiteral("local"));
    EXPECT_EQ(model.snapshotRef(), QStringLiteral("ref-1"));
    EXPECT_EQ(model.fileCount(), 4);
    EXPECT_EQ(model.totalBytes(), 5 + 120 + 2048 + 10);
    ASSERT_EQ(model.rowCount(), 4);   // build/, src/, README, zeta.txt
    EXPECT_EQ(model.index(0, 0).data().toString(), QStringLiteral("build/"));
    EXPECT_EQ(model.index(1, 0).data().toString(), QStringLiteral("src/"));
    EXPECT_EQ(model.index(2, 0).data().toString(), QStringLiteral("README"));
    EXPECT_EQ(model.index(3, 0).data().toString(), QStringLiteral("zeta.txt"));
    const QModelIndex obj = model.indexOfPath(QStringLiteral("build/out/a.o"));
    ASSERT_TRUE(obj.isValid());
    EXPECT_EQ(obj.data(SnapshotFilesModel::PathRole).toString(), QStringLiteral("build/out/a.o"));
    EXPECT_EQ(obj.siblingAtColumn(SnapshotFilesModel::Size).data().toString(), QStringLiteral("2.0 KiB"));
    EXPECT_TRUE(obj.parent().data(SnapshotFilesModel::IsDirRole).toBool());
    EXPECT_EQ(obj.parent().parent(), model.index(0, 0));
    EXPECT_FALSE(model.indexOfPath(QStringLiteral("missing/file")).isValid());
    model.setFiles(QStringLiteral("local"), QStringLiteral("ref-2"), {});
    EXPECT_EQ(model.rowCount(), 0);
    EXPECT_EQ(model.fileCount(), 0);
}

TEST(ResourceSeriesTest, SamplesBecomeMiBAndSecondsAgainstTheLimit)
{
    ResourceSeries series;
    const qint64 mib = 1024 * 1024;
    series.setSamples({{3000, 0.9, 60 * mib, 3, true}, {1000, 0.2, 10 * mib, 1, false}, {2000, 0.5, 40 * mib, 2, false}});
    series.setLimits(64 * mib, 1.0);
    ASSERT_EQ(series.size(), 3);
    EXPECT_EQ(series.keys(), (QVector<double>{0, 1, 2}));
    EXPECT_DOUBLE_EQ(series.memoryMiB().last(), 60.0);
    EXPECT_DOUBLE_EQ(series.peakMemoryMiB(), 60.0);
    EXPECT_DOUBLE_EQ(series.peakCpuCores(), 0.9);
    EXPECT_DOUBLE_EQ(series.memoryLimitMiB(), 64.0);
    EXPECT_FALSE(series.reachedMemoryLimit());   // 60 of 64 is under 95%
    EXPECT_EQ(series.throttledSamples(), 1);
    EXPECT_EQ(series.append({{4000, 1.0, 63 * mib, 3, false}, {3500, 1.0, 1, 1, false}}), 1);   // the older one is a repeat
    EXPECT_TRUE(series.reachedMemoryLimit());
    series.setMaxPoints(2);
    EXPECT_EQ(series.size(), 2);
    EXPECT_EQ(series.keys().first(), 2.0);   // seconds still count from the first sample seen
    EXPECT_TRUE(series.isDirty());
    series.clearDirty();
    EXPECT_FALSE(series.isDirty());
    series.clear();
    EXPECT_TRUE(series.isEmpty());
}

TEST(FilePreviewTest, TextStaysTextBinaryBecomesHex)
{
    const FilePreview text = previewFile(QByteArray("int main() { return 0; }\n"), 25);
    EXPECT_TRUE(text.isText);
    EXPECT_EQ(text.text, QStringLiteral("int main() { return 0; }\n"));
    EXPECT_EQ(text.note, QStringLiteral("text, 25 B"));

    const FilePreview partial = previewFile(QByteArray(1024, 'a'), 1 << 20);
    EXPECT_TRUE(partial.isText);
    EXPECT_TRUE(partial.note.contains(QStringLiteral("first 1.0 KiB of 1.0 MiB"))) << partial.note.toStdString();

    QByteArray elf("\x7f" "ELF\x02\x01\x01\x00\x00\x00", 10);
    elf.append(QByteArray(40, '\0'));
    const FilePreview binary = previewFile(elf, 50);
    EXPECT_FALSE(binary.isText);
    EXPECT_EQ(binary.note, QStringLiteral("binary, 50 bytes"));
    EXPECT_TRUE(binary.text.startsWith(QStringLiteral("00000000  7f 45 4c 46 02 01 01 00  00 00 00 00 00 00 00 00  |.ELF............|")))
        << binary.text.toStdString();
    EXPECT_FALSE(looksLikeText(QByteArray("\xff\xfe\xfd garbage", 11)));
    EXPECT_TRUE(looksLikeText(QStringLiteral("héllo wörld\n").toUtf8()));
    EXPECT_EQ(previewFile({}, 0).note, QStringLiteral("empty file"));
}

} // namespace
} // namespace paddock::console
