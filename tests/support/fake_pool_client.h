#pragma once
// The one fake of the broker's pool client (pool_client::PoolClient) every test shares, after Ray's
// Fake*Client: the test says what the pool answers (its name, its tiers and their counts, whether
// it answers at all, exec outcomes, samples, post-mortems, snapshot files) and reads back what the
// code under test asked of it (claims, execs with their whole ExecSpec, releases, snapshots,
// restores). A test that needs a behaviour of its own sets a hook on this fake instead of writing
// another PoolClient.
//
// Threads: any. Every member function takes m_mutex, so a test may configure and read the fake
// while the broker's threads call it; the readers return copies. Hooks run outside the lock on the
// calling thread, possibly several at once: keep their own state thread-safe. A held exec
// (holdExecs) blocks its caller until letExecsGo() or cancelInFlight(); a held execAsync returns
// at once and is answered then, on the thread that lets it go or cancels it.
//
// Known limits: writeFile and listDir only answer (nothing is stored); readFile answers "" unless
// a hook says otherwise; a sandbox is not checked against the claims before an exec.

#include "broker/pool_client/pool_client.h"
#include "checkpoint/manifest.h"
#include "checkpoint/sha256.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace paddock::test {

class FakePoolClient final : public pool_client::PoolClient {
public:
    // What claim() was asked, and the sandbox it handed out.
    struct Claim {
        std::string tier;
        std::string sessionId;
        std::string idempotencyKey;
        std::string sandboxId;
    };

    using ExecHook = std::function<Result<pool_client::ExecOutcome>(const pool_client::ExecSpec &spec,
                                                                    const pool_client::OutputSink &sink)>;
    using ReadFileHook = std::function<Result<std::string>(const std::string &sandboxId, const std::string &path)>;
    using SamplesHook = std::function<Result<std::vector<pool_client::ResourcePoint>>(const std::string &sandboxId,
                                                                                       int64_t afterUnixMs)>;

    explicit FakePoolClient(std::string name) : m_name(std::move(name))
    {
        m_execOutcome.stdoutData = "ran on " + m_name + "\n";
    }

    // ---- What the pool answers ----

    std::string name() const override { return m_name; }
    std::string endpoint() const override { return m_name + ":7701"; }

    // Sandbox ids are "<name>-sb-<n>", n counting this pool's claims from 1.
    Result<pool_client::ClaimedSandbox> claim(const std::string &tier, const std::string &sessionId,
                                              const std::string &idempotencyKey) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        if (m_claimError)
            return std::unexpected(*m_claimError);
        const std::string sandboxId = m_name + "-sb-" + std::to_string(m_claims.size() + 1);
        m_claims.push_back({tier, sessionId, idempotencyKey, sandboxId});
        return pool_client::ClaimedSandbox{sandboxId, tier, "fake", m_name, true, 0.1};
    }

    // Recorded first (waitForExecs sees it), then held while holdExecs is on, then the exec error,
    // the hook or the canned outcome, in that order.
    Result<pool_client::ExecOutcome> exec(const pool_client::ExecSpec &spec, const pool_client::OutputSink &sink) override
    {
        {
            std::unique_lock lock(m_mutex);
            if (m_down)
                return unreachable();
            record(spec);
            const int64_t generation = m_cancelGeneration;
            m_changed.wait(lock, [&] { return !m_holdExecs || m_cancelGeneration != generation; });
            if (m_cancelGeneration != generation)
                return fail(ErrorCode::Cancelled, "cancelled");
        }
        return answer(spec, sink);
    }

    // Like gRPC's callback API: a held exec returns at once and is answered later, on the thread
    // that lets it go (letExecsGo) or cancels it (cancelInFlight); any other is answered before
    // execAsync returns.
    void execAsync(const pool_client::ExecSpec &spec, pool_client::OutputSink sink, pool_client::ExecDone done) override
    {
        {
            std::lock_guard lock(m_mutex);
            if (m_holdExecs && !m_down) {
                record(spec);
                m_parked.push_back({spec, std::move(sink), std::move(done)});
                return;
            }
        }
        done(exec(spec, sink));
    }

    Result<std::string> readFile(const std::string &sandboxId, const std::string &path, int64_t) override
    {
        ReadFileHook hook;
        {
            std::lock_guard lock(m_mutex);
            if (m_down)
                return unreachable();
            hook = m_readFileHook;
        }
        if (hook)
            return hook(sandboxId, path);
        return std::string();
    }

    Status writeFile(const std::string &, const std::string &, const std::string &, uint32_t) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        return {};
    }

    Result<std::vector<pool_client::DirEntry>> listDir(const std::string &, const std::string &) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        return std::vector<pool_client::DirEntry>{};
    }

    Status release(const std::string &sandboxId) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        m_releases.push_back(sandboxId);
        return {};
    }

    // Counted even when the pool is down (placement asks a pool that does not answer, too).
    Result<pool_client::PoolStatus> status() override
    {
        std::lock_guard lock(m_mutex);
        ++m_statusCalls;
        if (m_down)
            return unreachable();
        pool_client::PoolStatus out;
        out.poolId = m_name;
        out.tiers = m_tiers;
        return out;
    }

    // Snapshots only once setSnapshots(true) (a pool without them answers Unimplemented, like an
    // old pool agent): a ref per snapshot, and each restore remembered as "sandbox <- ref".
    Result<pool_client::SnapshotInfo> snapshot(const std::string &sandboxId) override
    {
        std::lock_guard lock(m_mutex);
        if (!m_snapshots)
            return PoolClient::snapshot(sandboxId);
        if (m_down)
            return unreachable();
        m_snapshotsTaken.push_back(sandboxId);
        const std::string ref = "snap-" + std::to_string(m_snapshotsTaken.size()) + "-" + sandboxId;
        return pool_client::SnapshotInfo{ref, 100, 1, 0.1};
    }

    Result<pool_client::SnapshotInfo> restore(const std::string &sandboxId, const std::string &ref) override
    {
        std::lock_guard lock(m_mutex);
        if (!m_snapshots)
            return PoolClient::restore(sandboxId, ref);
        if (m_down)
            return unreachable();
        m_restores.push_back(sandboxId + " <- " + ref);
        if (auto failing = m_restoreErrors.find(ref); failing != m_restoreErrors.end())
            return std::unexpected(failing->second);
        return pool_client::SnapshotInfo{ref, 100, 1, 0.1};
    }

    // Checkpoints, once setSnapshots(true): every checkpoint finds one new file in the sandbox's
    // workspace ("step-<n>.txt", n counting this pool's checkpoints), so none is unchanged; the
    // delta is against the asked base when the sandbox holds it (committed or restored), else a
    // full listing. Each restore is remembered as "sandbox <- manifest id", like a snapshot's.
    Result<pool_client::TakenCheckpoint> takeCheckpoint(const std::string &sandboxId, const std::string &base) override
    {
        std::lock_guard lock(m_mutex);
        if (!m_snapshots)
            return PoolClient::takeCheckpoint(sandboxId, base);
        if (m_down)
            return unreachable();
        m_snapshotsTaken.push_back(sandboxId);
        Workspace &workspace = m_workspaces[sandboxId];
        const std::string content = sandboxId + " " + std::to_string(m_snapshotsTaken.size()) + "\n";
        const std::string hash = checkpoint::sha256Hex(content);
        checkpoint::Manifest next = workspace.files;
        next.entries.push_back({"step-" + std::to_string(m_snapshotsTaken.size()) + ".txt", checkpoint::EntryType::File,
                                0644, 0, 0, static_cast<int64_t>(content.size()), 0, "", {hash}});
        (void)next.normalise();
        const bool holdsBase = !base.empty() && base == workspace.base;
        checkpoint::Delta delta = checkpoint::diff(holdsBase ? workspace.files : checkpoint::Manifest{}, next);
        delta.base = holdsBase ? base : "";
        pool_client::TakenCheckpoint taken;
        taken.token = "t" + std::to_string(m_snapshotsTaken.size());
        taken.base = delta.base;
        taken.delta = delta.toJson();
        m_chunks[hash] = content;
        for (const auto &e : delta.changed)
            for (const auto &chunk : e.chunks)
                taken.chunks.push_back({chunk, m_chunks[chunk]});
        workspace.pending = std::move(next);
        return taken;
    }

    // Like execAsync: while holdCheckpoints() is on, a TakeCheckpoint returns at once and is
    // answered later, on the thread that lets it go (letCheckpointsGo) or cancels it.
    void takeCheckpointAsync(const std::string &sandboxId, const std::string &base,
                             pool_client::Done<pool_client::TakenCheckpoint> done) override
    {
        {
            std::lock_guard lock(m_mutex);
            if (m_holdCheckpoints && !m_down) {
                m_parkedCheckpoints.push_back([this, sandboxId, base, done](bool cancelled) {
                    done(cancelled ? Result<pool_client::TakenCheckpoint>(fail(ErrorCode::Cancelled, "cancelled"))
                                   : takeCheckpoint(sandboxId, base));
                });
                m_changed.notify_all();
                return;
            }
        }
        done(takeCheckpoint(sandboxId, base));
    }

    Status commitCheckpoint(const std::string &sandboxId, const std::string & /*token*/, const std::string &manifestId) override
    {
        std::lock_guard lock(m_mutex);
        Workspace &workspace = m_workspaces[sandboxId];
        workspace.files = workspace.pending;
        workspace.base = manifestId;
        return {};
    }

    Result<pool_client::RestoreStart> beginRestore(const std::string &sandboxId, const std::string &manifestId,
                                                   const std::string &manifestJson) override
    {
        std::lock_guard lock(m_mutex);
        if (!m_snapshots)
            return PoolClient::beginRestore(sandboxId, manifestId, manifestJson);
        if (m_down)
            return unreachable();
        m_restores.push_back(sandboxId + " <- " + manifestId);
        if (auto failing = m_restoreErrors.find(manifestId); failing != m_restoreErrors.end())
            return std::unexpected(failing->second);
        auto manifest = checkpoint::Manifest::parse(manifestJson);
        if (!manifest)
            return std::unexpected(manifest.error());
        m_workspaces[sandboxId].pending = *manifest;
        m_workspaces[sandboxId].base = manifestId;
        return pool_client::RestoreStart{"r-" + sandboxId, manifest->chunkHashes()};
    }

    Status putRestoreChunks(const std::string & /*sandboxId*/, const std::string & /*token*/,
                            const std::vector<pool_client::ContentChunk> &chunks) override
    {
        std::lock_guard lock(m_mutex);
        for (const auto &chunk : chunks)
            m_chunks[chunk.hash] = chunk.data;
        return {};
    }

    Result<pool_client::RestoredWorkspace> finishRestore(const std::string &sandboxId, const std::string & /*token*/) override
    {
        std::lock_guard lock(m_mutex);
        Workspace &workspace = m_workspaces[sandboxId];
        workspace.files = workspace.pending;
        return pool_client::RestoredWorkspace{static_cast<int64_t>(workspace.files.entries.size()),
                                              workspace.files.fileBytes(), 0.1};
    }

    // The files of a sandbox's workspace as the fake's checkpoints and restores left it.
    std::vector<std::string> workspaceFiles(const std::string &sandboxId) const
    {
        std::lock_guard lock(m_mutex);
        std::vector<std::string> out;
        if (auto it = m_workspaces.find(sandboxId); it != m_workspaces.end())
            for (const auto &e : it->second.files.entries)
                out.push_back(e.path);
        return out;
    }

    // Newest first, at most `limit` when it is above 0.
    Result<std::vector<pool_client::PostMortemInfo>> listPostMortems(const std::string &sessionId, int limit) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        std::vector<pool_client::PostMortemInfo> out;
        for (const auto &[sandboxId, postMortem] : m_postMortems)
            if (sessionId.empty() || postMortem.sessionId == sessionId)
                out.push_back(postMortem);
        std::stable_sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.timeUnixMs > b.timeUnixMs; });
        if (limit > 0 && out.size() > static_cast<size_t>(limit))
            out.resize(static_cast<size_t>(limit));
        return out;
    }

    Result<pool_client::PostMortemInfo> getPostMortem(const std::string &sandboxId) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        auto it = m_postMortems.find(sandboxId);
        if (it == m_postMortems.end())
            return fail(ErrorCode::NotFound, "no post-mortem of sandbox '" + sandboxId + "'");
        return it->second;
    }

    // NotFound once the sandbox is released; then the hook, or the samples the test added.
    Result<std::vector<pool_client::ResourcePoint>> samples(const std::string &sandboxId, int64_t afterUnixMs) override
    {
        SamplesHook hook;
        std::vector<pool_client::ResourcePoint> added;
        {
            std::lock_guard lock(m_mutex);
            if (m_down)
                return unreachable();
            const bool released = std::ranges::find(m_releases, sandboxId) != m_releases.end();
            auto it = m_samples.find(sandboxId);
            if (released || (!m_samplesHook && it == m_samples.end()))
                return fail(ErrorCode::NotFound, "no sandbox '" + sandboxId + "' on this pool");
            hook = m_samplesHook;
            if (it != m_samples.end())
                added = it->second;
        }
        if (hook)
            return hook(sandboxId, afterUnixMs);
        std::vector<pool_client::ResourcePoint> out;
        for (const auto &point : added)
            if (point.timeUnixMs > afterUnixMs)
                out.push_back(point);
        return out;
    }

    Result<std::vector<pool_client::SnapshotFile>> listSnapshotFiles(const std::string &ref,
                                                                     const std::string &pathPrefix) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        auto stored = m_snapshotFiles.find(ref);
        if (stored == m_snapshotFiles.end())
            return fail(ErrorCode::NotFound, "no snapshot '" + ref + "' on this pool");
        std::vector<pool_client::SnapshotFile> out;
        for (const auto &[path, file] : stored->second)
            if (path.starts_with(pathPrefix))
                out.push_back(file.info);
        return out;
    }

    Result<pool_client::SnapshotChunk> readSnapshotFile(const std::string &ref, const std::string &path, int64_t offset,
                                                        int64_t maxBytes) override
    {
        std::lock_guard lock(m_mutex);
        if (m_down)
            return unreachable();
        const StoredFile *file = nullptr;
        if (auto stored = m_snapshotFiles.find(ref); stored != m_snapshotFiles.end())
            if (auto it = stored->second.find(path); it != stored->second.end())
                file = &it->second;
        if (!file)
            return fail(ErrorCode::NotFound, "no file '" + path + "' in snapshot '" + ref + "'");
        const std::string &content = file->content;
        const size_t from = std::min(static_cast<size_t>(std::max<int64_t>(offset, 0)), content.size());
        pool_client::SnapshotChunk chunk;
        chunk.content = content.substr(from, maxBytes > 0 ? static_cast<size_t>(maxBytes) : std::string::npos);
        chunk.offset = static_cast<int64_t>(from);
        chunk.size = static_cast<int64_t>(content.size());
        chunk.eof = from + chunk.content.size() >= content.size();
        return chunk;
    }

    // Ends the execs and checkpoints held right now with Cancelled; later ones run as usual.
    void cancelInFlight() override
    {
        std::vector<Parked> parked;
        std::vector<std::function<void(bool)>> checkpoints;
        {
            std::lock_guard lock(m_mutex);
            ++m_cancelGeneration;
            m_changed.notify_all();
            parked.swap(m_parked);
            checkpoints.swap(m_parkedCheckpoints);
        }
        for (auto &p : parked)
            p.done(fail(ErrorCode::Cancelled, "cancelled"));
        for (auto &answer : checkpoints)
            answer(true);
    }

    // ---- What the test sets ----

    // Down: every call answers Unavailable ("pool '<name>' is unreachable (test)").
    void setDown(bool down)
    {
        std::lock_guard lock(m_mutex);
        m_down = down;
    }
    // > 0: the pool goes down right after answering that many execs.
    void setDownAfterExecs(int execs)
    {
        std::lock_guard lock(m_mutex);
        m_downAfterExecs = execs;
    }

    // Adds the tier (runtime "fake") or sets the counts of the one of that name.
    void setTier(const std::string &tier, int warm, int claimed, int max)
    {
        editTier(tier, [&](pool_client::TierStatus &status) {
            status.warm = warm;
            status.claimed = claimed;
            status.max = max;
        });
    }
    // Adds the tier or replaces the one of its name, every field as given.
    void setTier(const pool_client::TierStatus &tier)
    {
        editTier(tier.name, [&](pool_client::TierStatus &status) { status = tier; });
    }
    // Changes any field of a tier (adding it first, empty, when there is none of that name).
    void editTier(const std::string &tier, const std::function<void(pool_client::TierStatus &)> &edit)
    {
        std::lock_guard lock(m_mutex);
        auto it = std::ranges::find(m_tiers, tier, &pool_client::TierStatus::name);
        if (it == m_tiers.end())
            it = m_tiers.insert(m_tiers.end(), pool_client::TierStatus{tier, "fake", 0, 0, 0, 1.0, 0});
        edit(*it);
    }

    // What every exec answers when no hook is set; at first "ran on <name>\n" on stdout.
    void setExecOutcome(const pool_client::ExecOutcome &outcome)
    {
        std::lock_guard lock(m_mutex);
        m_execOutcome = outcome;
    }
    void editExecOutcome(const std::function<void(pool_client::ExecOutcome &)> &edit)
    {
        std::lock_guard lock(m_mutex);
        edit(m_execOutcome);
    }
    pool_client::ExecOutcome execOutcome() const
    {
        std::lock_guard lock(m_mutex);
        return m_execOutcome;
    }
    // Answers every exec in place of the canned outcome (after the hold and the exec error).
    void setExecHook(ExecHook hook)
    {
        std::lock_guard lock(m_mutex);
        m_execHook = std::move(hook);
    }
    // Every claim fails with this error (Status still answers) until it is reset with std::nullopt.
    void setClaimError(std::optional<Error> error)
    {
        std::lock_guard lock(m_mutex);
        m_claimError = std::move(error);
    }

    // Every exec fails with this error until it is reset with std::nullopt.
    void setExecError(std::optional<Error> error)
    {
        std::lock_guard lock(m_mutex);
        m_execError = std::move(error);
    }

    // Execs wait after being recorded until letExecsGo() (or cancelInFlight()).
    void holdExecs()
    {
        std::lock_guard lock(m_mutex);
        m_holdExecs = true;
    }
    void letExecsGo()
    {
        std::vector<Parked> parked;
        {
            std::lock_guard lock(m_mutex);
            m_holdExecs = false;
            m_changed.notify_all();
            parked.swap(m_parked);
        }
        for (auto &p : parked)
            p.done(answer(p.spec, p.sink));
    }
    // Execs held by execAsync (no thread waits on them), not yet let go or cancelled.
    int parkedExecs() const
    {
        std::lock_guard lock(m_mutex);
        return static_cast<int>(m_parked.size());
    }
    // Until at least n execs were recorded (held ones included), or the limit passed: false then.
    bool waitForExecs(int n, std::chrono::milliseconds limit = std::chrono::minutes(2))
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, limit, [&] { return static_cast<int>(m_execs.size()) >= n; });
    }

    // Checkpoints taken with takeCheckpointAsync wait, holding no thread, until letCheckpointsGo().
    void holdCheckpoints()
    {
        std::lock_guard lock(m_mutex);
        m_holdCheckpoints = true;
    }
    void letCheckpointsGo()
    {
        std::vector<std::function<void(bool)>> parked;
        {
            std::lock_guard lock(m_mutex);
            m_holdCheckpoints = false;
            parked.swap(m_parkedCheckpoints);
        }
        for (auto &answer : parked)
            answer(false);
    }
    // Until at least n checkpoints are held at once, or the limit passed: false then.
    bool waitForParkedCheckpoints(int n, std::chrono::milliseconds limit = std::chrono::minutes(2))
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, limit, [&] { return static_cast<int>(m_parkedCheckpoints.size()) >= n; });
    }
    int parkedCheckpoints() const
    {
        std::lock_guard lock(m_mutex);
        return static_cast<int>(m_parkedCheckpoints.size());
    }

    void setReadFileHook(ReadFileHook hook)
    {
        std::lock_guard lock(m_mutex);
        m_readFileHook = std::move(hook);
    }

    // Snapshot, Restore and the checkpoint calls answer (instead of Unimplemented).
    void setSnapshots(bool supported)
    {
        std::lock_guard lock(m_mutex);
        m_snapshots = supported;
    }
    // A restore from this ref (a snapshot ref or a manifest id) is recorded, then fails with the error.
    void failRestoreOf(const std::string &ref, Error error)
    {
        std::lock_guard lock(m_mutex);
        m_restoreErrors[ref] = std::move(error);
    }
    void addSnapshotFile(const std::string &ref, const pool_client::SnapshotFile &file, std::string content = {})
    {
        std::lock_guard lock(m_mutex);
        m_snapshotFiles[ref][file.path] = {file, std::move(content)};
    }

    // Samples of a sandbox, answered newer than the caller's afterUnixMs until it is released.
    void addSamples(const std::string &sandboxId, const std::vector<pool_client::ResourcePoint> &points)
    {
        std::lock_guard lock(m_mutex);
        auto &kept = m_samples[sandboxId];
        kept.insert(kept.end(), points.begin(), points.end());
    }
    // Answers samples() of every sandbox not yet released, in place of the added samples.
    void setSamplesHook(SamplesHook hook)
    {
        std::lock_guard lock(m_mutex);
        m_samplesHook = std::move(hook);
    }

    // Kept by sandbox id; `pool` is this pool's name unless the test set one.
    void addPostMortem(pool_client::PostMortemInfo postMortem)
    {
        std::lock_guard lock(m_mutex);
        if (postMortem.pool.empty())
            postMortem.pool = m_name;
        m_postMortems[postMortem.sandboxId] = std::move(postMortem);
    }

    // ---- What the pool was asked ----

    std::vector<Claim> claims() const
    {
        std::lock_guard lock(m_mutex);
        return m_claims;
    }
    int claimCount() const
    {
        std::lock_guard lock(m_mutex);
        return static_cast<int>(m_claims.size());
    }
    // Every exec answered or held, in the order they came (not those refused while down).
    std::vector<pool_client::ExecSpec> execs() const
    {
        std::lock_guard lock(m_mutex);
        return m_execs;
    }
    int execCount() const
    {
        std::lock_guard lock(m_mutex);
        return static_cast<int>(m_execs.size());
    }
    std::vector<std::string> releases() const
    {
        std::lock_guard lock(m_mutex);
        return m_releases;
    }
    int releaseCount() const
    {
        std::lock_guard lock(m_mutex);
        return static_cast<int>(m_releases.size());
    }
    int statusCalls() const
    {
        std::lock_guard lock(m_mutex);
        return m_statusCalls;
    }
    // The sandbox ids snapshotted or checkpointed, in order.
    std::vector<std::string> snapshots() const
    {
        std::lock_guard lock(m_mutex);
        return m_snapshotsTaken;
    }
    // "sandbox <- ref" (or manifest id), one per restore asked for (the failed ones too).
    std::vector<std::string> restores() const
    {
        std::lock_guard lock(m_mutex);
        return m_restores;
    }

private:
    struct StoredFile {
        pool_client::SnapshotFile info;
        std::string content;
    };

    // An exec as asked, under m_mutex.
    void record(const pool_client::ExecSpec &spec)
    {
        m_execs.push_back(spec);
        if (static_cast<int>(m_execs.size()) == m_downAfterExecs)
            m_down = true;   // this exec is answered; whatever comes after it is not
        m_changed.notify_all();
    }

    // What an exec let go answers: the exec error, the hook or the canned outcome.
    Result<pool_client::ExecOutcome> answer(const pool_client::ExecSpec &spec, const pool_client::OutputSink &sink)
    {
        ExecHook hook;
        pool_client::ExecOutcome outcome;
        {
            std::lock_guard lock(m_mutex);
            if (m_execError)
                return std::unexpected(*m_execError);
            hook = m_execHook;
            outcome = m_execOutcome;
        }
        if (hook)
            return hook(spec, sink);
        return outcome;
    }

    std::unexpected<Error> unreachable() const
    {
        return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
    }

    const std::string m_name;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;   // an exec recorded, let go or cancelled

    // What it answers.
    bool m_down = false;
    int m_downAfterExecs = 0;
    std::vector<pool_client::TierStatus> m_tiers;
    pool_client::ExecOutcome m_execOutcome;
    ExecHook m_execHook;
    std::optional<Error> m_execError;
    std::optional<Error> m_claimError;
    bool m_holdExecs = false;
    int64_t m_cancelGeneration = 0;
    struct Parked {
        pool_client::ExecSpec spec;
        pool_client::OutputSink sink;
        pool_client::ExecDone done;
    };
    std::vector<Parked> m_parked;        // execAsync calls held
    bool m_holdCheckpoints = false;
    std::vector<std::function<void(bool cancelled)>> m_parkedCheckpoints;   // takeCheckpointAsync calls held

    ReadFileHook m_readFileHook;
    bool m_snapshots = false;
    struct Workspace {
        checkpoint::Manifest files;     // as of the last commit or restore
        checkpoint::Manifest pending;   // taken, not committed yet
        std::string base;               // the manifest id the broker knows `files` by
    };
    std::map<std::string, Workspace> m_workspaces;
    std::map<std::string, std::string> m_chunks;   // every chunk this fake made or was sent
    std::map<std::string, Error> m_restoreErrors;
    std::map<std::string, std::map<std::string, StoredFile>> m_snapshotFiles;   // ref -> path -> file
    std::map<std::string, std::vector<pool_client::ResourcePoint>> m_samples;
    SamplesHook m_samplesHook;
    std::map<std::string, pool_client::PostMortemInfo> m_postMortems;   // by sandbox id

    // What it was asked.
    std::vector<Claim> m_claims;
    std::vector<pool_client::ExecSpec> m_execs;
    std::vector<std::string> m_releases;
    int m_statusCalls = 0;
    std::vector<std::string> m_snapshotsTaken;
    std::vector<std::string> m_restores;
};

} // namespace paddock::test
