#pragma once
// Value types of the sandbox inspector: post-mortems, their resource samples and processes, the
// files of a workspace snapshot, debug shells. Plain data, QtCore only, copied freely between
// threads; the gRPC client (app/client) fills them, models and views read them.

#include <QByteArray>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace paddock::console {

// One resource sample of a sandbox (the pool takes one a second).
struct ResourcePoint {
    qint64 timeUnixMs = 0;
    double cpuCores = 0;
    qint64 memoryBytes = 0;
    qint64 pids = 0;
    bool cpuThrottled = false;
};

struct ProcessEntry {
    int pid = 0;
    int ppid = 0;
    QString state;
    qint64 rssBytes = 0;
    QString command;
};

// What a pool kept about a sandbox or command that ended abnormally. A list entry
// (ListPostMortems) has no samples, processes or output; GetPostMortem fills them.
struct PostMortemInfo {
    QString pool;            // the broker's name for the pool that kept it
    QString sandboxId;
    QString sessionId;
    QString tier;
    QString runtime;
    QString reason;          // oom_killed, timeout, nonzero_exit, seccomp_killed, crashed, pool_lost
    QString detail;          // one line for lists
    int exitCode = 0;
    int signal = 0;
    QStringList argv;
    double durationMs = 0;
    QByteArray lastStdout;   // the last 64 KiB
    QByteArray lastStderr;
    qint64 stdoutBytes = 0;  // produced in all
    qint64 stderrBytes = 0;
    QList<ResourcePoint> samples;
    QList<ProcessEntry> processes;
    QString processesNote;
    QString snapshotRef;     // empty when the snapshot failed (snapshotError says why)
    QString snapshotError;
    qint64 snapshotSizeBytes = 0;
    qint64 timeUnixMs = 0;
    double cpuLimit = 0;     // the tier's limits (0: none)
    qint64 memoryLimitBytes = 0;
    qint64 pidsLimit = 0;
};

// One entry of a workspace snapshot; path is relative to /workspace, "/"-separated. The console's
// twin of paddock::SnapshotFile (common/sandbox_values.h), in Qt's types for the models.
struct SnapshotFile {
    QString path;
    bool isDir = false;
    bool isSymlink = false;
    QString symlinkTarget;
    qint64 size = 0;
    quint32 mode = 0;
    qint64 mtimeUnixMs = 0;
};

// A fresh sandbox restored from a post-mortem's snapshot, for commands typed by an operator.
struct DebugShellInfo {
    QString shellId;
    QString pool;
    QString sandboxId;
    QString tier;
    QString sessionId;
    QString postMortemSandboxId;
    QString snapshotRef;
    QString openedBy;
    qint64 idleTimeoutMs = 0;
};

} // namespace paddock::console

Q_DECLARE_METATYPE(paddock::console::ResourcePoint)
Q_DECLARE_METATYPE(paddock::console::PostMortemInfo)
Q_DECLARE_METATYPE(paddock::console::SnapshotFile)
Q_DECLARE_METATYPE(paddock::console::DebugShellInfo)
