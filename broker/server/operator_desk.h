#pragma once
// The operators' desk: post-mortems, snapshot files and debug shells, forwarded to the pools on
// worker threads (pool calls block). OperationsService checks the caller and records the audit
// entry, then calls into this class (ListPostMortems, GetPostMortem, ListSnapshotFiles,
// ReadSnapshotFile, OpenDebugShell, DebugExec, CloseDebugShell). When a pool does not answer or is
// gone, its post-mortems come from the broker's archive and their workspaces from the checkpoint
// store (operator_desk_post_mortems.cpp).
//
// A debug shell is a fresh sandbox of a chosen tier, on the pool that kept the post-mortem,
// restored from its workspace snapshot; for an archived post-mortem, on any pool offering the
// tier, restored from the checkpoint. Opening it, every command run in it and closing it are
// appended to the failed session's log (debug_shell.opened, debug_shell.exec,
// debug_shell.closed) before the caller is answered; a shell whose open cannot be recorded is not
// opened. A shell unused for idleTimeoutMs is closed and its sandbox released.
//
// Threads: the entry points run on gRPC's callback threads and only hand work to this class's
// workers (pool calls block); a reaper thread closes idle shells. The shell table has its own
// lock. Owned by OperationsService; the destructor closes every shell and joins the threads.
//
// Known limits: who ran a command is "operator" (the broker cannot read the unix peer's uid
// through gRPC); the CLI's own claim of its user is recorded beside it as client_user,
// unverified. Shells live in the broker's memory: a broker restart forgets them (their sandboxes
// stay claimed until the pool is restarted).

#include "broker/checkpoints/checkpointer.h"
#include "broker/checkpoints/post_mortem_archive.h"
#include "broker/secrets/secret_store.h"
#include "broker/placement/pool_set.h"
#include "broker/store/event_store.h"

#include "paddock/v1/operations.grpc.pb.h"

#include <nlohmann/json.hpp>

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace paddock::server {

struct OperatorOptions {
    int64_t debugShellIdleTimeoutMs = 600000;
    int64_t debugExecDefaultTimeoutMs = 60000;
    int workers = 4;
    // Post-mortems served and audit events appended are redacted for every value it holds.
    const secrets::SecretStore *secrets = nullptr;
    // Post-mortems copied off the pools' hosts, and the checkpoints their workspaces are in.
    // nullptr: only what the pools answer.
    checkpoints::PostMortemArchive *archive = nullptr;
    checkpoints::Checkpointer *checkpointer = nullptr;
};

template <typename Msg>
class QueuedWriter;

class OperatorDesk {
public:
    OperatorDesk(store::EventStore &store, const placement::PoolSet &pools, OperatorOptions options);
    ~OperatorDesk();
    OperatorDesk(const OperatorDesk &) = delete;
    OperatorDesk &operator=(const OperatorDesk &) = delete;

    grpc::ServerUnaryReactor *listPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPoolPostMortemsRequest *req,
                                              v1::ListPoolPostMortemsResponse *resp);
    grpc::ServerUnaryReactor *getPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                            v1::PostMortem *resp);
    grpc::ServerUnaryReactor *listSnapshotFiles(grpc::CallbackServerContext *ctx, const v1::ListPoolSnapshotFilesRequest *req,
                                                v1::ListSnapshotFilesResponse *resp);
    grpc::ServerWriteReactor<v1::FileChunk> *readSnapshotFile(grpc::CallbackServerContext *ctx,
                                                              const v1::ReadPoolSnapshotFileRequest *req);
    grpc::ServerUnaryReactor *openDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                             v1::DebugShell *resp);
    grpc::ServerWriteReactor<v1::ExecResponse> *debugExec(grpc::CallbackServerContext *ctx, const v1::DebugExecRequest *req);
    grpc::ServerUnaryReactor *closeDebugShell(grpc::CallbackServerContext *ctx, const v1::CloseDebugShellRequest *req,
                                              v1::CloseDebugShellResponse *resp);

private:
    struct Shell {
        v1::DebugShell info;
        int64_t lastUsedUs = 0;
        int busy = 0;
        bool closing = false;
    };

    // A post-mortem from its pool, or from the archive when the pool does not answer or is gone.
    struct FoundPostMortem {
        pool_client::PostMortemInfo info;
        pool_client::PoolClient *pool = nullptr;   // null: archived (snapshot_ref is a checkpoint)
        bool archived = false;
    };
    Result<FoundPostMortem> findPostMortem(const std::string &pool, const std::string &sandboxId) const;
    // A fresh sandbox of `tier` holding the post-mortem's workspace: on its own pool from the pool's
    // snapshot, or (archived) on any pool offering the tier, from the checkpoint.
    struct ShellSandbox {
        pool_client::PoolClient *pool = nullptr;
        pool_client::ClaimedSandbox claimed;
        int64_t restoredFiles = 0;
    };
    Result<ShellSandbox> restoredSandbox(const FoundPostMortem &found, const std::string &tier, const std::string &shellId);
    // Streams a file read through `read` (offset, max bytes) as FileChunks.
    static grpc::Status streamFile(QueuedWriter<v1::FileChunk> &writer,
                                   const std::function<Result<SnapshotChunk>(int64_t, int64_t)> &read, int64_t offset,
                                   int64_t maxBytes);
    Result<pool_client::PoolClient *> pool(const std::string &name) const;
    grpc::ServerUnaryReactor *runUnary(grpc::CallbackServerContext *ctx, std::function<grpc::Status()> work);
    void post(std::function<void()> job);
    void workerLoop();
    void reaperLoop();
    // Appends one audit event to the session's log; the error when it cannot.
    Status audit(const std::string &sessionId, const std::string &kind, const nlohmann::json &payload);
    // Releases the shell's sandbox and records debug_shell.closed.
    Status closeShell(const Shell &shell, const std::string &reason, const std::string &by);

    store::EventStore &m_store;
    const placement::PoolSet &m_pools;
    const OperatorOptions m_options;

    mutable std::mutex m_mutex;
    std::condition_variable m_cv;               // workers: a job or stopping
    std::condition_variable m_reaperWake;       // the reaper: stopping
    std::deque<std::function<void()>> m_jobs;   // guarded by m_mutex
    std::map<std::string, Shell> m_shells;      // guarded by m_mutex
    bool m_stopping = false;                    // guarded by m_mutex
    std::vector<std::thread> m_threads;
};

} // namespace paddock::server
