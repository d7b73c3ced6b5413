#include "app/client/fake_console_client.h"

#include <QFile>
#include <QSaveFile>

#include <algorithm>

namespace paddock::console {

FakeConsoleClient::FakeConsoleClient(QObject *parent) : ConsoleClient(parent) {}

void FakeConsoleClient::connectToBroker(const QString &address)
{
    m_address = address.isEmpty() ? QStringLiteral("unix:/fake/broker.sock") : address;
    m_calls << QStringLiteral("connect ") + m_address;
    setConnectionState(m_connectOnRequest ? ConnectionState::Connected : ConnectionState::Connecting,
                       QStringLiteral("connected to ") + m_address);
}

void FakeConsoleClient::disconnectFromBroker()
{
    m_calls << QStringLiteral("disconnect");
    setConnectionState(ConnectionState::Disconnected, QStringLiteral("disconnected"));
}

QList<SessionInfo> FakeConsoleClient::takeSessionChanges()
{
    return std::exchange(m_sessions, {});
}

void FakeConsoleClient::followSession(const QString &id, qint64 fromSeq)
{
    m_calls << QStringLiteral("follow %1 %2").arg(id).arg(fromSeq);
    m_follows.insert(id, fromSeq);
}

void FakeConsoleClient::unfollowSession(const QString &id)
{
    m_calls << QStringLiteral("unfollow ") + id;
    m_follows.remove(id);
    m_events.remove(id);
}

QList<EventRecord> FakeConsoleClient::takeEvents(const QString &id)
{
    auto it = m_events.find(id);
    return it == m_events.end() ? QList<EventRecord>() : std::exchange(*it, {});
}

void FakeConsoleClient::fetchHistory(const QString &id, qint64 fromSeq, int count)
{
    m_calls << QStringLiteral("history %1 %2 %3").arg(id).arg(fromSeq).arg(count);
    if (!m_historyProvider)
        return;   // the test answers with pushHistory()
    m_histories.append({id, m_historyProvider(id, fromSeq, count)});
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::refreshPools()
{
    m_calls << QStringLiteral("pools");
}

void FakeConsoleClient::action(const QString &name, const QString &id)
{
    PendingAction result{name, true, {}, id};
    if (m_failArmed) {
        m_failArmed = false;
        result.ok = false;
        result.message = m_failNext;
    } else {
        result.message = name == QLatin1String("submit") ? QStringLiteral("submitted session ") + id
                                                         : QStringLiteral("%1 %2: done").arg(name, id);
    }
    m_actions.append(result);
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::submitSession(const SubmitRequest &request)
{
    m_lastSubmit = request;
    m_calls << QStringLiteral("submit ") + (request.playbook.isEmpty() ? request.goal : request.playbook);
    action(QStringLiteral("submit"), QStringLiteral("fake-%1").arg(++m_submitted));
}

void FakeConsoleClient::cancelSession(const QString &id)
{
    m_calls << QStringLiteral("cancel ") + id;
    action(QStringLiteral("cancel"), id);
}

void FakeConsoleClient::pauseSession(const QString &id)
{
    m_calls << QStringLiteral("pause ") + id;
    action(QStringLiteral("pause"), id);
}

void FakeConsoleClient::resumeSession(const QString &id)
{
    m_calls << QStringLiteral("resume ") + id;
    action(QStringLiteral("resume"), id);
}

void FakeConsoleClient::pushSessions(const QList<SessionInfo> &sessions)
{
    m_sessions.append(sessions);
    m_sessionsDirty = true;
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushEvents(const QString &sessionId, const QList<EventRecord> &events)
{
    m_events[sessionId].append(events);
    if (!m_eventsDirty.contains(sessionId))
        m_eventsDirty << sessionId;
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushHistory(const QString &sessionId, const QList<EventRecord> &events)
{
    m_histories.append({sessionId, events});
    if (m_autoFlush)
        flush();
}

void FakeConsoleClient::pushPools(const QList<PoolInfo> &pools, bool localExecution)
{
    emit poolsChanged(pools, localExecution);
}

void FakeConsoleClient::pushStorage(const CheckpointStorage &storage, const QString &error)
{
    emit storageChanged(error.isEmpty() ? storage : CheckpointStorage{}, error);
}

void FakeConsoleClient::setConnectionState(ConnectionState state, const QString &detail)
{
    if (state == m_state)
        return;
    m_state = state;
    emit connectionStateChanged(state, detail);
}

void FakeConsoleClient::setHistoryProvider(std::function<QList<EventRecord>(const QString &, qint64, int)> provider)
{
    m_historyProvider = std::move(provider);
}

void FakeConsoleClient::failNextAction(const QString &message)
{
    m_failArmed = true;
    m_failNext = message;
}

void FakeConsoleClient::flush()
{
    if (std::exchange(m_sessionsDirty, false) && !m_sessions.isEmpty())
        emit sessionsChanged();
    const QStringList ids = std::exchange(m_eventsDirty, {});
    for (const QString &id : ids) {
        if (!m_events.value(id).isEmpty())
            emit eventsArrived(id);
    }
    const auto histories = std::exchange(m_histories, {});
    for (const PendingHistory &history : histories)
        emit historyArrived(history.id, history.events);
    const auto actions = std::exchange(m_actions, {});
    for (const PendingAction &a : actions)
        emit actionFinished(a.action, a.ok, a.message, a.sessionId);
    const auto answers = std::exchange(m_answers, {});
    for (const auto &emitAnswer : answers)
        emitAnswer();
}

void FakeConsoleClient::answer(std::function<void()> emitAnswer)
{
    m_answers.append(std::move(emitAnswer));
    if (m_autoFlush)
        flush();
}

bool FakeConsoleClient::takeFailure(QString *message)
{
    if (m_operatorFail.isEmpty())
        return false;
    *message = std::exchange(m_operatorFail, {});
    return true;
}

void FakeConsoleClient::setSnapshot(const QString &pool, const QString &snapshotRef, const QList<SnapshotFile> &files,
                                    const QHash<QString, QByteArray> &contents)
{
    m_snapshotFiles.insert(pool + u'/' + snapshotRef, files);
    for (auto it = contents.begin(); it != contents.end(); ++it)
        m_snapshotContents.insert(pool + u'/' + snapshotRef + u'/' + it.key(), it.value());
}

void FakeConsoleClient::listPostMortems(const QString &sessionId)
{
    m_calls << QStringLiteral("postmortems ") + sessionId;
    QString error;
    QList<PostMortemInfo> list;
    if (!takeFailure(&error)) {
        for (PostMortemInfo pm : std::as_const(m_postMortems)) {
            if (!sessionId.isEmpty() && pm.sessionId != sessionId)
                continue;
            // As the broker lists them: no samples, processes or output.
            pm.samples.clear();
            pm.processes.clear();
            pm.lastStdout.clear();
            pm.lastStderr.clear();
            list.append(pm);
        }
        std::sort(list.begin(), list.end(),
                  [](const PostMortemInfo &a, const PostMortemInfo &b) { return a.timeUnixMs > b.timeUnixMs; });
    }
    answer([this, sessionId, list, error] { emit postMortemsListed(sessionId, list, {}, error); });
}

void FakeConsoleClient::getPostMortem(const QString &pool, const QString &sandboxId)
{
    m_calls << QStringLiteral("postmortem %1 %2").arg(pool, sandboxId);
    QString error;
    PostMortemInfo found;
    found.pool = pool;
    found.sandboxId = sandboxId;
    if (!takeFailure(&error)) {
        error = QStringLiteral("no post-mortem of sandbox %1 on pool %2 (it may have expired)").arg(sandboxId, pool);
        for (const PostMortemInfo &pm : std::as_const(m_postMortems)) {
            if (pm.pool == pool && pm.sandboxId == sandboxId) {
                found = pm;
                error.clear();
                break;
            }
        }
    }
    answer([this, found, error] { emit postMortemArrived(found, error); });
}

void FakeConsoleClient::listSnapshotFiles(const QString &pool, const QString &snapshotRef, const QString &pathPrefix)
{
    m_calls << QStringLiteral("files %1 %2 %3").arg(pool, snapshotRef, pathPrefix).trimmed();
    QString error;
    QList<SnapshotFile> files;
    if (!takeFailure(&error)) {
        const auto it = m_snapshotFiles.constFind(pool + u'/' + snapshotRef);
        if (it == m_snapshotFiles.constEnd())
            error = QStringLiteral("snapshot %1 not found on pool %2").arg(snapshotRef, pool);
        else
            files = *it;
    }
    answer([this, pool, snapshotRef, files, error] { emit snapshotFilesListed(pool, snapshotRef, files, error); });
}

void FakeConsoleClient::readSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path, qint64 maxBytes)
{
    m_calls << QStringLiteral("read %1 %2 %3").arg(pool, snapshotRef, path);
    QString error;
    QByteArray content;
    qint64 size = 0;
    if (!takeFailure(&error)) {
        const auto it = m_snapshotContents.constFind(pool + u'/' + snapshotRef + u'/' + path);
        if (it == m_snapshotContents.constEnd()) {
            error = QStringLiteral("%1 is not in snapshot %2").arg(path, snapshotRef);
        } else {
            size = it->size();
            content = maxBytes > 0 ? it->left(maxBytes) : *it;
        }
    }
    answer([this, pool, snapshotRef, path, content, size, error] {
        emit snapshotFileRead(pool, snapshotRef, path, content, size, error);
    });
}

int FakeConsoleClient::downloadSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                            const QString &localFile)
{
    m_calls << QStringLiteral("download %1 %2 %3").arg(pool, snapshotRef, path);
    const int id = ++m_downloads;
    QString error;
    if (takeFailure(&error)) {
        answer([this, id, error] { emit downloadFinished(id, false, error); });
        return id;
    }
    const auto it = m_snapshotContents.constFind(pool + u'/' + snapshotRef + u'/' + path);
    if (it == m_snapshotContents.constEnd()) {
        answer([this, id, path, snapshotRef] {
            emit downloadFinished(id, false, QStringLiteral("%1 is not in snapshot %2").arg(path, snapshotRef));
        });
        return id;
    }
    const QByteArray content = *it;
    answer([this, id, content, localFile] {
        QSaveFile file(localFile);
        if (!file.open(QIODevice::WriteOnly)) {
            emit downloadFinished(id, false, QStringLiteral("cannot write %1: %2").arg(localFile, file.errorString()));
            return;
        }
        const qint64 total = content.size();
        qint64 done = 0;
        do {
            const qint64 n = qMin<qint64>(m_chunkSize, total - done);
            file.write(content.constData() + done, n);
            done += n;
            emit downloadProgress(id, done, total);
        } while (done < total);
        if (!file.commit()) {
            emit downloadFinished(id, false, QStringLiteral("cannot write %1: %2").arg(localFile, file.errorString()));
            return;
        }
        emit downloadFinished(id, true, QStringLiteral("saved %1 (%2 bytes)").arg(localFile).arg(total));
    });
    return id;
}

void FakeConsoleClient::cancelDownload(int downloadId)
{
    m_calls << QStringLiteral("cancel-download %1").arg(downloadId);
}

void FakeConsoleClient::openDebugShell(const QString &pool, const QString &sandboxId, const QString &tier)
{
    m_calls << QStringLiteral("shell %1 %2 %3").arg(pool, sandboxId, tier).trimmed();
    QString error;
    DebugShellInfo shell;
    if (!takeFailure(&error)) {
        shell.shellId = QStringLiteral("shell-%1").arg(++m_shellsOpened);
        shell.pool = pool;
        shell.postMortemSandboxId = sandboxId;
        shell.sandboxId = QStringLiteral("dbg-%1").arg(m_shellsOpened);
        shell.tier = tier;
        shell.openedBy = QStringLiteral("operator");
        shell.idleTimeoutMs = 600'000;
        for (const PostMortemInfo &pm : std::as_const(m_postMortems)) {
            if (pm.pool == pool && pm.sandboxId == sandboxId) {
                shell.sessionId = pm.sessionId;
                shell.snapshotRef = pm.snapshotRef;
                if (shell.tier.isEmpty())
                    shell.tier = pm.tier;
            }
        }
        m_shells.insert(shell.shellId, shell);
    }
    answer([this, shell, error] { emit debugShellOpened(shell, error); });
}

void FakeConsoleClient::debugExec(const QString &shellId, const QString &commandLine)
{
    m_calls << QStringLiteral("exec %1 %2").arg(shellId, commandLine);
    QString error;
    if (!takeFailure(&error) && !m_shells.contains(shellId))
        error = QStringLiteral("debug shell %1 is closed: open a new one").arg(shellId);
    if (!error.isEmpty()) {
        answer([this, shellId, error] { emit debugExecFinished(shellId, -1, 0, error); });
        return;
    }
    const ExecResult result = m_execHandler ? m_execHandler(commandLine)
                                            : ExecResult{QByteArray("ran: ") + commandLine.toUtf8() + '\n', {}, 0};
    answer([this, shellId, result] {
        emit debugOutput(shellId, result.stdoutData, result.stderrData);
        emit debugExecFinished(shellId, result.exitCode, 0, QString());
    });
}

void FakeConsoleClient::closeDebugShell(const QString &shellId)
{
    m_calls << QStringLiteral("close ") + shellId;
    m_shells.remove(shellId);
    answer([this, shellId] { emit debugShellClosed(shellId, QString()); });
}

void FakeConsoleClient::watchSandboxSamples(const QString &pool, const QString &sandboxId)
{
    m_calls << QStringLiteral("samples %1 %2").arg(pool, sandboxId).trimmed();
}

void FakeConsoleClient::pushSamples(const QString &sandboxId, const QList<ResourcePoint> &samples)
{
    answer([this, sandboxId, samples] { emit sandboxSamplesArrived(sandboxId, samples); });
}

QStringList FakeConsoleClient::followed() const
{
    QStringList ids = m_follows.keys();
    ids.sort();
    return ids;
}

} // namespace paddock::console
