// checkpoint_bench: what a checkpoint costs per step and what a restore costs, each as a ratio
// against the raw mechanism underneath, measured in the same run on the same machine. Prints
// figures; it is not a test and asserts nothing about time.
//
// The real path throughout: an in-process SandboxPool (lite tier, bwrap) behind the real
// PoolService on loopback, the broker's GrpcPoolClient, and a broker-side Checkpointer over a
// CheckpointStore over a LocalBlobStore in a temporary directory.
//
//   1. A workspace of workspace_mb files of 1 MiB of random data, checkpointed once in full; then
//      two passes of `steps` steps: `echo $i >> notes.txt` (not timed), then Checkpointer::take
//      against the last checkpoint (timed): straight after the command, as the broker does it, in
//      the first pass; after a pause of the scan's racy margin (workspace_scan.h: a file changed
//      within it is read only once it has passed) in the second. Then `steps` takes of the
//      unchanged workspace.
//      Against: the pool's Snapshot RPC (tar+zstd of the same workspace in the pool) for the
//      changed step, and a Status round trip back to back (the floor under any pool call) for the
//      unchanged one.
//   2. Restores of checkpoints of 10, 50 and workspace_mb MiB into fresh sandboxes, and of the
//      large workspace's first checkpoint against its last (after every incremental step above).
//      Against: one sequential write of the same number of bytes, fsynced once, on the filesystem
//      the pool builds workspaces on.
//   3. CheckpointStore::putChunk of workspace_mb new random 1 MiB chunks (each checked, fsynced,
//      renamed, its directory fsynced). Against: (a) one file of the same bytes fsynced once,
//      (b) a file per chunk, each fsynced (the fair comparison), (c) as (b) with a temporary
//      name, a rename and a directory fsync per file (the same durability protocol, no hashing).
//      The four run round-robin, `runs` times each; medians.
//
// Budget (ARCHITECTURE.md): "an unchanged workspace costs under 1 ms and 4 KiB per step; a
// one-file change sends that file and a manifest; restore time grows with the bytes restored, not
// the number of checkpoints". Bytes per step are counted twice: TakeResult::bytesSent (the delta
// and chunk bytes the pool sent) and the payload of every call of the step both ways (the fields'
// bytes, numbers as 8; protobuf and HTTP/2 framing not included).
//
//   checkpoint_bench [steps] [workspace_mb] [runs] [disk_mb]      (defaults 30, 200, 5, 1024)
//
// runs: full archives and restores of each kind. disk_mb is the tier's disk limit (docs/pool.md
// "Disk": a btrfs subvolume with a qgroup per sandbox); when this machine cannot enforce it the
// bench says why and runs on plain directories, as with disk_mb = 0.
//
// Known limits: the store's chunks are read back from the page cache (they were just written);
// restores do not fsync the tree they build, the raw write they are compared with does once.

#include "broker/checkpoints/checkpoint_store.h"
#include "broker/checkpoints/checkpointer.h"
#include "broker/checkpoints/local_blob_store.h"
#include "broker/pool_client/grpc_pool_client.h"
#include "checkpoint/sha256.h"
#include "pool/core/sandbox_pool.h"
#include "pool/server/pool_service.h"
#include "pool/snapshot/workspace_scan.h"
#include "rpc/limits.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr int64_t kWarmTimeoutMs = 60000;

struct Figures {
    double median = 0, p99 = 0, mean = 0;
};

Figures summarize(std::vector<double> v)
{
    if (v.empty())
        return {};
    std::sort(v.begin(), v.end());
    Figures f;
    f.median = v[v.size() / 2];
    f.p99 = v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * 0.99))];
    for (double x : v)
        f.mean += x;
    f.mean /= static_cast<double>(v.size());
    return f;
}

double since(Clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "checkpoint_bench: %s\n", what.c_str());
    std::exit(1);
}

std::string bytesText(double bytes)
{
    char out[32];
    if (bytes < 1024)
        std::snprintf(out, sizeof out, "%.0f B", bytes);
    else if (bytes < 1024.0 * 1024)
        std::snprintf(out, sizeof out, "%.1f KiB", bytes / 1024);
    else
        std::snprintf(out, sizeof out, "%.1f MiB", bytes / (1024.0 * 1024));
    return out;
}

double mibPerSecond(double bytes, double ms)
{
    return ms > 0 ? bytes / static_cast<double>(kMiB) / (ms / 1000.0) : 0;
}

std::string filesystemOf(const fs::path &path)
{
    struct statfs st{};
    if (::statfs(path.c_str(), &st) != 0)
        return "?";
    switch (static_cast<unsigned long>(st.f_type)) {
    case EXT4_SUPER_MAGIC: return "ext4";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case TMPFS_MAGIC: return "tmpfs";
    case XFS_SUPER_MAGIC: return "xfs";
    case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
    default: break;
    }
    char magic[32];
    std::snprintf(magic, sizeof magic, "f_type 0x%lx", static_cast<unsigned long>(st.f_type));
    return magic;
}

// Random bytes, generated fast (not timed): the content of raw writes and of the ingested chunks.
std::string randomBytes(size_t n, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::string out(n, '\0');
    for (size_t off = 0; off + 8 <= n; off += 8) {
        const uint64_t word = rng();
        std::memcpy(out.data() + off, &word, 8);
    }
    return out;
}

void writeAllOrDie(int fd, std::string_view data, const fs::path &path)
{
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), std::min(data.size(), kMiB));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("cannot write " + path.string() + ": " + std::strerror(errno));
        data.remove_prefix(static_cast<size_t>(n));
    }
}

void fsyncDirOrDie(const fs::path &dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0)
        die("cannot fsync the directory " + dir.string() + ": " + std::strerror(errno));
    ::close(fd);
}

// A new file of `data`, written in 1 MiB writes and fsynced once. When `renameInto` is set the file
// is written under a temporary name, renamed to `path` and its directory fsynced, as a durable put.
void writeFileSynced(const fs::path &path, std::string_view data, bool renameInto)
{
    const fs::path target = renameInto ? fs::path(path.string() + ".tmp") : path;
    const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        die("cannot create " + target.string() + ": " + std::strerror(errno));
    writeAllOrDie(fd, data, target);
    if (::fsync(fd) != 0)
        die("cannot fsync " + target.string() + ": " + std::strerror(errno));
    ::close(fd);
    if (renameInto) {
        if (::rename(target.c_str(), path.c_str()) != 0)
            die("cannot rename " + target.string() + ": " + std::strerror(errno));
        fsyncDirOrDie(path.parent_path());
    }
}

// The broker's pool client with every checkpoint call counted: calls, the payload each way, the
// time spent waiting for the pool. Forwarding costs a virtual call; nothing is copied.
class CountingPoolClient final : public pool_client::PoolClient {
public:
    struct Tally {
        int calls = 0;
        int64_t toPool = 0;         // request fields' bytes
        int64_t toBroker = 0;       // response fields' bytes
        int64_t deltaBytes = 0;     // of toBroker: TakeCheckpoint's delta
        int64_t chunkBytes = 0;     // of toBroker: chunk content sent to the broker
        double msInCalls = 0;
        double finishMs = 0;        // in FinishRestore: the tree built from the pool's spool and swapped in
    };

    explicit CountingPoolClient(pool_client::PoolClient &inner) : m_inner(inner) {}

    Tally tally;
    void reset() { tally = {}; }

    std::string name() const override { return m_inner.name(); }
    std::string endpoint() const override { return m_inner.endpoint(); }
    Result<ClaimedSandbox> claim(const std::string &tier, const std::string &sessionId, const std::string &key) override
    {
        return m_inner.claim(tier, sessionId, key);
    }
    Result<pool_client::ExecOutcome> exec(const pool_client::ExecSpec &spec, const pool_client::OutputSink &sink) override
    {
        return m_inner.exec(spec, sink);
    }
    Result<std::string> readFile(const std::string &id, const std::string &path, int64_t maxBytes) override
    {
        return m_inner.readFile(id, path, maxBytes);
    }
    Status writeFile(const std::string &id, const std::string &path, const std::string &content, uint32_t mode) override
    {
        return m_inner.writeFile(id, path, content, mode);
    }
    Result<std::vector<pool_client::DirEntry>> listDir(const std::string &id, const std::string &path) override
    {
        return m_inner.listDir(id, path);
    }
    Status release(const std::string &id) override { return m_inner.release(id); }
    Result<pool_client::PoolStatus> status() override { return m_inner.status(); }
    void cancelInFlight() override { m_inner.cancelInFlight(); }

    Result<pool_client::TakenCheckpoint> takeCheckpoint(const std::string &id, const std::string &base) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.takeCheckpoint(id, base);
        count(t0, id.size() + base.size());
        if (r) {
            tally.deltaBytes += static_cast<int64_t>(r->delta.size());
            int64_t bytes = static_cast<int64_t>(r->token.size() + r->base.size() + r->delta.size()) + 6 * 8;
            for (const auto &c : r->chunks) {
                bytes += static_cast<int64_t>(c.hash.size() + c.data.size());
                tally.chunkBytes += static_cast<int64_t>(c.data.size());
            }
            for (const auto &[hash, size] : r->pending)
                bytes += static_cast<int64_t>(hash.size()) + 8;
            tally.toBroker += bytes;
        }
        return r;
    }
    Result<std::vector<pool_client::ContentChunk>> readCheckpointChunks(const std::string &id, const std::string &token,
                                                                        const std::vector<std::string> &hashes) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.readCheckpointChunks(id, token, hashes);
        count(t0, id.size() + token.size() + hashes.size() * 64);
        if (r)
            for (const auto &c : *r) {
                tally.toBroker += static_cast<int64_t>(c.hash.size() + c.data.size());
                tally.chunkBytes += static_cast<int64_t>(c.data.size());
            }
        return r;
    }
    Status commitCheckpoint(const std::string &id, const std::string &token, const std::string &manifestId) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.commitCheckpoint(id, token, manifestId);
        count(t0, id.size() + token.size() + manifestId.size());
        return r;
    }
    Result<pool_client::RestoreStart> beginRestore(const std::string &id, const std::string &manifestId,
                                                   const std::string &manifestJson) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.beginRestore(id, manifestId, manifestJson);
        count(t0, id.size() + manifestId.size() + manifestJson.size());
        if (r)
            tally.toBroker += static_cast<int64_t>(r->token.size() + r->missing.size() * 64);
        return r;
    }
    Status putRestoreChunks(const std::string &id, const std::string &token,
                            const std::vector<pool_client::ContentChunk> &chunks) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.putRestoreChunks(id, token, chunks);
        size_t bytes = id.size() + token.size();
        for (const auto &c : chunks)
            bytes += c.hash.size() + c.data.size();
        count(t0, bytes);
        return r;
    }
    Result<pool_client::RestoredWorkspace> finishRestore(const std::string &id, const std::string &token) override
    {
        const auto t0 = Clock::now();
        auto r = m_inner.finishRestore(id, token);
        tally.finishMs += since(t0);
        count(t0, id.size() + token.size());
        tally.toBroker += 3 * 8;
        return r;
    }

private:
    void count(Clock::time_point t0, size_t requestBytes)
    {
        tally.msInCalls += since(t0);
        tally.calls++;
        tally.toPool += static_cast<int64_t>(requestBytes);
    }

    pool_client::PoolClient &m_inner;
};

// A pool of one lite tier behind the real PoolService on an ephemeral loopback port, with the
// broker's gRPC client of it. Ends in the daemon's order: server, pool, the service's workers.
class ServedPool {
public:
    explicit ServedPool(const pool::PoolConfig &config)
    {
        auto created = pool::SandboxPool::create(config);
        if (!created)
            die(created.error().message);
        pool = std::move(*created);
        m_service = std::make_unique<pool::PoolService>(*pool);
        grpc::ServerBuilder builder;
        int port = 0;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
        builder.SetMaxReceiveMessageSize(rpc::kMaxPoolMessageBytes);
        builder.RegisterService(m_service.get());
        m_server = builder.BuildAndStart();
        if (!m_server || port == 0)
            die("cannot serve the pool on loopback");
        pool->start();
        client = pool_client::makeGrpcPoolClient("bench", "127.0.0.1:" + std::to_string(port));
    }
    ~ServedPool()
    {
        m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
        pool->shutdown();
        m_service->stop();
    }
    ServedPool(const ServedPool &) = delete;
    ServedPool &operator=(const ServedPool &) = delete;

    std::unique_ptr<pool::SandboxPool> pool;
    std::unique_ptr<pool_client::PoolClient> client;

    // A warm sandbox, after the pool refilled and the kernel finished tearing down the last one.
    std::string claimWarm()
    {
        if (!pool->waitWarm(kWarmTimeoutMs))
            die("the pool did not refill");
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        auto c = client->claim("lite", "bench", "");
        if (!c)
            die("claim: " + c.error().message);
        return c->sandboxId;
    }

    void sh(const std::string &sandboxId, const std::string &line)
    {
        pool_client::ExecSpec spec;
        spec.sandboxId = sandboxId;
        spec.argv = {"/bin/sh", "-c", line};
        spec.timeoutMs = 300000;
        auto r = client->exec(spec);
        if (!r || r->exitCode != 0)
            die("`" + line + "` failed: " + (r ? r->stderrData + " (exit " + std::to_string(r->exitCode) + ")" : r.error().message));
    }

    // `mib` files of 1 MiB of random data in the sandbox's /workspace.
    void fill(const std::string &sandboxId, int mib)
    {
        sh(sandboxId, "i=1; while [ $i -le " + std::to_string(mib)
                          + " ]; do head -c 1048576 /dev/urandom > f$i || exit 1; i=$((i + 1)); done");
    }

private:
    std::unique_ptr<pool::PoolService> m_service;
    std::unique_ptr<grpc::Server> m_server;
};

checkpoints::TakeResult takeOrDie(checkpoints::Checkpointer &checkpointer, pool_client::PoolClient &pool,
                                  const std::string &sandboxId, const std::string &base)
{
    auto r = checkpointer.take(pool, sandboxId, base);
    if (!r)
        die("checkpoint of " + sandboxId + ": " + r.error().error.message);
    return *r;
}

// One kind of step, `steps` times: figures of each take.
struct StepRuns {
    std::vector<double> ms, scanMs, inCallsMs, sent, stored, payload, delta, chunk, calls;
};

void record(StepRuns &runs, double ms, const checkpoints::TakeResult &r, const CountingPoolClient::Tally &t)
{
    runs.ms.push_back(ms);
    runs.scanMs.push_back(r.scanMs);
    runs.inCallsMs.push_back(t.msInCalls);
    runs.sent.push_back(static_cast<double>(r.bytesSent));
    runs.stored.push_back(static_cast<double>(r.bytesStored));
    runs.payload.push_back(static_cast<double>(t.toPool + t.toBroker));
    runs.delta.push_back(static_cast<double>(t.deltaBytes));
    runs.chunk.push_back(static_cast<double>(t.chunkBytes));
    runs.calls.push_back(t.calls);
}

void printSteps(const char *what, const StepRuns &runs)
{
    const Figures ms = summarize(runs.ms), scan = summarize(runs.scanMs), inCalls = summarize(runs.inCallsMs);
    std::printf("  %-40s median %8.3f ms   p99 %8.3f ms   mean %8.3f ms\n", what, ms.median, ms.p99, ms.mean);
    std::printf("    where (medians): pool scan %.3f ms, rest of the %.0f pool call(s) %.3f ms, broker (store) %.3f ms\n",
                scan.median, summarize(runs.calls).median, inCalls.median - scan.median, ms.median - inCalls.median);
    std::printf("    sent by the pool (TakeResult::bytesSent): median %s, max %s (delta %s, chunk content %s)\n",
                bytesText(summarize(runs.sent).median).c_str(), bytesText(summarize(runs.sent).p99).c_str(),
                bytesText(summarize(runs.delta).median).c_str(), bytesText(summarize(runs.chunk).median).c_str());
    std::printf("    payload of every call both ways: median %s, max %s; written to the store: median %s\n",
                bytesText(summarize(runs.payload).median).c_str(), bytesText(summarize(runs.payload).p99).c_str(),
                bytesText(summarize(runs.stored).median).c_str());
}

struct Restored {
    std::string label;
    std::string manifestId;
    int64_t bytes = 0;
    std::vector<double> ms, inCallsMs, finishMs;
};

} // namespace

int main(int argc, char **argv)
{
    const int steps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
    const int workspaceMib = argc > 2 ? std::max(2, std::atoi(argv[2])) : 200;
    const int runs = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
    const int64_t diskBytes = argc > 4 ? std::max<int64_t>(0, std::atoll(argv[4])) << 20 : 1ll << 30;
    spdlog::set_level(spdlog::level::warn);
    const auto benchStart = Clock::now();

    char tmpl[] = "/tmp/paddock-checkpoint-bench-XXXXXX";
    if (!::mkdtemp(tmpl))
        die("cannot create a temporary directory");
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;

    pool::PoolConfig config;
    config.stateDir = dir / "state";
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.tiers.push_back(pool::TierConfig{"lite", "bwrap", 2, 8, 1.0, 512ll << 20, 512, diskBytes});
    auto served = std::make_unique<ServedPool>(config);
    std::string diskText = diskBytes > 0 ? std::to_string(diskBytes >> 20) + " MiB per sandbox, " + served->pool->diskLimits()
                                         : "off (disk_mb = 0)";
    if (diskBytes > 0 && !served->pool->diskLimitsEnforced()) {
        diskText = "off: this machine cannot enforce it (" + served->pool->diskLimits() + ")";
        served.reset();
        config.stateDir = dir / "state-plain";
        config.tiers[0].diskBytes = 0;
        served = std::make_unique<ServedPool>(config);
    }
    auto &client = *served->client;
    CountingPoolClient counting(client);

    auto blobs = checkpoints::LocalBlobStore::open(dir / "store");
    if (!blobs)
        die(blobs.error().message);
    checkpoints::CheckpointStore store(std::move(*blobs), "broker");
    checkpoints::Checkpointer checkpointer(store);

    // Warm up the channel and the server's threads.
    if (!served->pool->waitWarm(kWarmTimeoutMs))
        die("the pool did not warm up");
    for (int i = 0; i < 50; ++i)
        if (!client.status())
            die("status failed");

    const fs::path workspaces = config.stateDir / "sandboxes";
    std::printf("checkpoint_bench: %d steps, a workspace of %d x 1 MiB files, %d runs of archives and restores; lite tier (bwrap)\n",
                steps, workspaceMib, runs);
    std::printf("  disk limit: %s\n", diskText.c_str());
    std::printf("  workspaces on %s, pool state and spool on %s, checkpoint store on %s; racy margin of the scan %.1f ms\n",
                filesystemOf(workspaces).c_str(), filesystemOf(config.stateDir).c_str(), filesystemOf(dir / "store").c_str(),
                static_cast<double>(pool::racyMarginNs()) / 1e6);

    // 1. Checkpoint cost per step.
    const std::string a = served->claimWarm();
    served->fill(a, workspaceMib);
    ::sync();
    counting.reset();
    auto t0 = Clock::now();
    const auto first = takeOrDie(checkpointer, counting, a, "");
    const double firstMs = since(t0);
    const auto firstTally = counting.tally;

    std::vector<double> archiveMs;
    int64_t archiveBytes = 0;
    for (int i = 0; i < runs; ++i) {
        ::sync();
        t0 = Clock::now();
        auto snap = client.snapshot(a);
        archiveMs.push_back(since(t0));
        if (!snap)
            die("snapshot: " + snap.error().message);
        archiveBytes = snap->sizeBytes;
    }

    std::string last = first.manifestId;
    int incremental = 0;
    int64_t notesBytes = 0;        // notes.txt's size: what each changed step should send of content
    int inexactSteps = 0;          // steps that sent other content than notes.txt's
    StepRuns changed, changedPaused, unchanged;
    for (int pass = 0; pass < 2; ++pass) {
        StepRuns &into = pass == 0 ? changed : changedPaused;
        ::sync();
        for (int i = 0; i < steps; ++i) {
            const std::string line = std::to_string(incremental);
            served->sh(a, "echo " + line + " >> notes.txt");
            notesBytes += static_cast<int64_t>(line.size()) + 1;
            if (pass == 1)
                std::this_thread::sleep_for(std::chrono::nanoseconds(pool::racyMarginNs() + 1'000'000));
            counting.reset();
            t0 = Clock::now();
            const auto r = takeOrDie(checkpointer, counting, a, last);
            const double ms = since(t0);
            if (r.unchanged || r.changed != 1)
                die("a one-file change was checkpointed as " + std::to_string(r.changed) + " changed entries");
            record(into, ms, r, counting.tally);
            inexactSteps += counting.tally.chunkBytes == notesBytes ? 0 : 1;
            last = r.manifestId;
            ++incremental;
        }
    }
    ::sync();
    for (int i = 0; i < steps; ++i) {
        counting.reset();
        t0 = Clock::now();
        const auto r = takeOrDie(checkpointer, counting, a, last);
        const double ms = since(t0);
        if (!r.unchanged)
            die("an unchanged workspace was checkpointed as changed");
        record(unchanged, ms, r, counting.tally);
    }
    std::vector<double> statusMs;
    ::sync();
    for (int i = 0; i < std::max(200, steps); ++i) {
        t0 = Clock::now();
        if (!client.status())
            die("status failed");
        statusMs.push_back(since(t0));
    }
    (void)client.release(a);

    const Figures fArchive = summarize(archiveMs), fChanged = summarize(changed.ms), fUnchanged = summarize(unchanged.ms),
                  fStatus = summarize(statusMs);
    const double changedSent = summarize(changed.sent).median, unchangedPayload = summarize(unchanged.payload).p99;
    std::printf("\n1. checkpoint cost per step, a workspace of %d files (%s)\n", workspaceMib, bytesText(static_cast<double>(first.fileBytes)).c_str());
    std::printf("  first (full) checkpoint: %.1f ms, %s sent in %d calls, %lld chunks stored (%.0f MiB/s)\n", firstMs,
                bytesText(static_cast<double>(first.bytesSent)).c_str(), firstTally.calls, static_cast<long long>(first.chunksNew),
                mibPerSecond(static_cast<double>(first.fileBytes), firstMs));
    std::printf("    where: pool scan (read, hash, spool) %.1f ms, rest of the pool calls %.1f ms, broker (store) %.1f ms\n",
                first.scanMs, firstTally.msInCalls - first.scanMs, firstMs - firstTally.msInCalls);
    std::printf("  full archive (Snapshot RPC, tar+zstd in the pool), %d runs: median %.1f ms, %s\n", runs, fArchive.median,
                bytesText(static_cast<double>(archiveBytes)).c_str());
    printSteps("one small file changed, straight after:", changed);
    printSteps("one small file changed, after the margin:", changedPaused);
    printSteps("unchanged:", unchanged);
    std::printf("  gRPC floor: Status round trip back to back: median %.3f ms   p99 %.3f ms\n", fStatus.median, fStatus.p99);
    std::printf("ratios:\n");
    std::printf("  one small file changed: %.2f ms median, %s sent; full archive of the same workspace: %.0f ms, %s -> ratio %.4f (time), %.7f (bytes)\n",
                fChanged.median, bytesText(changedSent).c_str(), fArchive.median, bytesText(static_cast<double>(archiveBytes)).c_str(),
                fChanged.median / fArchive.median, changedSent / static_cast<double>(archiveBytes));
    std::printf("  first full checkpoint / full archive: %.2f (time), %.3f (bytes)\n", firstMs / fArchive.median,
                static_cast<double>(first.bytesSent) / static_cast<double>(archiveBytes));
    std::printf("  unchanged / Status round trip: median %.2f   p99 %.2f\n", fUnchanged.median / fStatus.median, fUnchanged.p99 / fStatus.p99);
    std::printf("budget (unchanged: under 1 ms and 4 KiB per step): median %.3f ms %s, p99 %.3f ms %s; payload max %s %s\n",
                fUnchanged.median, fUnchanged.median < 1.0 ? "yes" : "NO", fUnchanged.p99, fUnchanged.p99 < 1.0 ? "yes" : "NO",
                bytesText(unchangedPayload).c_str(), unchangedPayload < 4096 ? "yes" : "NO");
    std::printf("budget (a one-file change sends that file and its entry): delta median %s + the file's content, exactly, "
                "in %d of %d steps: %s\n",
                bytesText(summarize(changed.delta).median).c_str(), 2 * steps - inexactSteps, 2 * steps,
                inexactSteps == 0 ? "yes" : "NO");

    // 2. Restore time against workspace size, and against the number of checkpoints before.
    std::vector<Restored> restores;
    for (int mib : {10, 50}) {
        if (mib >= workspaceMib)
            continue;
        const std::string b = served->claimWarm();
        served->fill(b, mib);
        const auto r = takeOrDie(checkpointer, client, b, "");
        restores.push_back({std::to_string(mib) + " MiB, its first checkpoint", r.manifestId, r.fileBytes, {}});
        (void)client.release(b);
    }
    restores.push_back({std::to_string(workspaceMib) + " MiB, its first checkpoint", first.manifestId, first.fileBytes, {}});
    restores.push_back({std::to_string(workspaceMib) + " MiB, after " + std::to_string(incremental) + " more", last,
                        first.fileBytes, {}});
    int64_t restoreSent = 0;
    // Each run starts one further along the list, so no kind always follows the same one.
    for (int run = 0; run < runs; ++run)
        for (size_t k = 0; k < restores.size(); ++k) {
            Restored &restore = restores[(k + static_cast<size_t>(run)) % restores.size()];
            const std::string b = served->claimWarm();
            ::sync();
            counting.reset();
            t0 = Clock::now();
            auto r = checkpointer.restore(counting, b, restore.manifestId);
            restore.ms.push_back(since(t0));
            restore.inCallsMs.push_back(counting.tally.msInCalls);
            restore.finishMs.push_back(counting.tally.finishMs);
            if (!r)
                die("restore of " + restore.label + ": " + r.error().error.message);
            restore.bytes = r->bytes;
            if (&restore == &restores.back())
                restoreSent = counting.tally.toPool;
            (void)client.release(b);
        }
    // The raw floor: the same bytes written once and fsynced once where the pool builds workspaces.
    const std::string random = randomBytes(static_cast<size_t>(workspaceMib) * kMiB, 2026);
    const fs::path rawDir = workspaces / "raw-write-bench";
    fs::create_directories(rawDir);
    std::vector<std::pair<int64_t, double>> rawMs;   // bytes, median ms
    for (const auto &restore : restores) {
        if (std::any_of(rawMs.begin(), rawMs.end(), [&](const auto &p) { return p.first == restore.bytes; }))
            continue;
        std::vector<double> ms;
        for (int run = 0; run < runs; ++run) {
            ::sync();
            t0 = Clock::now();
            writeFileSynced(rawDir / "raw", std::string_view(random).substr(0, static_cast<size_t>(restore.bytes)), false);
            ms.push_back(since(t0));
            fs::remove(rawDir / "raw");
        }
        rawMs.emplace_back(restore.bytes, summarize(ms).median);
    }
    fs::remove_all(rawDir);
    auto rawFor = [&](int64_t bytes) {
        for (const auto &[b, ms] : rawMs)
            if (b == bytes)
                return ms;
        return 0.0;
    };
    std::printf("\n2. restore into a fresh sandbox (%d runs each, rotated, medians), against one write of the same bytes fsynced once on %s\n",
                runs, filesystemOf(workspaces).c_str());
    for (const auto &restore : restores) {
        const Figures f = summarize(restore.ms);
        const double raw = rawFor(restore.bytes), bytes = static_cast<double>(restore.bytes);
        std::printf("  %-36s %9s: %8.1f ms %6.0f MiB/s   raw %7.1f ms %6.0f MiB/s   ratio %.2f\n", restore.label.c_str(),
                    bytesText(bytes).c_str(), f.median, mibPerSecond(bytes, f.median), raw, mibPerSecond(bytes, raw), f.median / raw);
        const double inCalls = summarize(restore.inCallsMs).median, finish = summarize(restore.finishMs).median;
        std::printf("    where (medians): broker (store reads, checks) %.1f ms, Begin+PutRestoreChunks (to the pool's spool) "
                    "%.1f ms, FinishRestore (tree built, swapped in) %.1f ms\n",
                    f.median - inCalls, inCalls - finish, finish);
    }
    std::printf("  payload of a restore of %s to the pool: %s\n", restores.back().label.c_str(),
                bytesText(static_cast<double>(restoreSent)).c_str());
    const double firstRestore = summarize(restores[restores.size() - 2].ms).median, lastRestore = summarize(restores.back().ms).median;
    std::printf("ratio (restore after %d incremental checkpoints / restore of the first): %.2f\n", incremental, lastRestore / firstRestore);
    if (restores.size() >= 2) {
        const auto &small = restores.front();
        const double perMibSmall = summarize(small.ms).median / (static_cast<double>(small.bytes) / kMiB);
        std::printf("ratio (ms per MiB, %s / %s): %.2f\n", restores[restores.size() - 2].label.c_str(), small.label.c_str(),
                    firstRestore / (static_cast<double>(first.fileBytes) / kMiB) / perMibSmall);
    }

    // 3. Store ingest against raw sequential writes of the same bytes.
    served.reset();   // the pool is done: nothing else runs beside the writes
    const size_t chunks = static_cast<size_t>(workspaceMib);
    // The names, and what hashing costs: putChunk checks every chunk against its name.
    std::vector<std::string> hashes;
    t0 = Clock::now();
    for (size_t i = 0; i < chunks; ++i)
        hashes.push_back(checkpoint::sha256Hex(std::string_view(random).substr(i * kMiB, kMiB)));
    const double hashMs = since(t0);
    // The four ways, round-robin `runs` times, each into a new directory (a new store: every chunk
    // is new), the last round's files removed and everything synced before each.
    const fs::path raw = dir / "ingest";
    std::vector<double> storeMs, oneFileMs, eachMs, renamedMs;
    auto timed = [&](std::vector<double> &into, const std::function<void(const fs::path &)> &write) {
        std::error_code ignored;
        fs::remove_all(raw, ignored);
        fs::create_directories(raw);
        ::sync();
        const auto start = Clock::now();
        write(raw);
        into.push_back(since(start));
    };
    for (int run = 0; run < runs; ++run) {
        timed(storeMs, [&](const fs::path &to) {
            auto ingestBlobs = checkpoints::LocalBlobStore::open(to / "store");
            if (!ingestBlobs)
                die(ingestBlobs.error().message);
            checkpoints::CheckpointStore ingest(std::move(*ingestBlobs), "broker");
            for (size_t i = 0; i < chunks; ++i) {
                auto put = ingest.putChunk(hashes[i], std::string_view(random).substr(i * kMiB, kMiB));
                if (!put || !*put)
                    die("putChunk: " + (put ? std::string("the chunk was not new") : put.error().message));
            }
        });
        timed(oneFileMs, [&](const fs::path &to) { writeFileSynced(to / "one", random, false); });
        timed(eachMs, [&](const fs::path &to) {
            for (size_t i = 0; i < chunks; ++i)
                writeFileSynced(to / std::to_string(i), std::string_view(random).substr(i * kMiB, kMiB), false);
        });
        timed(renamedMs, [&](const fs::path &to) {
            for (size_t i = 0; i < chunks; ++i)
                writeFileSynced(to / std::to_string(i), std::string_view(random).substr(i * kMiB, kMiB), true);
        });
    }
    const double total = static_cast<double>(random.size());
    const double fStore = summarize(storeMs).median, fOne = summarize(oneFileMs).median, fEach = summarize(eachMs).median,
                 fRenamed = summarize(renamedMs).median;
    std::printf("\n3. store ingest of %zu new 1 MiB chunks (%s) on %s, %d runs each, interleaved, medians\n", chunks,
                bytesText(total).c_str(), filesystemOf(dir).c_str(), runs);
    std::printf("  CheckpointStore::putChunk, each                       %8.1f ms %6.0f MiB/s\n", fStore, mibPerSecond(total, fStore));
    std::printf("  (a) raw: one file, fsynced once                       %8.1f ms %6.0f MiB/s\n", fOne, mibPerSecond(total, fOne));
    std::printf("  (b) raw: a file per chunk, each fsynced               %8.1f ms %6.0f MiB/s\n", fEach, mibPerSecond(total, fEach));
    std::printf("  (c) raw: as (b), + temporary name, rename, dir fsync  %8.1f ms %6.0f MiB/s\n", fRenamed, mibPerSecond(total, fRenamed));
    std::printf("  of the store's: SHA-256 of the same bytes, once         %8.1f ms %6.0f MiB/s\n", hashMs, mibPerSecond(total, hashMs));
    std::printf("ratios (store / raw, time): (a) %.2f   (b) %.2f   (c) %.2f\n", fStore / fOne, fStore / fEach, fStore / fRenamed);

    std::printf("\ncheckpoint_bench took %.0f s\n", since(benchStart) / 1000.0);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
