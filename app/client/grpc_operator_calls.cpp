// GrpcConsoleClient's operator calls: post-mortems, snapshot files (read and download), debug
// shells and live sandbox samples (OperationsService). Answers reach the GUI thread through
// Shared::post, in order.

#include "app/client/grpc_console_client.h"
#include "app/client/grpc_console_private.h"

#include <QFile>

namespace paddock::console {

namespace {
constexpr int kSnapshotReadDeadlineMs = 30'000;
constexpr int kDownloadDeadlineMs = 30 * 60'000;
constexpr int kDebugExecDeadlineMs = 10 * 60'000;
const QString kNotConnected = QStringLiteral("not connected to a broker: connect first (File > Connect)");
} // namespace

void GrpcConsoleClient::listPostMortems(const QString &sessionId)
{
    if (!d->stubs) {
        d->shared->post([sessionId](GrpcConsoleClient *c) { emit c->postMortemsListed(sessionId, {}, {}, kNotConnected); });
        return;
    }
    v1::ListPoolPostMortemsRequest request;
    request.set_session_id(ss(sessionId));
    auto shared = d->shared;
    d->unary<v1::ListPoolPostMortemsRequest, v1::ListPoolPostMortemsResponse>(
        &v1::OperationsService::StubInterface::async_interface::ListPostMortems, std::move(request), kUnaryDeadlineMs,
        [shared, sessionId](const grpc::Status &status, const v1::ListPoolPostMortemsResponse &response) {
            QList<PostMortemInfo> list;
            QStringList poolErrors;
            QString error;
            if (status.ok()) {
                for (const auto &pm : response.post_mortems())
                    list.append(toPostMortem(pm));
                for (const auto &e : response.pool_errors())
                    poolErrors << qs(e.pool()) + QStringLiteral(": ") + qs(e.error());
            } else {
                error = QStringLiteral("could not list post-mortems: %1").arg(statusText(status));
            }
            shared->post([sessionId, list, poolErrors, error](GrpcConsoleClient *c) {
                emit c->postMortemsListed(sessionId, list, poolErrors, error);
            });
        });
}

void GrpcConsoleClient::getPostMortem(const QString &pool, const QString &sandboxId)
{
    PostMortemInfo asked;
    asked.pool = pool;
    asked.sandboxId = sandboxId;
    if (!d->stubs) {
        d->shared->post([asked](GrpcConsoleClient *c) { emit c->postMortemArrived(asked, kNotConnected); });
        return;
    }
    v1::GetPoolPostMortemRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    auto shared = d->shared;
    d->unary<v1::GetPoolPostMortemRequest, v1::PostMortem>(
        &v1::OperationsService::StubInterface::async_interface::GetPostMortem, std::move(request), kUnaryDeadlineMs,
        [shared, asked](const grpc::Status &status, const v1::PostMortem &response) {
            PostMortemInfo pm = asked;
            QString error;
            if (status.ok()) {
                pm = toPostMortem(response);
                if (pm.pool.isEmpty())
                    pm.pool = asked.pool;
            } else {
                error = QStringLiteral("could not read the post-mortem of %1 on %2: %3")
                            .arg(asked.sandboxId, asked.pool, statusText(status));
            }
            shared->post([pm, error](GrpcConsoleClient *c) { emit c->postMortemArrived(pm, error); });
        });
}

void GrpcConsoleClient::listSnapshotFiles(const QString &pool, const QString &snapshotRef, const QString &pathPrefix)
{
    if (!d->stubs) {
        d->shared->post([pool, snapshotRef](GrpcConsoleClient *c) {
            emit c->snapshotFilesListed(pool, snapshotRef, {}, kNotConnected);
        });
        return;
    }
    v1::ListPoolSnapshotFilesRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path_prefix(ss(pathPrefix));
    auto shared = d->shared;
    d->unary<v1::ListPoolSnapshotFilesRequest, v1::ListSnapshotFilesResponse>(
        &v1::OperationsService::StubInterface::async_interface::ListSnapshotFiles, std::move(request), kUnaryDeadlineMs,
        [shared, pool, snapshotRef](const grpc::Status &status, const v1::ListSnapshotFilesResponse &response) {
            QList<SnapshotFile> files;
            QString error;
            if (status.ok()) {
                files.reserve(response.files_size());
                for (const auto &f : response.files())
                    files.append(toSnapshotFile(f));
            } else {
                error = QStringLiteral("could not list snapshot %1: %2").arg(snapshotRef, statusText(status));
            }
            shared->post([pool, snapshotRef, files, error](GrpcConsoleClient *c) {
                emit c->snapshotFilesListed(pool, snapshotRef, files, error);
            });
        });
}

void GrpcConsoleClient::readSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                         qint64 maxBytes)
{
    if (!d->stubs) {
        d->shared->post([pool, snapshotRef, path](GrpcConsoleClient *c) {
            emit c->snapshotFileRead(pool, snapshotRef, path, {}, 0, kNotConnected);
        });
        return;
    }
    v1::ReadPoolSnapshotFileRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path(ss(path));
    request.set_max_bytes(std::max<qint64>(0, maxBytes));
    struct Read {
        QByteArray content;
        qint64 size = 0;
    };
    auto read = std::make_shared<Read>();
    auto shared = d->shared;
    auto call = CallbackStream<v1::ReadPoolSnapshotFileRequest, v1::FileChunk>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::ReadSnapshotFile, std::move(request),
        kSnapshotReadDeadlineMs,
        [read, maxBytes](const v1::FileChunk &chunk) {
            read->size = std::max<qint64>(read->size, chunk.size());
            read->content.append(chunk.data().data(), static_cast<qsizetype>(chunk.data().size()));
            return !chunk.eof() && (maxBytes <= 0 || read->content.size() < maxBytes);
        },
        [shared, read, pool, snapshotRef, path, maxBytes](const grpc::Status &status, bool cancelledByUs) {
            QString error;
            if (!status.ok() && !cancelledByUs)
                error = QStringLiteral("could not read %1 from snapshot %2: %3").arg(path, snapshotRef, statusText(status));
            if (maxBytes > 0 && read->content.size() > maxBytes)
                read->content.truncate(maxBytes);
            shared->post([pool, snapshotRef, path, read, error](GrpcConsoleClient *c) {
                emit c->snapshotFileRead(pool, snapshotRef, path, error.isEmpty() ? read->content : QByteArray(),
                                         read->size, error);
            });
        });
    d->track(call->contextRef(call));
}

int GrpcConsoleClient::downloadSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                            const QString &localFile)
{
    const int id = ++d->nextDownload;
    if (!d->stubs) {
        d->shared->post([id](GrpcConsoleClient *c) { emit c->downloadFinished(id, false, kNotConnected); });
        return id;
    }
    v1::ReadPoolSnapshotFileRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path(ss(path));
    // Written on gRPC's thread as the chunks come, under a temporary name renamed at the end, so a
    // broken download never leaves a file that looks whole.
    struct Sink {
        std::string target;
        std::string part;
        std::FILE *file = nullptr;
        qint64 received = 0;
        qint64 total = 0;
        bool eof = false;
        QString error;
        ~Sink()
        {
            if (file)
                std::fclose(file);
        }
    };
    auto sink = std::make_shared<Sink>();
    sink->target = localFile.toStdString();
    sink->part = sink->target + ".part";
    auto shared = d->shared;
    auto call = CallbackStream<v1::ReadPoolSnapshotFileRequest, v1::FileChunk>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::ReadSnapshotFile, std::move(request),
        kDownloadDeadlineMs,
        [sink, shared, id](const v1::FileChunk &chunk) {
            if (!sink->file) {
                sink->file = std::fopen(sink->part.c_str(), "wb");
                if (!sink->file) {
                    sink->error = QStringLiteral("cannot write %1: %2")
                                      .arg(QString::fromStdString(sink->part), QString::fromLocal8Bit(std::strerror(errno)));
                    return false;
                }
            }
            const auto &data = chunk.data();
            if (!data.empty() && std::fwrite(data.data(), 1, data.size(), sink->file) != data.size()) {
                sink->error = QStringLiteral("cannot write %1: %2")
                                  .arg(QString::fromStdString(sink->part), QString::fromLocal8Bit(std::strerror(errno)));
                return false;
            }
            sink->received += static_cast<qint64>(data.size());
            sink->total = std::max<qint64>(chunk.size(), sink->received);
            sink->eof = chunk.eof();
            {
                std::lock_guard lock(shared->mutex);
                shared->downloadProgress.insert(id, {sink->received, sink->total});
                shared->wakeLocked();
            }
            return !chunk.eof();
        },
        [sink, shared, id, path, snapshotRef](const grpc::Status &status, bool cancelledByUs) {
            bool ok = false;
            QString message = sink->error;
            if (sink->file) {
                if (std::fclose(sink->file) != 0 && message.isEmpty())
                    message = QStringLiteral("cannot write %1").arg(QString::fromStdString(sink->part));
                sink->file = nullptr;
            }
            if (message.isEmpty()) {
                if (sink->eof || (status.ok() && sink->received == sink->total)) {
                    if (sink->received == 0) {
                        // An empty file sends no data to write; create it anyway.
                        if (std::FILE *f = std::fopen(sink->part.c_str(), "wb"))
                            std::fclose(f);
                    }
                    if (std::rename(sink->part.c_str(), sink->target.c_str()) == 0) {
                        ok = true;
                        message = QStringLiteral("saved %1 (%2 bytes)").arg(QString::fromStdString(sink->target)).arg(sink->received);
                    } else {
                        message = QStringLiteral("cannot rename the download to %1: %2")
                                      .arg(QString::fromStdString(sink->target), QString::fromLocal8Bit(std::strerror(errno)));
                    }
                } else if (cancelledByUs) {
                    message = QStringLiteral("download of %1 cancelled").arg(path);
                } else {
                    message = QStringLiteral("could not download %1 from snapshot %2: %3")
                                  .arg(path, snapshotRef, status.ok() ? QStringLiteral("the stream ended early") : statusText(status));
                }
            }
            if (!ok)
                std::remove(sink->part.c_str());
            shared->post([id, ok, message](GrpcConsoleClient *c) { emit c->downloadFinished(id, ok, message); });
        });
    auto context = call->contextRef(call);
    d->track(context);
    d->downloads.insert(id, context);
    return id;
}

void GrpcConsoleClient::cancelDownload(int downloadId)
{
    if (auto context = d->downloads.take(downloadId).lock())
        context->TryCancel();
}

void GrpcConsoleClient::openDebugShell(const QString &pool, const QString &sandboxId, const QString &tier)
{
    if (!d->stubs) {
        d->shared->post([](GrpcConsoleClient *c) { emit c->debugShellOpened({}, kNotConnected); });
        return;
    }
    v1::OpenDebugShellRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    request.set_tier(ss(tier));
    auto shared = d->shared;
    // Claiming and restoring can take a cold start: a minute.
    d->unary<v1::OpenDebugShellRequest, v1::DebugShell>(
        &v1::OperationsService::StubInterface::async_interface::OpenDebugShell, std::move(request), 60'000,
        [shared, sandboxId](const grpc::Status &status, const v1::DebugShell &response) {
            DebugShellInfo shell;
            QString error;
            if (status.ok())
                shell = toDebugShell(response);
            else
                error = QStringLiteral("could not open a debug shell on the snapshot of %1: %2").arg(sandboxId, statusText(status));
            shared->post([shell, error](GrpcConsoleClient *c) { emit c->debugShellOpened(shell, error); });
        });
}

void GrpcConsoleClient::debugExec(const QString &shellId, const QString &commandLine)
{
    if (!d->stubs) {
        d->shared->post([shellId](GrpcConsoleClient *c) { emit c->debugExecFinished(shellId, -1, 0, kNotConnected); });
        return;
    }
    v1::DebugExecRequest request;
    request.set_shell_id(ss(shellId));
    request.add_argv("/bin/sh");
    request.add_argv("-c");
    request.add_argv(ss(commandLine));
    struct Exit {
        bool seen = false;
        int code = -1;
        int signal = 0;
        QString reason;
    };
    auto exit = std::make_shared<Exit>();
    auto shared = d->shared;
    auto call = CallbackStream<v1::DebugExecRequest, v1::ExecResponse>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::DebugExec, std::move(request),
        kDebugExecDeadlineMs,
        [shared, shellId, exit](const v1::ExecResponse &response) {
            if (!response.stdout().empty() || !response.stderr().empty()) {
                const QByteArray out = toByteArray(response.stdout());
                const QByteArray err = toByteArray(response.stderr());
                shared->post([shellId, out, err](GrpcConsoleClient *c) { emit c->debugOutput(shellId, out, err); });
            }
            if (response.has_exit()) {
                exit->seen = true;
                exit->code = response.exit().exit_code();
                exit->signal = response.exit().signal();
                exit->reason = qs(response.exit().reason());
            }
            return true;
        },
        [shared, shellId, exit](const grpc::Status &status, bool) {
            QString error;
            if (!status.ok())
                error = QStringLiteral("the command did not run: %1").arg(statusText(status));
            else if (!exit->seen)
                error = QStringLiteral("the command's end was not reported");
            else if (!exit->reason.isEmpty())
                error = exit->reason;   // timeout, oom_killed: said next to the exit
            const int code = exit->code;
            const int signal = exit->signal;
            shared->post([shellId, code, signal, error](GrpcConsoleClient *c) {
                emit c->debugExecFinished(shellId, code, signal, error);
            });
        });
    d->track(call->contextRef(call));
}

void GrpcConsoleClient::closeDebugShell(const QString &shellId)
{
    if (!d->stubs) {
        d->shared->post([shellId](GrpcConsoleClient *c) { emit c->debugShellClosed(shellId, kNotConnected); });
        return;
    }
    v1::CloseDebugShellRequest request;
    request.set_shell_id(ss(shellId));
    auto shared = d->shared;
    d->unary<v1::CloseDebugShellRequest, v1::CloseDebugShellResponse>(
        &v1::OperationsService::StubInterface::async_interface::CloseDebugShell, std::move(request), kUnaryDeadlineMs,
        [shared, shellId](const grpc::Status &status, const v1::CloseDebugShellResponse &) {
            const QString error = status.ok() ? QString()
                                              : QStringLiteral("could not close debug shell %1: %2").arg(shellId, statusText(status));
            shared->post([shellId, error](GrpcConsoleClient *c) { emit c->debugShellClosed(shellId, error); });
        });
}

void GrpcConsoleClient::watchSandboxSamples(const QString &pool, const QString &sandboxId)
{
    if (d->samplesCall) {
        d->samplesCall->cancel();
        d->samplesCall.reset();
    }
    if (sandboxId.isEmpty() || !d->stubs)
        return;
    v1::WatchSandboxSamplesRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    auto shared = d->shared;
    d->samplesCall = CallbackStream<v1::WatchSandboxSamplesRequest, v1::SandboxSamples>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::WatchSandboxSamples, std::move(request),
        kSampleWatchDeadlineMs,
        [shared, sandboxId](const v1::SandboxSamples &batch) {
            QList<ResourcePoint> points;
            points.reserve(batch.samples_size());
            for (const auto &s : batch.samples())
                points.append(ResourcePoint{s.time_unix_ms(), s.cpu_cores(), s.memory_bytes(), s.pids(), s.cpu_throttled()});
            shared->post([sandboxId, points](GrpcConsoleClient *c) { emit c->sandboxSamplesArrived(sandboxId, points); });
            return true;
        },
        [pool, sandboxId](const grpc::Status &status, bool cancelledByUs) {
            // OK: the sandbox was released; the card keeps the curve it has.
            if (!status.ok() && !cancelledByUs)
                qCInfo(lcClient).noquote() << "live samples of" << pool << sandboxId << "ended:" << statusText(status);
        });
}

bool GrpcConsoleClient::canWatchSandboxSamples() const
{
    return true;
}

} // namespace paddock::console
