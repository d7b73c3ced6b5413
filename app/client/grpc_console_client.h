#pragma once
// The real ConsoleClient: gRPC's callback API on gRPC's own threads, one reactor per call, data
// handed to the GUI thread as "notify, then pull".
//
// Threads: the object lives on the GUI thread; every public method must be called there and every
// signal is emitted there. Reactors run on gRPC's threads and only convert messages to the console's
// value types and append them to lock-protected queues; one coalescing timer on the GUI thread
// (notifyInterval, default 50 ms) turns whatever arrived into at most one sessionsChanged and one
// eventsArrived per followed session per interval. Nothing here ever blocks the GUI thread except
// the destructor, which cancels every call and waits (bounded) for gRPC to finish them.
//
// Connection: connectToBroker(QString()) dials paddock::defaultBrokerSocketPath(). The session
// watch is the connection's heartbeat: its first message means Connected; its failure, or no first
// message within kWatchOpenTimeoutMs, means the broker is gone, reported once as Broken, then
// retried with exponential backoff (100 ms doubling to 5 s) on a fresh channel. An address that
// lists several brokers (a,b,c: a team's brokers sharing one store) moves to the next one at once
// instead, and backs off only after each has failed in turn. After a reconnect, to the same broker
// or another, the watch starts again (only the rows whose last seq moved on since are handed over)
// and every followed session resumes from the seq after the last one received, so the trace sees
// no gap and no repeat.
//
// Submits carry a request_id (SubmitRequest::requestId, else a fresh UUID): one that gets no
// answer (UNAVAILABLE, a deadline) is sent again with the same id, at once when still connected,
// else once a broker of the list answers, up to kSubmitAttempts times; the broker makes one session
// of it however often it arrives.
//
// Operator calls (post-mortems, snapshot files, debug shells) answer through the same coalesced
// tick. A download writes its chunks on gRPC's thread into FILE.part and renames it when the last
// chunk is in; progress is reported at most once per tick.
//
// Live sandbox samples: one WatchSandboxSamples stream at a time; its batches arrive as
// sandboxSamplesArrived. The stream ends (OK) when the sandbox is released.
//
// Credentials: a unix socket is plaintext (the broker knows the peer's OS user); a host:port broker
// is always TLS (setCredentials' CA, else the system's) with the bearer token on every call. After
// every connect WhoAmI says who the broker thinks we are (permissions()).
//
// Known limits: a sample watch is not restarted after a reconnect (watch again to resume);
// a follow refused by the broker (unknown session, seq out of range) is only logged.

#include "app/client/console_client.h"

#include <memory>

namespace paddock::console {

class GrpcConsoleClient final : public ConsoleClient {
    Q_OBJECT

public:
    explicit GrpcConsoleClient(QObject *parent = nullptr);
    ~GrpcConsoleClient() override;

    // "unix:" + paddock::defaultBrokerSocketPath().
    static QString defaultAddress();

    void connectToBroker(const QString &address) override;
    void disconnectFromBroker() override;
    void setCredentials(const QString &tlsCaPem, const QString &token) override;
    Permissions permissions() const override;
    QString address() const override;
    QString endpoint() const override;
    // The brokers an address names: its comma-separated entries, trimmed, empty ones dropped.
    static QStringList splitAddress(const QString &address);
    ConnectionState connectionState() const override;

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
    bool canWatchSandboxSamples() const override;
    GovernanceClient *governance() override;

    // Tuning, mostly for tests: the reconnect backoff and the coalescing interval.
    void setReconnectBackoff(int initialMs, int maxMs);
    void setNotifyInterval(int ms);

private:
    // Posted by the reactors (once per interval) to start the coalescing timer.
    Q_INVOKABLE void onWake();

    class Private;
    std::unique_ptr<Private> d;
};

} // namespace paddock::console
