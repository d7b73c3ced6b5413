#pragma once
// A ConsoleClient that tests drive: they push sessions, events, history and pools, flip the
// connection state, and read back which calls the console made. No gRPC, no threads.
//
// Threads: GUI thread only, like the real client. Signals are emitted synchronously from the push
// methods (autoFlush, the default), or all at once by flush() to imitate the real client's
// coalescing.

#include "app/client/console_client.h"

#include <QHash>
#include <QStringList>

#include <functional>

namespace paddock::console {

class FakeConsoleClient final : public ConsoleClient {
    Q_OBJECT

public:
    explicit FakeConsoleClient(QObject *parent = nullptr);

    // ConsoleClient
    void connectToBroker(const QString &address) override;
    void disconnectFromBroker() override;
    void setCredentials(const QString &tlsCaPem, const QString &token) override
    {
        m_tlsCaPem = tlsCaPem;
        m_token = token;
    }
    Permissions permissions() const override { return m_permissions; }
    // Test control: what WhoAmI says (emits permissionsChanged), and the credentials last set.
    void setPermissions(const Permissions &permissions)
    {
        m_permissions = permissions;
        emit permissionsChanged(permissions);
    }
    QString tlsCaPem() const { return m_tlsCaPem; }
    QString token() const { return m_token; }
    QString address() const override { return m_address; }
    ConnectionState connectionState() const override { return m_state; }
    QList<SessionInfo> takeSessionChanges() override;
    void followSession(const QString &id, qint64 fromSeq) override;
    void unfollowSession(const QString &id) override;
    QList<EventRecord> takeEvents(const QString &id) override;
    void fetchHistory(const QString &id, qint64 fromSeq, int count) override;
    void refreshPools() override;
    void submitSession(const SubmitRequest &request) override;
    void cancelSession(const QString &id) override;
    void pauseSession(const QString &id) override;
    void resumeSession(const QString &id) override;
    void listPostMortems(const QString &sessionId) override;
    void getPostMortem(const QString &pool, const QString &sandboxId) override;
    void listSnapshotFiles(const QString &pool, const QString &snapshotRef, const QString &pathPrefix) override;
    void readSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path, qint64 maxBytes) override;
    int downloadSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                             const QString &localFile) override;
    void cancelDownload(int downloadId) override;
    void openDebugShell(const QString &pool, const QString &sandboxId, const QString &tier) override;
    void debugExec(const QString &shellId, const QString &commandLine) override;
    void closeDebugShell(const QString &shellId) override;
    void watchSandboxSamples(const QString &pool, const QString &sandboxId) override;
    bool canWatchSandboxSamples() const override { return true; }

    // Driving it.
    void pushSessions(const QList<SessionInfo> &sessions);
    void pushEvents(const QString &sessionId, const QList<EventRecord> &events);
    void pushHistory(const QString &sessionId, const QList<EventRecord> &events);
    void pushPools(const QList<PoolInfo> &pools, bool localExecution);
    // Emits storageChanged (an error instead when error is not empty).
    void pushStorage(const CheckpointStorage &storage, const QString &error = {});
    // Emits connectionStateChanged when the state changes (like the real client).
    void setConnectionState(ConnectionState state, const QString &detail = {});
    // When set, fetchHistory answers by itself (on flush, or at once with autoFlush).
    void setHistoryProvider(std::function<QList<EventRecord>(const QString &id, qint64 fromSeq, int count)> provider);
    // connectToBroker() goes straight to Connected (default) or stays Connecting.
    void setConnectOnRequest(bool connect) { m_connectOnRequest = connect; }
    // The next action answers ok=false with this message (the broker's refusal).
    void failNextAction(const QString &message);
    // The action answers wait for flush() instead of coming at once.
    void setAutoFlush(bool autoFlush) { m_autoFlush = autoFlush; }
    void flush();

    // The operator side: post-mortems (full, with samples and output; lists leave those out),
    // snapshot files and their content, what a debug-shell command prints.
    void setPostMortems(const QList<PostMortemInfo> &postMortems) { m_postMortems = postMortems; }
    void setSnapshot(const QString &pool, const QString &snapshotRef, const QList<SnapshotFile> &files,
                     const QHash<QString, QByteArray> &contents);
    struct ExecResult {
        QByteArray stdoutData;
        QByteArray stderrData;
        int exitCode = 0;
    };
    // Answers debugExec; by default a command prints "ran: COMMAND" and exits 0.
    void setExecHandler(std::function<ExecResult(const QString &commandLine)> handler) { m_execHandler = std::move(handler); }
    // The next operator call (post-mortems, files, shells) fails with this message.
    void failNextOperatorCall(const QString &message) { m_operatorFail = message; }
    void pushSamples(const QString &sandboxId, const QList<ResourcePoint> &samples);
    // Bytes per downloadProgress step.
    void setDownloadChunkSize(int bytes) { m_chunkSize = qMax(1, bytes); }

    // What the console did: "connect ADDR", "disconnect", "follow ID FROM", "unfollow ID",
    // "history ID FROM COUNT", "pools", "submit GOAL-OR-PLAYBOOK", "cancel ID", "pause ID", "resume ID",
    // "postmortems SESSION", "postmortem POOL SANDBOX", "files POOL REF PREFIX", "read POOL REF PATH",
    // "download POOL REF PATH", "shell POOL SANDBOX TIER", "exec SHELL COMMAND", "close SHELL",
    // "samples POOL SANDBOX".
    QStringList calls() const { return m_calls; }
    void clearCalls() { m_calls.clear(); }
    SubmitRequest lastSubmit() const { return m_lastSubmit; }
    QStringList followed() const;
    qint64 followedFrom(const QString &id) const { return m_follows.value(id, -1); }

private:
    void action(const QString &action, const QString &id);
    // Queues an answer (emitted at once with autoFlush, else on flush()).
    void answer(std::function<void()> emitAnswer);
    bool takeFailure(QString *message);

    struct PendingHistory {
        QString id;
        QList<EventRecord> events;
    };
    struct PendingAction {
        QString action;
        bool ok;
        QString message;
        QString sessionId;
    };

    QString m_address;
    QString m_tlsCaPem;
    QString m_token;
    Permissions m_permissions;
    ConnectionState m_state = ConnectionState::Disconnected;
    bool m_connectOnRequest = true;
    bool m_autoFlush = true;
    QList<SessionInfo> m_sessions;
    bool m_sessionsDirty = false;
    QHash<QString, QList<EventRecord>> m_events;
    QStringList m_eventsDirty;
    QList<PendingHistory> m_histories;
    QList<PendingAction> m_actions;
    QHash<QString, qint64> m_follows;
    std::function<QList<EventRecord>(const QString &, qint64, int)> m_historyProvider;
    QString m_failNext;
    bool m_failArmed = false;
    QStringList m_calls;
    SubmitRequest m_lastSubmit;
    int m_submitted = 0;
    QList<PostMortemInfo> m_postMortems;
    QHash<QString, QList<SnapshotFile>> m_snapshotFiles;     // by "pool/ref"
    QHash<QString, QByteArray> m_snapshotContents;            // by "pool/ref/path"
    std::function<ExecResult(const QString &)> m_execHandler;
    QString m_operatorFail;
    QList<std::function<void()>> m_answers;
    QHash<QString, DebugShellInfo> m_shells;
    int m_downloads = 0;
    int m_shellsOpened = 0;
    int m_chunkSize = 64 * 1024;
};

} // namespace paddock::console
