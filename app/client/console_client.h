#pragma once
// The console's only door to the broker. GrpcConsoleClient speaks gRPC on its own threads;
// FakeConsoleClient is driven by tests. Nothing else in the console sees gRPC.
//
// Threads: a ConsoleClient lives on the GUI thread and emits its signals there. Data arrives as
// "notify, then pull": a signal says there is something new, the receiver takes it with take*().
// Implementations coalesce notifications to one per 20-100 ms, so a flood of events costs the GUI
// thread one batch per interval, never one call per event.

#include "models/console_types.h"
#include "models/permissions.h"
#include "models/sandbox_types.h"

#include <QObject>

namespace paddock::console {

class GovernanceClient;

class ConsoleClient : public QObject {
    Q_OBJECT

public:
    using QObject::QObject;
    ~ConsoleClient() override = default;

    // "unix:/path", "/path" or "host:port", or several of them separated by commas (brokers of a
    // team sharing one store): the first that answers is used, and the next when it stops
    // answering. Reconnects with backoff until disconnectFromBroker().
    virtual void connectToBroker(const QString &address) = 0;
    virtual void disconnectFromBroker() = 0;
    // For a host:port broker: the CA (PEM) its certificate must chain to (empty: the system's CAs)
    // and the bearer token sent with every call. The next connectToBroker uses them; a unix socket
    // ignores them (the peer's OS user is the principal there).
    virtual void setCredentials(const QString &tlsCaPem, const QString &token)
    {
        Q_UNUSED(tlsCaPem);
        Q_UNUSED(token);
    }
    // What the connected principal may do (the broker's WhoAmI, asked after every connect);
    // unknown, allowing everything, until the broker answers. permissionsChanged says when it does.
    virtual Permissions permissions() const { return {}; }
    virtual QString address() const = 0;
    // The broker in use: one entry of address() (all of it when it names one broker).
    virtual QString endpoint() const { return address(); }
    virtual ConnectionState connectionState() const = 0;

    // Sessions: while connected, a watch delivers the initial set, then each change.
    virtual QList<SessionInfo> takeSessionChanges() = 0;

    // A session's live tail from fromSeq. Events arrive through eventsArrived(id) and takeEvents(id).
    virtual void followSession(const QString &id, qint64 fromSeq) = 0;
    virtual void unfollowSession(const QString &id) = 0;
    virtual QList<EventRecord> takeEvents(const QString &id) = 0;
    // Older history: up to count events from fromSeq, answered by historyArrived.
    virtual void fetchHistory(const QString &id, qint64 fromSeq, int count) = 0;

    // Asks for the pools (poolsChanged) and the checkpoint store's figures (storageChanged).
    virtual void refreshPools() = 0;

    // Actions; each is answered by actionFinished.
    virtual void submitSession(const SubmitRequest &request) = 0;
    virtual void cancelSession(const QString &id) = 0;
    virtual void pauseSession(const QString &id) = 0;
    virtual void resumeSession(const QString &id) = 0;

    // Operators: post-mortems, their snapshots and debug shells (the sandbox inspector). Each call
    // is answered by its signal below; a failure answers with error set (for people: what went
    // wrong and what to do) and nothing else.
    // Newest first; an empty sessionId lists every session's.
    virtual void listPostMortems(const QString &sessionId) = 0;
    virtual void getPostMortem(const QString &pool, const QString &sandboxId) = 0;
    virtual void listSnapshotFiles(const QString &pool, const QString &snapshotRef, const QString &pathPrefix) = 0;
    // The first maxBytes of a file, for the viewer.
    virtual void readSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path, qint64 maxBytes) = 0;
    // Streams a whole file into localFile (written off the GUI thread, under a temporary name until
    // complete). Returns an id for downloadProgress / downloadFinished / cancelDownload.
    virtual int downloadSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                     const QString &localFile) = 0;
    virtual void cancelDownload(int downloadId) = 0;
    // A fresh sandbox of tier (empty: the failed one's), restored from the post-mortem's snapshot.
    virtual void openDebugShell(const QString &pool, const QString &sandboxId, const QString &tier) = 0;
    // Runs commandLine with /bin/sh -c in the shell; output comes through debugOutput, the end
    // through debugExecFinished. The broker audits every command in the failed session's log.
    virtual void debugExec(const QString &shellId, const QString &commandLine) = 0;
    virtual void closeDebugShell(const QString &shellId) = 0;
    // Live resource samples of a claimed sandbox (the session's sandbox card). One watch at a
    // time; an empty sandboxId stops it.
    virtual void watchSandboxSamples(const QString &pool, const QString &sandboxId) = 0;
    // Whether the broker can stream samples at all (the card says so when it cannot).
    virtual bool canWatchSandboxSamples() const = 0;

    // The governance calls (review queue, decisions, cost) on the same connection; owned by the
    // client. nullptr when this client has none (the views then say so).
    virtual GovernanceClient *governance() { return nullptr; }

signals:
    // detail says, for people, what happened ("connected to unix:/run/...", "broker unreachable: ...").
    void connectionStateChanged(paddock::console::ConnectionState state, const QString &detail);
    void sessionsChanged();
    void permissionsChanged(const paddock::console::Permissions &permissions);
    void eventsArrived(const QString &sessionId);
    void historyArrived(const QString &sessionId, const QList<paddock::console::EventRecord> &events);
    void poolsChanged(const QList<paddock::console::PoolInfo> &pools, bool localExecution);
    // The checkpoint store's figures; on error (for people: what went wrong) storage is empty.
    void storageChanged(const paddock::console::CheckpointStorage &storage, const QString &error);
    // action: "submit", "cancel", "pause", "resume". sessionId is the new session for a submit.
    void actionFinished(const QString &action, bool ok, const QString &message, const QString &sessionId);

    // Answers of the operator calls. poolErrors name pools that did not answer ("pool: error").
    void postMortemsListed(const QString &sessionId, const QList<paddock::console::PostMortemInfo> &postMortems,
                           const QStringList &poolErrors, const QString &error);
    // On error, postMortem carries only the pool and sandbox id asked for.
    void postMortemArrived(const paddock::console::PostMortemInfo &postMortem, const QString &error);
    void snapshotFilesListed(const QString &pool, const QString &snapshotRef,
                             const QList<paddock::console::SnapshotFile> &files, const QString &error);
    // content: at most the maxBytes asked for; size: the whole file's.
    void snapshotFileRead(const QString &pool, const QString &snapshotRef, const QString &path,
                          const QByteArray &content, qint64 size, const QString &error);
    void downloadProgress(int downloadId, qint64 received, qint64 total);
    void downloadFinished(int downloadId, bool ok, const QString &message);
    void debugShellOpened(const paddock::console::DebugShellInfo &shell, const QString &error);
    void debugOutput(const QString &shellId, const QByteArray &stdoutData, const QByteArray &stderrData);
    // exitCode -1 with signal set when killed; error when the command could not run at all.
    void debugExecFinished(const QString &shellId, int exitCode, int signal, const QString &error);
    void debugShellClosed(const QString &shellId, const QString &error);
    void sandboxSamplesArrived(const QString &sandboxId, const QList<paddock::console::ResourcePoint> &samples);
};

} // namespace paddock::console
