// MainWindow, continued: the sandbox inspector page. The client's operator calls (post-mortems,
// snapshot files and downloads, debug shells, live sandbox samples) come in here and the
// inspector's requests go out; inspectSession() finds the post-mortem a session's failure left.
//
// Threads: GUI thread only, like the rest of MainWindow (see main_window.h).

#include "app/main_window.h"

#include "app/client/console_client.h"
#include "models/command_resources.h"
#include "models/console_format.h"
#include "models/post_mortem_model.h"
#include "models/session_table_model.h"
#include "models/snapshot_files_model.h"
#include "models/trace_model.h"
#include "views/debug_shell_panel.h"
#include "views/resource_curve_plot.h"
#include "views/sandbox_card.h"
#include "views/sandbox_inspector.h"
#include "views/session_view.h"
#include "views/snapshot_browser.h"

#include <QStatusBar>

namespace paddock::console {

void MainWindow::wireInspector()
{
    SnapshotBrowser *browser = m_inspector->snapshotBrowser();
    DebugShellPanel *shell = m_inspector->debugShell();

    connect(m_inspector, &SandboxInspector::refreshRequested, this, [this] { m_client->listPostMortems(QString()); });
    connect(m_inspector, &SandboxInspector::postMortemRequested, this, &MainWindow::inspectPostMortem);
    connect(m_inspector, &SandboxInspector::openSessionRequested, this, &MainWindow::openSession);
    connect(m_inspector, &SandboxInspector::retryRequested, this, &MainWindow::retryOnTier);
    connect(m_client, &ConsoleClient::postMortemsListed, this, &MainWindow::onPostMortemsListed);
    connect(m_client, &ConsoleClient::postMortemArrived, this, &MainWindow::onPostMortemArrived);

    connect(m_client, &ConsoleClient::snapshotFilesListed, this,
            [this, browser](const QString &pool, const QString &ref, const QList<SnapshotFile> &files, const QString &error) {
                const PostMortemInfo current = m_inspector->postMortem();
                if (pool != current.pool || ref != current.snapshotRef)
                    return;   // an answer for a failure no longer shown
                if (!error.isEmpty()) {
                    m_filesModel->clear();
                    browser->setStatusText(error, true);
                    return;
                }
                m_filesModel->setFiles(pool, ref, files);
                browser->setStatusText(tr("Snapshot %1 of /workspace at the failure: %n file(s), %2", nullptr,
                                          m_filesModel->fileCount())
                                           .arg(ref, formatBytes(m_filesModel->totalBytes())));
            });
    connect(browser, &SnapshotBrowser::fileRequested, this, [this](const QString &path) {
        m_client->readSnapshotFile(m_filesModel->pool(), m_filesModel->snapshotRef(), path, SnapshotBrowser::kViewerMaxBytes);
    });
    connect(m_client, &ConsoleClient::snapshotFileRead, this,
            [this, browser](const QString &pool, const QString &ref, const QString &path, const QByteArray &content,
                            qint64 size, const QString &error) {
                if (pool == m_filesModel->pool() && ref == m_filesModel->snapshotRef())
                    browser->showFile(path, content, size, error);
            });
    connect(browser, &SnapshotBrowser::downloadRequested, this, [this, browser](const QString &path, const QString &local) {
        const int id = m_client->downloadSnapshotFile(m_filesModel->pool(), m_filesModel->snapshotRef(), path, local);
        browser->downloadStarted(id, path, local);
    });
    connect(browser, &SnapshotBrowser::cancelDownloadRequested, m_client, &ConsoleClient::cancelDownload);
    connect(m_client, &ConsoleClient::downloadProgress, browser, &SnapshotBrowser::setDownloadProgress);
    connect(m_client, &ConsoleClient::downloadFinished, this, [this, browser](int id, bool ok, const QString &message) {
        browser->downloadFinished(id, ok, message);
        statusBar()->showMessage(message, kStatusMessageMs);
        Q_UNUSED(ok);
    });

    connect(shell, &DebugShellPanel::openRequested, this, [this](const QString &tier) {
        const PostMortemInfo current = m_inspector->postMortem();
        m_client->openDebugShell(current.pool, current.sandboxId, tier);
    });
    connect(m_client, &ConsoleClient::debugShellOpened, shell, &DebugShellPanel::shellOpened);
    connect(shell, &DebugShellPanel::execRequested, m_client, &ConsoleClient::debugExec);
    connect(shell, &DebugShellPanel::closeRequested, m_client, &ConsoleClient::closeDebugShell);
    connect(m_client, &ConsoleClient::debugOutput, this,
            [shell](const QString &shellId, const QByteArray &out, const QByteArray &err) {
                if (shellId == shell->shellId())
                    shell->appendOutput(out, err);
            });
    connect(m_client, &ConsoleClient::debugExecFinished, this,
            [shell](const QString &shellId, int exitCode, int signal, const QString &error) {
                if (shellId == shell->shellId())
                    shell->execFinished(exitCode, signal, error);
            });
    connect(m_client, &ConsoleClient::debugShellClosed, this, [shell](const QString &shellId, const QString &error) {
        if (shellId == shell->shellId())
            shell->shellClosed(error);
    });

    // The session's sandbox card: live samples while it has a claimed sandbox.
    SandboxCard *card = m_sessionView->sandboxCard();
    if (!m_client->canWatchSandboxSamples())
    {
        card->setSamplesUnavailable(tr("no sample stream from this broker"));
        card->samplePlot()->setToolTip(tr("No live samples: this broker has no sample stream yet. The post-mortem of a "
                                          "failed sandbox has its curve (Sandbox inspector)."));
    }
    connect(card, &SandboxCard::sandboxChanged, this, [this, card](const QString &pool, const QString &sandboxId) {
        m_client->watchSandboxSamples(pool, sandboxId);
        for (const TierInfo &tier : std::as_const(m_offeredTiers)) {
            const int row = m_sessionModel->rowOf(m_openSessionId);
            if (row >= 0 && tier.name == m_sessionModel->sessionAt(row).tier)
                card->setLimits(tier.memoryBytes, tier.cpu);
        }
    });
    connect(m_client, &ConsoleClient::sandboxSamplesArrived, card, &SandboxCard::addSamples);
}

void MainWindow::updateInspectorTiers()
{
    QStringList names;
    for (const TierInfo &tier : std::as_const(m_offeredTiers)) {
        if (!names.contains(tier.name))
            names << tier.name;
    }
    m_inspector->setTiers(names);
}

void MainWindow::inspectSession(const QString &id)
{
    if (id.isEmpty())
        return;
    showPage(Page::Inspector);
    // The trace names the post-mortem of a failed command (tool.result's post_mortem): the newest wins.
    if (id == m_openSessionId) {
        for (int row = m_traceModel->rowCount() - 1; row >= 0; --row) {
            const QStringList ref = m_traceModel->index(row, 0).data(TraceModel::PostMortemRefRole).toStringList();
            if (ref.size() == 2 && !ref.at(1).isEmpty()) {
                inspectPostMortem(ref.at(0), ref.at(1));
                return;
            }
        }
    }
    m_pendingInspectSession = id;
    m_requestedPool.clear();
    m_requestedSandbox.clear();
    m_inspector->showPostMortem({});
    m_inspector->showError(tr("Looking for the post-mortems of session %1…").arg(id));
    m_client->listPostMortems(id);
}

void MainWindow::inspectPostMortem(const QString &pool, const QString &sandboxId)
{
    if (currentPage() != Page::Inspector)
        showPage(Page::Inspector);
    m_pendingInspectSession.clear();
    m_requestedPool = pool;
    m_requestedSandbox = sandboxId;
    m_filesModel->clear();
    m_inspector->showLoading(pool, sandboxId);
    m_client->getPostMortem(pool, sandboxId);
}

void MainWindow::onPostMortemsListed(const QString &sessionId, const QList<PostMortemInfo> &list,
                                     const QStringList &poolErrors, const QString &error)
{
    if (sessionId.isEmpty()) {
        if (!error.isEmpty()) {
            m_inspector->setListStatus(error, true);
            return;
        }
        m_failuresModel->setPostMortems(list);
        QString status = list.isEmpty() ? tr("No failures kept: the pools keep a post-mortem of every sandbox or command "
                                             "that ended abnormally, for their retention period.")
                                        : tr("%n failure(s), newest first", nullptr, int(list.size()));
        if (!poolErrors.isEmpty())
            status += u'\n' + tr("Not answering: %1").arg(poolErrors.join(QStringLiteral("; ")));
        m_inspector->setListStatus(status, !poolErrors.isEmpty());
        return;
    }
    if (sessionId != m_pendingInspectSession)
        return;
    m_pendingInspectSession.clear();
    if (!error.isEmpty()) {
        m_inspector->showError(error);
        return;
    }
    if (list.isEmpty()) {
        m_inspector->showError(tr("Session %1 left no post-mortem: none of its sandboxes or commands ended abnormally "
                                  "(or the pools' retention period is over).")
                                   .arg(sessionId));
        return;
    }
    const PostMortemInfo *newest = &list.first();
    for (const PostMortemInfo &pm : list) {
        if (pm.timeUnixMs > newest->timeUnixMs)
            newest = &pm;
    }
    if (m_failuresModel->rowOf(newest->pool, newest->sandboxId) < 0)
        m_client->listPostMortems(QString());   // the list is older than this failure
    inspectPostMortem(newest->pool, newest->sandboxId);
}

void MainWindow::onPostMortemArrived(const PostMortemInfo &postMortem, const QString &error)
{
    if (postMortem.pool != m_requestedPool || postMortem.sandboxId != m_requestedSandbox)
        return;   // an answer to an earlier choice
    if (!error.isEmpty()) {
        m_inspector->showError(error);
        return;
    }
    m_inspector->showPostMortem(postMortem);
    // The command's own peak memory and CPU time are in its tool.result, when its session is open.
    if (postMortem.sessionId == m_openSessionId)
        if (auto command = commandResourcesOf(*m_traceModel, postMortem))
            m_inspector->setCommandResources(*command);
    m_inspector->selectInList(postMortem.pool, postMortem.sandboxId);
    const int row = m_sessionModel->rowOf(postMortem.sessionId);
    m_inspector->setRetrySession(row >= 0 ? m_sessionModel->sessionAt(row) : SessionInfo{}, row >= 0);
    updateInspectorTiers();
    if (!postMortem.snapshotRef.isEmpty())
        m_client->listSnapshotFiles(postMortem.pool, postMortem.snapshotRef, QString());
}

void MainWindow::retryOnTier(const QString &tier)
{
    const PostMortemInfo pm = m_inspector->postMortem();
    const int row = m_sessionModel->rowOf(pm.sessionId);
    if (row < 0 || tier.isEmpty())
        return;
    const SessionInfo &session = m_sessionModel->sessionAt(row);
    SubmitRequest request;
    request.playbook = session.playbook;
    request.goal = session.goal;
    request.model = session.model;
    request.agent = session.agent;
    request.tier = tier;
    request.tags = session.tags;
    request.tags << QStringLiteral("retry-of:") + session.id;
    m_client->submitSession(request);
    statusBar()->showMessage(tr("Retrying session %1 on tier %2…").arg(session.id, tier), kStatusMessageMs);
}

} // namespace paddock::console
