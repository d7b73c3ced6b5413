// SandboxPool's claim part: create() (checks, the state directory, leftovers of an earlier run,
// disk limits, stores), start and shutdown, starting and destroying a sandbox, claims (warm or
// cold, idempotent by key), the refill workers and release. Execs are in sandbox_pool_exec.cpp,
// statistics, the monitor and post-mortems in sandbox_pool_monitor.cpp, egress in
// sandbox_pool_egress.cpp, checkpoints in sandbox_pool_checkpoints.cpp; the private types they
// share in sandbox_pool_internal.h.
//
// Threads: claim, claimIfWarm, release and waitWarm run on the callers' threads; refillLoop on
// kRefillThreadsPerTier threads per tier. startSandbox and destroy block: never under m_mutex.

#include "pool/core/sandbox_pool_internal.h"

#include "common/clock.h"
#include "common/paths.h"
#include "pool/runtimes/minimal_etc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <random>
#include <utility>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kClaimWaitMs = 30000;    // at max_count with starts in flight: wait this long
constexpr int64_t kRefillBackoffMinMs = 500;
// A refill waits this long after a claim: the claimer's first command runs without a bwrap
// start competing for the CPU (on 2 cores that halves claim-to-first-command latency).
constexpr int64_t kRefillDelayAfterClaimUs = 10000;
constexpr int64_t kRefillBackoffMaxMs = 30000;
constexpr size_t kReleasedIdsKept = 4096;

std::string randomHex(int chars)
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char *digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < chars; ++i)
        s.push_back(digits[rng() & 15]);
    return s;
}

// create()'s steps.

// One runtime object for each runtime the tiers name.
Result<std::map<std::string, std::unique_ptr<Runtime>>> makeRuntimes(const PoolConfig &config)
{
    std::map<std::string, std::unique_ptr<Runtime>> runtimes;
    for (const auto &tier : config.tiers) {
        if (runtimes.count(tier.runtime))
            continue;
        auto rt = makeRuntime(tier.runtime);
        if (!rt)
            return fail(rt.error().code, "tier '" + tier.name + "': " + rt.error().message);
        runtimes.emplace(tier.runtime, std::move(*rt));
    }
    return runtimes;
}

// One pool per state directory: a second one would delete the first one's sandboxes (create()
// clears them). The descriptor holds the lock for the pool's life.
// The state directory's lock while create() runs: closed on every early return, handed to the
// pool at the end.
class HeldLock {
public:
    explicit HeldLock(int fd) : m_fd(fd) {}
    ~HeldLock()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    HeldLock(const HeldLock &) = delete;
    HeldLock &operator=(const HeldLock &) = delete;
    int release() { return std::exchange(m_fd, -1); }

private:
    int m_fd;
};

Result<int> lockStateDir(const fs::path &stateDir)
{
    const fs::path lockPath = stateDir / "pool.lock";
    int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockFd < 0 || ::flock(lockFd, LOCK_EX | LOCK_NB) != 0) {
        if (lockFd >= 0)
            ::close(lockFd);
        return fail(ErrorCode::FailedPrecondition, "another paddock-pool is already using the state directory " +
                                                       stateDir.string() + "; stop it or pass a different --state-dir");
    }
    return lockFd;
}

// Sandboxes of an earlier run died with it (bwrap --die-with-parent); their directories remain,
// and their cgroups (the directory's name is the sandbox id).
// A killed pool also leaves its workspace filesystem mounted there: detached, not emptied
// file by file (WorkspaceFs::mount makes a fresh one).
void removeEarlierSandboxes(const fs::path &sandboxes, CgroupManager *cgroups)
{
    std::error_code ec;
    if (fs::exists(sandboxes, ec)) {
        for (const auto &entry : fs::directory_iterator(sandboxes, ec)) {
            spdlog::info("removing sandbox left by an earlier run: {}", entry.path().filename().string());
            if (cgroups)
                cgroups->removeLeftover(entry.path().filename().string());
        }
        WorkspaceFs::detachStale(sandboxes);
        for (const auto &entry : fs::directory_iterator(sandboxes, ec))
            fs::remove_all(entry.path(), ec);
    }
}

struct DiskLimits {
    std::unique_ptr<WorkspaceFs> workspaceFs;   // null: no disk limits
    std::string text = "none (no tier has disk_mb)";   // SandboxPool::diskLimits()
};

// Disk limits: one btrfs for every sandbox directory (workspace_fs.h), sized for every tier
// at max_count. The image is sparse: only what sandboxes write takes host disk.
Result<DiskLimits> mountDiskLimits(const PoolConfig &config, const fs::path &sandboxes, unsigned passThrough)
{
    DiskLimits limits;
    int64_t imageBytes = 0;
    for (const auto &tier : config.tiers)
        imageBytes += tier.diskBytes * tier.maxCount;
    if (imageBytes > 0) {
        imageBytes = std::max<int64_t>(imageBytes + (256ll << 20), 1ll << 30);   // metadata; btrfs' minimum
        auto mounted = WorkspaceFs::mount(config.stateDir / "workspaces.btrfs", sandboxes, imageBytes);
        if (mounted) {
            limits.workspaceFs = std::move(*mounted);
            limits.text = "btrfs qgroups";
            ::chmod(sandboxes.c_str(), passThrough);   // the new filesystem's root
        } else {
            // The documented rule (docs/pool.md): run, loudly, like a pool without cgroups.
            limits.text = "none (" + mounted.error().message + ")";
            spdlog::error("disk limits NOT enforced: {}; a sandbox can fill this host's disk through /workspace. "
                          "Give tiers disk_mb = 0 to silence this, or fix the cause", mounted.error().message);
            if (auto err = ensurePrivateDirectory(sandboxes, passThrough); !err.empty())
                return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
        }
    }
    return limits;
}

// The post-mortem store; a post-mortem it drops takes its snapshot with it.
Result<std::unique_ptr<PostMortemStore>> openPostMortems(const PoolConfig &config, SnapshotStore *snapshots)
{
    PostMortemStore::Options pmOptions;
    pmOptions.dir = config.stateDir / "postmortems";
    pmOptions.retentionMs = config.postMortemRetentionHours * 3600 * 1000;
    pmOptions.maxCount = static_cast<size_t>(config.postMortemMaxCount);
    pmOptions.onDrop = [store = snapshots](const PostMortemRecord &r) {
        if (!r.snapshotRef.empty())
            store->remove(r.snapshotRef);
    };
    return PostMortemStore::open(std::move(pmOptions));
}

// What startSandbox made of a sandbox's directories, when its start fails. ec is left as the
// last fs::remove_all left it (the caller may still read it).
void removeSandboxDir(const std::string &id, const fs::path &dir, const fs::path &runtimeDir, WorkspaceFs *workspaceFs,
                      std::error_code &ec)
{
    fs::remove_all(runtimeDir, ec);
    if (workspaceFs)
        workspaceFs->remove(id);
    else
        fs::remove_all(dir, ec);
}

} // namespace

OwnerMap SandboxPool::ownerMap(const Sandbox &sandbox)
{
    return OwnerMap{sandbox.identity.identity().hostId, sandbox.identity.identity().count};
}

fs::path SandboxPool::runtimeDirOf(const std::string &sandboxId) const { return m_config.stateDir / "runtime" / sandboxId; }

Result<std::unique_ptr<SandboxPool>> SandboxPool::create(PoolConfig config)
{
    applyPoolDefaults(config);
    auto allowlists = egressPolicies(config);
    if (!allowlists)
        return std::unexpected(allowlists.error());
    auto runtimes = makeRuntimes(config);
    if (!runtimes)
        return std::unexpected(runtimes.error());
    if (::access(config.initPath.c_str(), X_OK) != 0)
        return fail(ErrorCode::FailedPrecondition,
                    "the sandbox init is not at " + config.initPath.string() +
                        "; install the paddock-pool package (which puts it in <prefix>/libexec/paddock/), build the "
                        "paddock-sandbox-init target next to paddock-pool, or set init_path in pool.toml");
    // Sandbox ids pass through (not list) the state directory to their workspaces and bundles.
    const unsigned passThrough = passThroughMode(config);
    if (auto err = ensurePrivateDirectory(config.stateDir, passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    auto locked = lockStateDir(config.stateDir);
    if (!locked)
        return std::unexpected(locked.error());
    HeldLock lock(*locked);   // released to the pool below; closed on every early return
    auto hardening = prepareSandboxHardening(config);
    if (!hardening)
        return std::unexpected(hardening.error());
    CgroupLayout layout = detectCgroupLayout();
    auto cgroups = CgroupManager::create(layout, config.poolId);
    const fs::path sandboxes = config.stateDir / "sandboxes";
    removeEarlierSandboxes(sandboxes, cgroups.get());
    if (auto err = ensurePrivateDirectory(sandboxes, passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    // The OCI runtimes' bundles and state, per sandbox; an earlier run's are stale.
    std::error_code ec;
    fs::remove_all(config.stateDir / "runtime", ec);
    if (auto err = ensurePrivateDirectory(config.stateDir / "runtime", passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    // Checkpoint spools, the pool's alone; an earlier run's pending chunks are stale.
    fs::remove_all(config.stateDir / "checkpoints", ec);
    if (auto err = ensurePrivateDirectory(config.stateDir / "checkpoints", 0700); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    auto disk = mountDiskLimits(config, sandboxes, passThrough);
    if (!disk)
        return std::unexpected(disk.error());
    auto snapshots = SnapshotStore::open(config.snapshotDir);
    if (!snapshots)
        return std::unexpected(snapshots.error());
    auto postMortems = openPostMortems(config, snapshots->get());
    if (!postMortems)
        return std::unexpected(postMortems.error());
    auto pool = std::unique_ptr<SandboxPool>(new SandboxPool(std::move(config), std::move(*runtimes)));
    pool->m_snapshots = std::move(*snapshots);
    pool->m_postMortems = std::move(*postMortems);
    pool->pruneSnapshots(true);
    pool->m_lockFd = lock.release();
    pool->m_cgroupLayout = std::move(layout);
    pool->m_cgroups = std::move(cgroups);
    pool->m_workspaceFs = std::move(disk->workspaceFs);
    pool->m_diskLimits = std::move(disk->text);
    pool->m_hardening = std::move(*hardening);
    for (auto &tier : pool->m_tiers)
        tier->isolation = pool->m_hardening.describe(tier->config);   // fixed for the pool's life
    pool->m_allowlists = std::move(*allowlists);
    if (!pool->m_allowlists.empty())
        pool->m_egress = std::make_unique<egress::EgressProxy>();
    return pool;
}

SandboxPool::SandboxPool(PoolConfig config, std::map<std::string, std::unique_ptr<Runtime>> runtimes)
    : m_config(std::move(config)), m_runtimes(std::move(runtimes)), m_startedUs(monotonicUs())
{
    for (const auto &tc : m_config.tiers) {
        auto tier = std::make_unique<Tier>();
        tier->config = tc;
        tier->runtime = m_runtimes.at(tc.runtime).get();
        m_tiers.push_back(std::move(tier));
    }
    m_wakeFd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

SandboxPool::~SandboxPool()
{
    shutdown();
    if (m_wakeFd >= 0)
        ::close(m_wakeFd);
    if (m_lockFd >= 0)
        ::close(m_lockFd);
}

void SandboxPool::start()
{
    // Before the monitor thread, which posts the post-mortem of a crashed sandbox.
    m_deadlines = std::make_unique<DeadlineWatcher>();
    m_captures = std::make_unique<CaptureQueue>();
    for (auto &tier : m_tiers)
        for (int i = 0; i < kRefillThreadsPerTier; ++i)
            m_threads.emplace_back([this, t = tier.get()] { refillLoop(t); });
    m_threads.emplace_back([this] { monitorLoop(); });
    if (m_cgroups)
        m_threads.emplace_back([this] { samplerLoop(); });
}

void SandboxPool::shutdown()
{
    if (m_shutDown.exchange(true))
        return;
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    wakeMonitor();
    for (auto &t : m_threads)
        t.join();
    m_threads.clear();
    if (m_captures)
        m_captures->stop();   // finishes the post-mortems queued, while their workspaces exist
    if (m_deadlines)
        m_deadlines->stop();
    std::vector<std::shared_ptr<Sandbox>> all;
    {
        std::lock_guard lock(m_mutex);
        for (auto &[id, sb] : m_sandboxes)
            all.push_back(sb);
        m_sandboxes.clear();
        for (auto &tier : m_tiers) {
            tier->warm.clear();
            tier->claimed = 0;
        }
    }
    m_cv.notify_all();
    for (auto &sb : all)
        destroy(sb);
    m_execLoop.stop();   // execs still waiting on a dead init fail now rather than at their deadline
    if (m_workspaceFs)
        m_workspaceFs->unmount();   // every sandbox directory on it is gone
    spdlog::info("released {} sandboxes", all.size());
}

void SandboxPool::wakeMonitor()
{
    if (m_wakeFd >= 0) {
        uint64_t one = 1;
        (void)!::write(m_wakeFd, &one, sizeof one);
    }
}

Result<std::shared_ptr<SandboxPool::Sandbox>> SandboxPool::startSandbox(Tier &tier)
{
    const std::string id = tier.config.name + "-" + randomHex(12);
    const fs::path dir = m_config.stateDir / "sandboxes" / id;
    SandboxSpec spec = sandboxSpec(tier.config, id, dir);
    IdentityLease identity;   // given back on any failure below
    if (m_hardening.identities) {
        auto acquired = m_hardening.identities->acquire();
        if (!acquired)
            return std::unexpected(acquired.error());
        identity = std::move(*acquired);
        spec.identity = identity.identity();
    }
    std::error_code ec;
    std::unique_ptr<SandboxCgroup> cgroup;
    if (m_cgroups) {
        auto created = m_cgroups->createSandbox(id, CgroupLimits{tier.config.cpu, tier.config.memoryBytes, tier.config.pids});
        if (!created)
            return std::unexpected(created.error());
        cgroup = std::move(*created);
        spec.cgroupProcsFds = cgroup->procsFds();
    }
    WorkspaceFs *workspaceFs = tier.config.diskBytes > 0 ? m_workspaceFs.get() : nullptr;
    auto qgroupId = makeSandboxDir(tier.config, spec, dir, workspaceFs, cgroup.get());
    if (!qgroupId)
        return std::unexpected(qgroupId.error());
    if (auto st = startEgress(tier.config, id, dir, spec); !st) {
        if (cgroup)
            cgroup->remove();
        removeSandboxDir(id, dir, spec.runtimeDir, workspaceFs, ec);
        return std::unexpected(st.error());
    }
    const int64_t t0 = monotonicUs();
    auto running = tier.runtime->start(spec);
    const int64_t took = monotonicUs() - t0;
    if (cgroup)
        cgroup->closeProcsFds();
    if (!running) {
        stopEgress(id);
        if (cgroup)
            cgroup->remove();
        removeSandboxDir(id, dir, spec.runtimeDir, workspaceFs, ec);
        return std::unexpected(running.error());
    }
    if (cgroup)
        cgroup->markStarted();
    {
        std::lock_guard lock(m_mutex);
        tier.starts++;
        tier.startUsTotal += took;
    }
    spdlog::debug("started sandbox {} in {:.1f} ms", id, took / 1000.0);
    auto sandbox = std::make_shared<Sandbox>(id, &tier, dir, std::move(*running), std::move(cgroup));
    sandbox->workspaceFs = workspaceFs;
    sandbox->qgroupId = *qgroupId;
    sandbox->identity = std::move(identity);
    return sandbox;
}

SandboxSpec SandboxPool::sandboxSpec(const TierConfig &tier, const std::string &id, const fs::path &dir) const
{
    SandboxSpec spec;
    spec.id = id;
    spec.workspaceDir = dir / "workspace";
    spec.controlDir = dir / "ctl";
    spec.initPath = m_config.initPath;
    // Not on the workspace filesystem (mounted nosuid,nodev): runsc, in the sandbox's user
    // namespace, cannot remount a bundle there read-only without those locked flags.
    spec.runtimeDir = runtimeDirOf(id);
    spec.cpu = tier.cpu;
    spec.memoryBytes = tier.memoryBytes;
    spec.pids = tier.pids;
    spec.seccomp = m_hardening.seccomp;
    if (!m_hardening.etcDir.empty())
        spec.etcDir = minimalEtcFor(m_hardening.etcDir, tier.network == "allowlist");
    return spec;
}

Result<uint64_t> SandboxPool::makeSandboxDir(const TierConfig &tier, const SandboxSpec &spec, const fs::path &dir,
                                             WorkspaceFs *workspaceFs, SandboxCgroup *cgroup) const
{
    // With disk limits the sandbox directory is a subvolume held to the tier's disk_mb: the
    // workspace and a restore's staging directory beside it share the limit and the filesystem.
    uint64_t qgroupId = 0;
    if (workspaceFs) {
        auto created = workspaceFs->createLimited(spec.id, tier.diskBytes);
        if (!created) {
            if (cgroup)
                cgroup->remove();
            return std::unexpected(created.error());
        }
        qgroupId = *created;
    }
    std::error_code ec;
    fs::create_directories(spec.workspaceDir, ec);
    if (!ec)
        fs::create_directories(spec.controlDir, ec);
    if (ec) {
        const std::string why = ec.message();   // before the clean-up below overwrites ec
        if (cgroup)
            cgroup->remove();
        removeSandboxDir(spec.id, dir, spec.runtimeDir, workspaceFs, ec);
        return fail(ErrorCode::FailedPrecondition, "cannot create " + dir.string() + ": " + why +
                                                       "; check that the pool's --state-dir is writable and has space");
    }
    fs::permissions(spec.controlDir, fs::perms::owner_all, ec);
    Status given;
    if (spec.identity.mapped()) {
        // The sandbox's root owns its workspace (0700: no other host user reads it); the path to
        // it only lets the sandbox's runtime pass.
        ::chmod(dir.c_str(), passThroughMode(m_config));
        given = giveToSandbox(spec.workspaceDir, spec.identity, 0700);
    }
    if (!given) {
        if (cgroup)
            cgroup->remove();
        removeSandboxDir(spec.id, dir, spec.runtimeDir, workspaceFs, ec);
        return std::unexpected(given.error());
    }
    return qgroupId;
}

void SandboxPool::destroy(const std::shared_ptr<Sandbox> &sandbox)
{
    sandbox->running->kill();
    stopEgress(sandbox->id);
    {
        std::unique_lock lock(sandbox->captureMutex);
        sandbox->captureCv.wait_for(lock, std::chrono::minutes(2), [&] { return sandbox->pendingCaptures == 0; });
    }
    if (sandbox->cgroup)
        sandbox->cgroup->remove();   // kills what outlived bwrap, then rmdir
    {
        // Its spool goes with the object, once a checkpoint call still running lets go of it.
        std::lock_guard lock(sandbox->checkpointMutex);
        sandbox->checkpoints.reset();
    }
    std::error_code ec;
    fs::remove_all(runtimeDirOf(sandbox->id), ec);
    // The sandbox is dead: nothing inside can race the removal. Neither a subvolume's deletion
    // nor remove_all follows symlinks, so a link the agent planted is removed, not its target.
    // Deleting the subvolume also drops its qgroup: the next sandbox starts with a fresh limit.
    if (sandbox->workspaceFs) {
        sandbox->workspaceFs->remove(sandbox->id);
    } else {
        fs::remove_all(sandbox->dir, ec);
        if (ec)
            spdlog::warn("could not delete {}: {}", sandbox->dir.string(), ec.message());
    }
    // Its processes are gone (the cgroup is empty) and its files deleted: its ids may serve another.
    sandbox->identity.release();
}

void SandboxPool::recordClaimLatency(Tier &tier, int64_t us)
{
    tier.claimUsTotal += us;
    for (size_t i = 0; i < kLatencyBucketsUs.size(); ++i) {
        if (us <= kLatencyBucketsUs[i]) {
            tier.latencyCounts[i]++;
            return;
        }
    }
}

Result<ClaimedSandbox> SandboxPool::claim(const std::string &tierName, const std::string &sessionId,
                                       const std::string &idempotencyKey)
{
    const int64_t t0 = monotonicUs();
    std::unique_lock lock(m_mutex);
    if (!idempotencyKey.empty()) {
        for (;;) {
            auto it = m_claimKeys.find(idempotencyKey);
            if (it == m_claimKeys.end()) {
                m_claimKeys.emplace(idempotencyKey, std::nullopt);
                break;
            }
            if (it->second)
                return *it->second;   // the same sandbox as the first claim with this key
            m_cv.wait(lock);          // the first claim with this key is still running
        }
    }
    auto forgetKey = [&] {
        if (!idempotencyKey.empty())
            m_claimKeys.erase(idempotencyKey);
        m_cv.notify_all();
    };
    if (m_stopping) {
        forgetKey();
        return fail(ErrorCode::Unavailable, "the pool is shutting down; claim from another pool or retry when it is back");
    }
    Tier *tier = nullptr;
    std::string offered;
    for (auto &t : m_tiers) {
        offered += (offered.empty() ? "" : ", ") + t->config.name;
        if (t->config.name == tierName)
            tier = t.get();
    }
    if (!tier) {
        forgetKey();
        return fail(ErrorCode::NotFound, "no tier '" + tierName + "' on this pool; it offers: " + offered);
    }

    std::shared_ptr<Sandbox> sandbox;
    std::vector<std::shared_ptr<Sandbox>> deadWarm;
    bool warm = false;
    const int64_t waitUntilUs = t0 + kClaimWaitMs * 1000;
    while (!sandbox) {
        while (!tier->warm.empty()) {
            auto candidate = tier->warm.front();
            tier->warm.pop_front();
            if (candidate->state == Sandbox::State::Dead) {
                m_sandboxes.erase(candidate->id);
                deadWarm.push_back(candidate);
                continue;
            }
            sandbox = candidate;
            warm = true;
            break;
        }
        if (sandbox)
            break;
        if (tier->total() < tier->config.maxCount) {
            tier->starting++;
            tier->coldFallbacks++;
            lock.unlock();
            auto started = startSandbox(*tier);
            lock.lock();
            tier->starting--;
            if (!started) {
                forgetKey();
                // The broker retries; without this line a storm of failing cold starts leaves no trace.
                spdlog::warn("cold start of a '{}' sandbox for session '{}' failed: {}", tierName, sessionId,
                             started.error().message);
                return std::unexpected(started.error());
            }
            sandbox = *started;
            m_sandboxes[sandbox->id] = sandbox;
            wakeMonitor();
            break;
        }
        if (tier->starting == 0 || m_stopping || monotonicUs() >= waitUntilUs) {
            forgetKey();
            return fail(ErrorCode::ResourceExhausted,
                        "tier '" + tierName + "' is at its max_count of " + std::to_string(tier->config.maxCount) +
                            " sandboxes; release sandboxes that are done or raise max_count in pool.toml");
        }
        m_cv.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::microseconds(waitUntilUs - monotonicUs()));
    }
    ClaimedSandbox result = finishClaimLocked(*tier, sandbox, warm, t0, sessionId, idempotencyKey);
    lock.unlock();
    for (auto &dead : deadWarm)
        destroy(dead);
    // A warm claim is routine (debug, off the claim's path at the default level); a cold one
    // says the warm pool ran dry, which an operator sizing warm_count wants to see.
    spdlog::log(warm ? spdlog::level::debug : spdlog::level::info, "claimed {} ({}, {:.2f} ms) for session '{}'",
                result.sandboxId, warm ? "warm" : "cold", result.claimMs, sessionId);
    return result;
}

ClaimedSandbox SandboxPool::finishClaimLocked(Tier &tier, const std::shared_ptr<Sandbox> &sandbox, bool warm, int64_t t0,
                                           const std::string &sessionId, const std::string &idempotencyKey, bool notify)
{
    sandbox->state = Sandbox::State::Claimed;
    sandbox->sessionId = sessionId;
    sandbox->claimKey = idempotencyKey;
    tier.claimed++;
    tier.claims++;
    tier.lastClaimUs = monotonicUs();
    if (warm)
        tier.warmClaims++;
    const int64_t tookUs = monotonicUs() - t0;
    recordClaimLatency(tier, tookUs);

    ClaimedSandbox result;
    result.sandboxId = sandbox->id;
    result.tier = tier.config.name;
    result.runtime = tier.config.runtime;
    result.host = m_config.poolId;
    result.warm = warm;
    result.claimMs = static_cast<double>(tookUs) / 1000.0;
    if (!idempotencyKey.empty())
        m_claimKeys[idempotencyKey] = result;
    if (notify)
        m_cv.notify_all();   // refill workers: a warm slot opened; waiters on this key
    return result;
}

std::optional<Result<ClaimedSandbox>> SandboxPool::claimIfWarm(const std::string &tierName, const std::string &sessionId,
                                                            const std::string &idempotencyKey)
{
    const int64_t t0 = monotonicUs();
    std::unique_lock lock(m_mutex);
    if (m_stopping)
        return std::nullopt;
    if (!idempotencyKey.empty()) {
        auto it = m_claimKeys.find(idempotencyKey);
        if (it != m_claimKeys.end()) {
            if (it->second)
                return Result<ClaimedSandbox>(*it->second);
            return std::nullopt;   // in flight: the blocking path waits for it
        }
    }
    Tier *tier = nullptr;
    for (auto &t : m_tiers)
        if (t->config.name == tierName)
            tier = t.get();
    if (!tier || tier->warm.empty() || tier->warm.front()->state == Sandbox::State::Dead)
        return std::nullopt;   // unknown tier, cold start or cleanup: the blocking path says and does it
    auto sandbox = tier->warm.front();
    tier->warm.pop_front();
    // No waiter can be on this key (an in-flight key took the blocking path above), so only the
    // refill workers need a wake-up, and the caller gives it after answering.
    ClaimedSandbox result = finishClaimLocked(*tier, sandbox, true, t0, sessionId, idempotencyKey, false);
    lock.unlock();
    spdlog::debug("claimed {} (warm, {:.3f} ms) for session '{}'", result.sandboxId, result.claimMs, sessionId);
    return Result<ClaimedSandbox>(std::move(result));
}

Result<std::shared_ptr<SandboxPool::Sandbox>> SandboxPool::findClaimed(const std::string &sandboxId) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_sandboxes.find(sandboxId);
    if (it == m_sandboxes.end() || it->second->state == Sandbox::State::Warm)
        return noSuchSandbox(sandboxId);
    if (it->second->state == Sandbox::State::Dead)
        return fail(ErrorCode::FailedPrecondition, "sandbox '" + sandboxId + "' has died (" + it->second->deathReason +
                                                       "); release it and claim a new one");
    return it->second;
}

Status SandboxPool::release(const std::string &sandboxId)
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end() || it->second->state == Sandbox::State::Warm) {
            // A retried release (the answer to the first was lost) succeeds again.
            if (m_releasedIds.count(sandboxId))
                return {};
            return noSuchSandbox(sandboxId);
        }
        sandbox = it->second;
        m_sandboxes.erase(it);
        m_releasedIds.insert(sandboxId);
        m_releasedOrder.push_back(sandboxId);
        if (m_releasedOrder.size() > kReleasedIdsKept) {
            m_releasedIds.erase(m_releasedOrder.front());
            m_releasedOrder.pop_front();
        }
        sandbox->tier->claimed--;
        if (!sandbox->claimKey.empty())
            m_claimKeys.erase(sandbox->claimKey);
    }
    m_cv.notify_all();
    wakeMonitor();
    destroy(sandbox);
    spdlog::info("released {} (session '{}')", sandbox->id, sandbox->sessionId);
    return {};
}

bool SandboxPool::waitWarm(int64_t timeoutMs)
{
    std::unique_lock lock(m_mutex);
    return m_cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [&] {
        for (const auto &t : m_tiers)
            if (static_cast<int>(t->warm.size()) < std::min(t->config.warmCount, t->config.maxCount - t->claimed))
                return false;
        return true;
    });
}

void SandboxPool::refillLoop(Tier *tier)
{
    int64_t backoffMs = kRefillBackoffMinMs;
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] {
            return m_stopping || (static_cast<int>(tier->warm.size()) + tier->refilling < tier->config.warmCount &&
                                  tier->total() < tier->config.maxCount);
        });
        if (m_stopping)
            return;
        if (const int64_t wait = tier->lastClaimUs + kRefillDelayAfterClaimUs - monotonicUs(); wait > 0) {
            m_cv.wait_for(lock, std::chrono::microseconds(wait), [&] { return m_stopping; });
            continue;   // re-check: the slot may have been taken meanwhile
        }
        tier->starting++;
        tier->refilling++;
        lock.unlock();
        auto started = startSandbox(*tier);
        lock.lock();
        tier->starting--;
        tier->refilling--;
        if (!started) {
            spdlog::error("cannot refill tier '{}': {}", tier->config.name, started.error().message);
            m_cv.wait_for(lock, std::chrono::milliseconds(backoffMs), [&] { return m_stopping; });
            backoffMs = std::min(backoffMs * 2, kRefillBackoffMaxMs);
            continue;
        }
        backoffMs = kRefillBackoffMinMs;
        auto sandbox = *started;
        if (m_stopping) {
            lock.unlock();
            destroy(sandbox);
            return;
        }
        tier->warm.push_back(sandbox);
        m_sandboxes[sandbox->id] = sandbox;
        m_cv.notify_all();
        wakeMonitor();
    }
}

} // namespace paddock::pool
