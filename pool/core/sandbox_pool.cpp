#include "pool/core/sandbox_pool.h"

#include "common/clock.h"
#include "common/paths.h"
#include "pool/runtimes/minimal_etc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <fstream>
#include <poll.h>
#include <random>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

constexpr int kRefillThreadsPerTier = 2;   // the budget measures refill at two parallel starts
constexpr int64_t kClaimWaitMs = 30000;    // at max_count with starts in flight: wait this long
constexpr int64_t kRefillBackoffMinMs = 500;
// A refill waits this long after a claim: the claimer's first command runs without a bwrap
// start competing for the CPU (on 2 cores that halves claim-to-first-command latency).
constexpr int64_t kRefillDelayAfterClaimUs = 10000;
constexpr int64_t kRefillBackoffMaxMs = 30000;
constexpr size_t kReleasedIdsKept = 4096;
const std::vector<int64_t> kLatencyBucketsUs = {250, 500, 1000, 2000, 5000, 10000, 25000,
                                                50000, 100000, 250000, 1000000, INT64_MAX};

std::string randomHex(int chars)
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char *digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < chars; ++i)
        s.push_back(digits[rng() & 15]);
    return s;
}

std::string hostName()
{
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

std::unexpected<Error> noSuchSandbox(const std::string &id)
{
    return fail(ErrorCode::NotFound, "no sandbox '" + id + "' on this pool; it may have been released — claim a new one");
}

} // namespace

struct SandboxPool::ExecRecord {
    bool done = false;                                 // guarded by Sandbox::execMutex
    std::vector<std::pair<int, std::string>> chunks;   // written only by the running thread until done
    int64_t bytes = 0;
    Result<InitExecResult> result;
};

struct SandboxPool::Sandbox {
    enum class State { Warm, Claimed, Dead };

    std::string id;
    Tier *tier = nullptr;
    fs::path dir;
    std::unique_ptr<RunningSandbox> running;
    InitClient init;
    std::unique_ptr<SandboxCgroup> cgroup;   // null: no limits
    WorkspaceFs *workspaceFs = nullptr;      // null: no disk limit; then qgroupId is 0
    uint64_t qgroupId = 0;
    IdentityLease identity;                  // its block of host ids; destroy() gives it back
    mutable std::mutex sampleMutex;
    std::deque<CgroupSample> samples;        // guarded by sampleMutex
    // Guarded by the pool's m_mutex.
    State state = State::Warm;
    std::string deathReason;
    std::string sessionId;
    std::string claimKey;

    // Exec idempotency records, guarded by execMutex.
    std::mutex execMutex;
    std::condition_variable execCv;
    std::map<std::string, std::shared_ptr<ExecRecord>> records;
    std::deque<std::string> order;
    int64_t recordBytes = 0;

    // Post-mortem captures queued or running: destroy() waits for them before deleting the
    // workspace they archive.
    std::mutex captureMutex;
    std::condition_variable captureCv;
    int pendingCaptures = 0;   // guarded by captureMutex
    void captureQueued()
    {
        std::lock_guard lock(captureMutex);
        pendingCaptures++;
    }

    Sandbox(std::string id_, Tier *tier_, fs::path dir_, std::unique_ptr<RunningSandbox> running_,
            std::unique_ptr<SandboxCgroup> cgroup_)
        : id(std::move(id_)), tier(tier_), dir(std::move(dir_)), running(std::move(running_)),
          init(running->controlSocket()), cgroup(std::move(cgroup_))
    {
    }
};

struct SandboxPool::Tier {
    TierConfig config;
    Runtime *runtime = nullptr;
    // Guarded by the pool's m_mutex.
    std::deque<std::shared_ptr<Sandbox>> warm;
    int claimed = 0;
    int starting = 0;     // cold starts and refills in flight
    int refilling = 0;    // the refill part of `starting`
    int64_t claims = 0;
    int64_t warmClaims = 0;
    int64_t coldFallbacks = 0;
    int64_t starts = 0;
    int64_t startUsTotal = 0;
    int64_t lastClaimUs = 0;
    std::vector<int64_t> latencyCounts = std::vector<int64_t>(kLatencyBucketsUs.size(), 0);

    TierIsolation isolation;   // what the tier promises, in words; set once by create()

    int total() const { return static_cast<int>(warm.size()) + claimed + starting; }
};

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
    std::map<std::string, std::unique_ptr<Runtime>> runtimes;
    for (const auto &tier : config.tiers) {
        if (runtimes.count(tier.runtime))
            continue;
        auto rt = makeRuntime(tier.runtime);
        if (!rt)
            return fail(rt.error().code, "tier '" + tier.name + "': " + rt.error().message);
        runtimes.emplace(tier.runtime, std::move(*rt));
    }
    if (::access(config.initPath.c_str(), X_OK) != 0)
        return fail(ErrorCode::FailedPrecondition,
                    "the sandbox init is not at " + config.initPath.string() +
                        "; install the paddock-pool package (which puts it in <prefix>/libexec/paddock/), build the "
                        "paddock-sandbox-init target next to paddock-pool, or set init_path in pool.toml");
    // Sandbox ids pass through (not list) the state directory to their workspaces and bundles.
    const unsigned passThrough = passThroughMode(config);
    if (auto err = ensurePrivateDirectory(config.stateDir, passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    // One pool per state directory: a second one would delete the first one's sandboxes below.
    const fs::path lockPath = config.stateDir / "pool.lock";
    int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockFd < 0 || ::flock(lockFd, LOCK_EX | LOCK_NB) != 0) {
        if (lockFd >= 0)
            ::close(lockFd);
        return fail(ErrorCode::FailedPrecondition, "another paddock-pool is already using the state directory " +
                                                       config.stateDir.string() + "; stop it or pass a different --state-dir");
    }
    auto hardening = prepareSandboxHardening(config);
    if (!hardening) {
        ::close(lockFd);
        return std::unexpected(hardening.error());
    }
    CgroupLayout layout = detectCgroupLayout();
    auto cgroups = CgroupManager::create(layout, config.poolId);
    const fs::path sandboxes = config.stateDir / "sandboxes";
    std::error_code ec;
    // Sandboxes of an earlier run died with it (bwrap --die-with-parent); their directories remain,
    // and their cgroups (the directory's name is the sandbox id).
    // A killed pool also leaves its workspace filesystem mounted there: detached, not emptied
    // file by file (WorkspaceFs::mount below makes a fresh one).
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
    if (auto err = ensurePrivateDirectory(sandboxes, passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    // The OCI runtimes' bundles and state, per sandbox; an earlier run's are stale.
    fs::remove_all(config.stateDir / "runtime", ec);
    if (auto err = ensurePrivateDirectory(config.stateDir / "runtime", passThrough); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    // Disk limits: one btrfs for every sandbox directory (workspace_fs.h), sized for every tier
    // at max_count. The image is sparse: only what sandboxes write takes host disk.
    std::unique_ptr<WorkspaceFs> workspaceFs;
    std::string diskLimits = "none (no tier has disk_mb)";
    int64_t imageBytes = 0;
    for (const auto &tier : config.tiers)
        imageBytes += tier.diskBytes * tier.maxCount;
    if (imageBytes > 0) {
        imageBytes = std::max<int64_t>(imageBytes + (256ll << 20), 1ll << 30);   // metadata; btrfs' minimum
        auto mounted = WorkspaceFs::mount(config.stateDir / "workspaces.btrfs", sandboxes, imageBytes);
        if (mounted) {
            workspaceFs = std::move(*mounted);
            diskLimits = "btrfs qgroups";
            ::chmod(sandboxes.c_str(), passThrough);   // the new filesystem's root
        } else {
            // The documented rule (docs/pool.md): run, loudly, like a pool without cgroups.
            diskLimits = "none (" + mounted.error().message + ")";
            spdlog::error("disk limits NOT enforced: {}; a sandbox can fill this host's disk through /workspace. "
                          "Give tiers disk_mb = 0 to silence this, or fix the cause", mounted.error().message);
            if (auto err = ensurePrivateDirectory(sandboxes, passThrough); !err.empty())
                return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
        }
    }
    auto snapshots = SnapshotStore::open(config.snapshotDir);
    if (!snapshots) {
        ::close(lockFd);
        return std::unexpected(snapshots.error());
    }
    PostMortemStore::Options pmOptions;
    pmOptions.dir = config.stateDir / "postmortems";
    pmOptions.retentionMs = config.postMortemRetentionHours * 3600 * 1000;
    pmOptions.maxCount = static_cast<size_t>(config.postMortemMaxCount);
    pmOptions.onDrop = [store = snapshots->get()](const PostMortemRecord &r) {
        if (!r.snapshotRef.empty())
            store->remove(r.snapshotRef);
    };
    auto postMortems = PostMortemStore::open(std::move(pmOptions));
    if (!postMortems) {
        ::close(lockFd);
        return std::unexpected(postMortems.error());
    }
    auto pool = std::unique_ptr<SandboxPool>(new SandboxPool(std::move(config), std::move(runtimes)));
    pool->m_snapshots = std::move(*snapshots);
    pool->m_postMortems = std::move(*postMortems);
    pool->pruneSnapshots(true);
    pool->m_lockFd = lockFd;
    pool->m_cgroupLayout = std::move(layout);
    pool->m_cgroups = std::move(cgroups);
    pool->m_workspaceFs = std::move(workspaceFs);
    pool->m_diskLimits = std::move(diskLimits);
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
    SandboxSpec spec;
    spec.id = id;
    spec.workspaceDir = dir / "workspace";
    spec.controlDir = dir / "ctl";
    spec.initPath = m_config.initPath;
    // Not on the workspace filesystem (mounted nosuid,nodev): runsc, in the sandbox's user
    // namespace, cannot remount a bundle there read-only without those locked flags.
    spec.runtimeDir = runtimeDirOf(id);
    spec.cpu = tier.config.cpu;
    spec.memoryBytes = tier.config.memoryBytes;
    spec.pids = tier.config.pids;
    spec.seccomp = m_hardening.seccomp;
    if (!m_hardening.etcDir.empty())
        spec.etcDir = minimalEtcFor(m_hardening.etcDir, tier.config.network == "allowlist");
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
    // With disk limits the sandbox directory is a subvolume held to the tier's disk_mb: the
    // workspace and a restore's staging directory beside it share the limit and the filesystem.
    uint64_t qgroupId = 0;
    WorkspaceFs *workspaceFs = tier.config.diskBytes > 0 ? m_workspaceFs.get() : nullptr;
    auto removeDir = [&] {
        fs::remove_all(spec.runtimeDir, ec);
        if (workspaceFs)
            workspaceFs->remove(id);
        else
            fs::remove_all(dir, ec);
    };
    if (workspaceFs) {
        auto created = workspaceFs->createLimited(id, tier.config.diskBytes);
        if (!created) {
            if (cgroup)
                cgroup->remove();
            return std::unexpected(created.error());
        }
        qgroupId = *created;
    }
    fs::create_directories(spec.workspaceDir, ec);
    if (!ec)
        fs::create_directories(spec.controlDir, ec);
    if (ec) {
        if (cgroup)
            cgroup->remove();
        removeDir();
        return fail(ErrorCode::FailedPrecondition, "cannot create " + dir.string() + ": " + ec.message() +
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
        removeDir();
        return std::unexpected(given.error());
    }
    if (auto st = startEgress(tier.config, id, dir, spec); !st) {
        if (cgroup)
            cgroup->remove();
        removeDir();
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
        removeDir();
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
    sandbox->qgroupId = qgroupId;
    sandbox->identity = std::move(identity);
    return sandbox;
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
    for (size_t i = 0; i < kLatencyBucketsUs.size(); ++i) {
        if (us <= kLatencyBucketsUs[i]) {
            tier.latencyCounts[i]++;
            return;
        }
    }
}

Result<ClaimResult> SandboxPool::claim(const std::string &tierName, const std::string &sessionId,
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
    ClaimResult result = finishClaimLocked(*tier, sandbox, warm, t0, sessionId, idempotencyKey);
    lock.unlock();
    for (auto &dead : deadWarm)
        destroy(dead);
    // A warm claim is routine (debug, off the claim's path at the default level); a cold one
    // says the warm pool ran dry, which an operator sizing warm_count wants to see.
    spdlog::log(warm ? spdlog::level::debug : spdlog::level::info, "claimed {} ({}, {:.2f} ms) for session '{}'",
                result.sandboxId, warm ? "warm" : "cold", result.claimMs, sessionId);
    return result;
}

ClaimResult SandboxPool::finishClaimLocked(Tier &tier, const std::shared_ptr<Sandbox> &sandbox, bool warm, int64_t t0,
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

    ClaimResult result;
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

std::optional<Result<ClaimResult>> SandboxPool::claimIfWarm(const std::string &tierName, const std::string &sessionId,
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
                return Result<ClaimResult>(*it->second);
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
    ClaimResult result = finishClaimLocked(*tier, sandbox, true, t0, sessionId, idempotencyKey, false);
    lock.unlock();
    spdlog::debug("claimed {} (warm, {:.3f} ms) for session '{}'", result.sandboxId, result.claimMs, sessionId);
    return Result<ClaimResult>(std::move(result));
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

InitExecRequest SandboxPool::initRequest(const ExecRequest &request) const
{
    InitExecRequest ir;
    ir.argv = request.argv;
    ir.env = request.env;
    ir.cwd = request.cwd;
    ir.stdinData = request.stdinData;
    ir.timeoutMs = request.timeoutMs > 0 ? std::min(request.timeoutMs, m_config.maxExecTimeoutMs) : m_config.defaultExecTimeoutMs;
    ir.maxOutputBytes = m_config.maxOutputBytes;
    return ir;
}

void SandboxPool::finishRecord(Sandbox &sandbox, const std::string &key, ExecRecord &record, const Result<InitExecResult> &r)
{
    {
        std::lock_guard lock(sandbox.execMutex);
        record.result = r;
        record.done = true;
        if (!r) {
            // The command may not have run at all (the init was unreachable): let a retry run it.
            sandbox.records.erase(key);
        } else {
            sandbox.recordBytes += record.bytes;
        }
        // Bound the records: drop the oldest finished ones beyond the count or byte limit.
        size_t scanned = 0;
        while ((sandbox.records.size() > static_cast<size_t>(m_config.execCachePerSandbox) ||
                sandbox.recordBytes > m_config.execCacheBytesPerSandbox) &&
               !sandbox.order.empty() && scanned++ < sandbox.order.size() + 1) {
            std::string oldest = sandbox.order.front();
            sandbox.order.pop_front();
            auto it = sandbox.records.find(oldest);
            if (it == sandbox.records.end())
                continue;
            if (!it->second->done) {
                sandbox.order.push_back(oldest);   // still running: keep it
                continue;
            }
            sandbox.recordBytes -= it->second->bytes;
            sandbox.records.erase(it);
        }
    }
    sandbox.execCv.notify_all();
}

Result<std::shared_ptr<SandboxPool::Sandbox>> SandboxPool::execTarget(const ExecRequest &request) const
{
    auto sandbox = findClaimed(request.sandboxId);
    if (sandbox && (request.argv.empty() || request.argv.front().empty()))
        return fail(ErrorCode::InvalidArgument, "exec needs a command in argv; for a shell line use [\"/bin/sh\", \"-c\", \"...\"]");
    return sandbox;
}

Result<ExecResult> SandboxPool::exec(const ExecRequest &request, const ChunkSink &sink)
{
    auto found = execTarget(request);
    if (!found)
        return std::unexpected(found.error());
    auto sandbox = *found;
    auto grants = egressGrants(request);
    if (!grants)
        return std::unexpected(grants.error());

    const InitExecRequest ir = initRequest(request);
    const int64_t oomBefore = sandbox->cgroup ? sandbox->cgroup->oomKills() : -1;
    OutputTail tail;
    auto watch = m_deadlines && sandbox->cgroup ? m_deadlines->arm(sandbox->cgroup->dirs(), ir.timeoutMs) : nullptr;
    auto keepFailure = [&](const Result<InitExecResult> &r) {
        if (r)
            if (auto pm = execFailure(*sandbox, request.argv, *r, tail)) {
                sandbox->captureQueued();
                capturePostMortem(sandbox, std::move(*pm), watch);
            }
    };
    if (request.idempotencyKey.empty() || m_config.execCachePerSandbox == 0) {
        const uint64_t holder = holdEgress(request.sandboxId, *grants);
        auto r = sandbox->init.exec(ir, [&](int stream, std::string_view chunk) {
            tail.add(stream, chunk);
            if (sink)
                sink(stream, chunk);
        });
        revokeEgress(request.sandboxId, holder);
        nameExit(*sandbox, oomBefore, r);
        keepFailure(r);
        if (!r)
            return std::unexpected(r.error());
        return ExecResult{*r, false};
    }

    std::shared_ptr<ExecRecord> record;
    {
        std::unique_lock lock(sandbox->execMutex);
        auto it = sandbox->records.find(request.idempotencyKey);
        if (it != sandbox->records.end()) {
            auto earlier = it->second;
            // A repeat (the broker retried after losing the answer): wait for the first run if it
            // is still going, then answer with what it recorded. The command does not run again.
            sandbox->execCv.wait(lock, [&] { return earlier->done; });
            auto chunks = earlier->chunks;
            auto result = earlier->result;
            lock.unlock();
            if (!result)
                return std::unexpected(result.error());
            if (sink)
                for (const auto &[stream, chunk] : chunks)
                    sink(stream, chunk);
            return ExecResult{*result, true};
        }
        record = std::make_shared<ExecRecord>();
        sandbox->records.emplace(request.idempotencyKey, record);
        sandbox->order.push_back(request.idempotencyKey);
    }

    const int64_t maxRecorded = m_config.maxOutputBytes;
    const uint64_t holder = holdEgress(request.sandboxId, *grants);
    auto r = sandbox->init.exec(ir, [&](int stream, std::string_view chunk) {
        tail.add(stream, chunk);
        if (record->bytes < maxRecorded) {
            record->chunks.emplace_back(stream, std::string(chunk));
            record->bytes += static_cast<int64_t>(chunk.size());
        }
        if (sink)
            sink(stream, chunk);
    });
    revokeEgress(request.sandboxId, holder);
    nameExit(*sandbox, oomBefore, r);
    keepFailure(r);
    finishRecord(*sandbox, request.idempotencyKey, *record, r);
    if (!r)
        return std::unexpected(r.error());
    return ExecResult{*r, false};
}

bool SandboxPool::execAsync(const ExecRequest &request, ChunkSink sink, ExecDone done)
{
    auto found = execTarget(request);
    if (!found) {
        done(std::unexpected(found.error()));
        return true;
    }
    auto sandbox = *found;
    const bool keyed = !request.idempotencyKey.empty() && m_config.execCachePerSandbox > 0;
    auto grants = egressGrants(request);
    if (!grants) {
        done(std::unexpected(grants.error()));
        return true;
    }

    // A repeat of a finished run is answered from its record, inline; one still running would
    // have to be waited for: the blocking path does that.
    auto replay = [&](std::unique_lock<std::mutex> &lock) -> std::optional<bool> {
        auto it = sandbox->records.find(request.idempotencyKey);
        if (it == sandbox->records.end())
            return std::nullopt;
        auto earlier = it->second;
        if (!earlier->done)
            return false;
        auto chunks = earlier->chunks;
        auto result = earlier->result;
        lock.unlock();
        if (!result) {
            done(std::unexpected(result.error()));
            return true;
        }
        if (sink)
            for (const auto &[stream, chunk] : chunks)
                sink(stream, chunk);
        done(ExecResult{*result, true});
        return true;
    };
    if (keyed) {
        std::unique_lock lock(sandbox->execMutex);
        if (auto answered = replay(lock))
            return *answered;
    }

    auto connected = InitExecLoop::connect(sandbox->init.socketPath());
    if (!connected) {
        done(std::unexpected(connected.error()));
        return true;
    }
    if (!*connected)
        return false;   // backlog full: a blocking connect waits for room
    const int fd = **connected;

    const InitExecRequest ir = initRequest(request);
    const int64_t oomBefore = sandbox->cgroup ? sandbox->cgroup->oomKills() : -1;
    // The last output of each stream and, near the deadline, the process list: for a post-mortem.
    auto tail = std::make_shared<OutputTail>();
    auto watch = m_deadlines && sandbox->cgroup ? m_deadlines->arm(sandbox->cgroup->dirs(), ir.timeoutMs) : nullptr;
    sink = [tail, inner = std::move(sink)](int stream, std::string_view chunk) {
        tail->add(stream, chunk);
        if (inner)
            inner(stream, chunk);
    };
    // On the exec loop's thread: a failure is captured on the capture thread, and the result is
    // answered after it, so the next command finds the workspace as the failure left it.
    auto finish = [this, sandbox, tail, watch, argv = request.argv](Result<InitExecResult> r, const ExecDone &doneFn) {
        if (r && m_captures)
            if (auto pm = execFailure(*sandbox, argv, *r, *tail)) {
                sandbox->captureQueued();
                m_captures->post([this, sandbox, pm = std::move(*pm), watch, exit = *r, doneFn]() mutable {
                    capturePostMortem(sandbox, std::move(pm), watch);
                    doneFn(ExecResult{exit, false});
                });
                return;
            }
        if (!r)
            doneFn(std::unexpected(r.error()));
        else
            doneFn(ExecResult{*r, false});
    };
    // The grants hold from the moment the command can start until its exit reaches us.
    if (!keyed) {
        const uint64_t holder = holdEgress(request.sandboxId, *grants);
        m_execLoop.submit(fd, ir, std::move(sink), [this, sandbox, holder, oomBefore, finish, done = std::move(done)](Result<InitExecResult> r) {
            revokeEgress(sandbox->id, holder);
            nameExit(*sandbox, oomBefore, r);
            finish(std::move(r), done);
        });
        return true;
    }

    auto record = std::make_shared<ExecRecord>();
    {
        std::unique_lock lock(sandbox->execMutex);
        if (auto answered = replay(lock)) {   // the same key arrived meanwhile
            ::close(fd);
            return *answered;
        }
        sandbox->records.emplace(request.idempotencyKey, record);
        sandbox->order.push_back(request.idempotencyKey);
    }
    const int64_t maxRecorded = m_config.maxOutputBytes;
    // The sink and done run on the exec loop's thread, one after the other: record needs no lock
    // until finishRecord publishes it.
    auto recordingSink = [record, maxRecorded, sink = std::move(sink)](int stream, std::string_view chunk) {
        if (record->bytes < maxRecorded) {
            record->chunks.emplace_back(stream, std::string(chunk));
            record->bytes += static_cast<int64_t>(chunk.size());
        }
        if (sink)
            sink(stream, chunk);
    };
    const uint64_t holder = holdEgress(request.sandboxId, *grants);
    m_execLoop.submit(fd, ir, std::move(recordingSink),
                      [this, sandbox, holder, oomBefore, key = request.idempotencyKey, record, finish, done = std::move(done)](Result<InitExecResult> r) {
                          revokeEgress(sandbox->id, holder);
                          nameExit(*sandbox, oomBefore, r);
                          finishRecord(*sandbox, key, *record, r);
                          finish(std::move(r), done);
                      });
    return true;
}

Result<InitFile> SandboxPool::readFile(const std::string &sandboxId, const std::string &path, int64_t maxBytes)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.readFile(path, maxBytes);
}

Result<int64_t> SandboxPool::writeFile(const std::string &sandboxId, const std::string &path, std::string_view content,
                                       uint32_t mode)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.writeFile(path, content, mode == 0 ? 0644 : mode);
}

Result<std::vector<InitDirEntry>> SandboxPool::listDir(const std::string &sandboxId, const std::string &path)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.listDir(path);
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

PoolStats SandboxPool::stats() const
{
    PoolStats s;
    s.poolId = m_config.poolId;
    s.host = hostName();
    s.cgroupVersion = m_cgroups || m_cgroupLayout.version == "none"
                          ? m_cgroupLayout.statusText()
                          : m_cgroupLayout.version + " (not writable: no limits enforced)";
    s.diskLimits = m_diskLimits;
    s.uptimeMs = (monotonicUs() - m_startedUs) / 1000;
    std::lock_guard lock(m_mutex);
    for (const auto &tier : m_tiers) {
        TierStats t;
        t.config = tier->config;
        t.warm = static_cast<int>(tier->warm.size());
        t.claimed = tier->claimed;
        t.starting = tier->starting;
        t.hitRate = tier->claims ? static_cast<double>(tier->warmClaims) / static_cast<double>(tier->claims) : 0;
        t.coldFallbacks = tier->coldFallbacks;
        if (tier->starts > 0 && tier->startUsTotal > 0)
            t.refillPerSecond = kRefillThreadsPerTier * 1e6 * static_cast<double>(tier->starts) / static_cast<double>(tier->startUsTotal);
        t.latencyBucketsUs = kLatencyBucketsUs;
        t.latencyCounts = tier->latencyCounts;
        t.isolation = tier->isolation;
        s.tiers.push_back(std::move(t));
    }
    return s;
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

void SandboxPool::nameExit(const Sandbox &sandbox, int64_t oomBefore, Result<InitExecResult> &r)
{
    if (!r) {
        // The init went away and the cgroup saw an OOM kill meanwhile: under gVisor the
        // command's memory is the sandbox kernel's, so the host kills the whole sandbox.
        if (oomBefore >= 0 && sandbox.cgroup && sandbox.cgroup->oomKills() > oomBefore) {
            InitExecResult killed;
            killed.exitCode = -1;
            killed.signal = 9;
            killed.reason = "oom_killed";
            r = killed;
        }
        return;
    }
    if (r->timedOut) {
        r->reason = "timeout";
        return;
    }
    if (r->signal == 0 && r->exitCode == 0)
        return;
    if (oomBefore >= 0 && sandbox.cgroup && sandbox.cgroup->oomKills() > oomBefore)
        r->reason = "oom_killed";
    else if (sandbox.workspaceFs && workspaceFull(sandbox))
        r->reason = "disk_full";   // a few sysfs reads, only for a command that failed
}

bool SandboxPool::workspaceFull(const Sandbox &sandbox)
{
    // Within 64 KiB of the limit: a write that would cross it fails without using it up, and
    // btrfs counts its metadata in blocks of 16 KiB.
    auto full = [&] {
        const int64_t used = sandbox.workspaceFs->usedBytes(sandbox.qgroupId);
        return used >= 0 && used + kDiskFullMarginBytes >= sandbox.tier->config.diskBytes;
    };
    if (!full())
        return false;
    // Files deleted since btrfs' last commit still count: settle them first (a commit, a few ms,
    // only for a failed command in a workspace that looks full), or a command failing for another
    // reason just after `rm` would be named disk_full.
    sandbox.workspaceFs->commit();
    return full();
}

int64_t SandboxPool::workspaceUsedBytes(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end())
            return -1;
        sandbox = it->second;
    }
    return sandbox->workspaceFs ? sandbox->workspaceFs->usedBytes(sandbox->qgroupId) : -1;
}

std::vector<fs::path> SandboxPool::cgroupDirs(const std::string &sandboxId) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_sandboxes.find(sandboxId);
    if (it == m_sandboxes.end() || !it->second->cgroup)
        return {};
    return it->second->cgroup->dirs();
}

std::vector<fs::path> SandboxPool::cgroupPoolDirs() const
{
    return m_cgroups ? m_cgroups->poolDirs() : std::vector<fs::path>{};
}

std::vector<CgroupSample> SandboxPool::samples(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end())
            return {};
        sandbox = it->second;
    }
    std::lock_guard lock(sandbox->sampleMutex);
    return {sandbox->samples.begin(), sandbox->samples.end()};
}

Result<std::vector<CgroupSample>> SandboxPool::claimedSamples(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end() || it->second->state == Sandbox::State::Warm)
            return noSuchSandbox(sandboxId);
        sandbox = it->second;
    }
    std::lock_guard lock(sandbox->sampleMutex);
    return std::vector<CgroupSample>(sandbox->samples.begin(), sandbox->samples.end());
}

void SandboxPool::samplerLoop()
{
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        std::vector<std::shared_ptr<Sandbox>> claimed;
        {
            std::unique_lock lock(m_mutex);
            next += std::chrono::seconds(1);
            if (m_cv.wait_until(lock, next, [&] { return m_stopping; }))
                return;
            for (const auto &[id, sb] : m_sandboxes)
                if (sb->state == Sandbox::State::Claimed && sb->cgroup)
                    claimed.push_back(sb);
        }
        // Reading a few files per sandbox: outside m_mutex.
        for (const auto &sb : claimed) {
            CgroupSample sample = sb->cgroup->sample();
            if (sb->workspaceFs)
                sample.diskBytes = sb->workspaceFs->usedBytes(sb->qgroupId);
            std::lock_guard lock(sb->sampleMutex);
            sb->samples.push_back(sample);
            while (sb->samples.size() > kSamplesKept)
                sb->samples.pop_front();
        }
        const auto now = std::chrono::steady_clock::now();
        if (next < now - std::chrono::seconds(5))
            next = now;   // the host was suspended or overloaded: do not catch up in a burst
    }
}

void SandboxPool::monitorLoop()
{
    for (;;) {
        std::vector<std::shared_ptr<Sandbox>> watched;
        std::vector<pollfd> fds;
        fds.push_back({m_wakeFd, POLLIN, 0});
        {
            std::lock_guard lock(m_mutex);
            if (m_stopping)
                return;
            for (const auto &[id, sb] : m_sandboxes) {
                if (sb->state == Sandbox::State::Dead || sb->running->exitFd() < 0)
                    continue;
                watched.push_back(sb);
                fds.push_back({sb->running->exitFd(), POLLIN, 0});
            }
        }
        int rc = ::poll(fds.data(), fds.size(), -1);
        if (rc < 0 && errno != EINTR)
            return;
        if (fds[0].revents & POLLIN) {
            uint64_t count;
            (void)!::read(m_wakeFd, &count, sizeof count);
        }
        std::vector<std::shared_ptr<Sandbox>> toDestroy, crashed;
        for (size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            auto &sb = watched[i - 1];
            auto reason = sb->running->exitReason();
            if (!reason)
                continue;
            std::lock_guard lock(m_mutex);
            auto it = m_sandboxes.find(sb->id);
            if (it == m_sandboxes.end() || it->second != sb)
                continue;   // released meanwhile
            if (sb->state == Sandbox::State::Warm) {
                auto &warm = sb->tier->warm;
                warm.erase(std::remove(warm.begin(), warm.end(), sb), warm.end());
                m_sandboxes.erase(it);
                toDestroy.push_back(sb);
                spdlog::warn("warm sandbox {} died ({}); starting a replacement", sb->id, *reason);
            } else {
                sb->state = Sandbox::State::Dead;
                sb->deathReason = *reason;
                spdlog::warn("claimed sandbox {} (session '{}') died: {}", sb->id, sb->sessionId, *reason);
                crashed.push_back(sb);
            }
        }
        for (auto &sb : crashed) {
            PostMortemRecord pm = baseRecord(*sb);
            pm.reason = "crashed";
            pm.detail = "the sandbox's init died (" + sb->deathReason + ")";
            sb->captureQueued();
            m_captures->post([this, sb, pm]() mutable { capturePostMortem(sb, std::move(pm), nullptr); });
        }
        if (!toDestroy.empty())
            m_cv.notify_all();
        for (auto &sb : toDestroy)
            destroy(sb);
    }
}

// ---- snapshots and post-mortems ----

namespace {

std::string commandLine(const std::vector<std::string> &argv)
{
    std::string s;
    for (const auto &a : argv) {
        if (!s.empty())
            s += ' ';
        s += a;
    }
    if (s.size() > 200)
        s = s.substr(0, 200) + "...";
    return s;
}

std::string mib(int64_t bytes)
{
    return std::to_string(bytes >> 20) + " MiB";
}

// The cgroup's memory high-water mark (v1 memory.max_usage_in_bytes, v2 memory.peak), or -1.
int64_t peakMemory(const std::vector<fs::path> &dirs)
{
    for (const auto &dir : dirs)
        for (const char *name : {"memory.max_usage_in_bytes", "memory.peak"}) {
            std::ifstream in(dir / name);
            int64_t v;
            if (in >> v)
                return v;
        }
    return -1;
}

} // namespace

Result<SnapshotInfo> SandboxPool::snapshot(const std::string &sandboxId)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    auto info = m_snapshots->create((*sandbox)->dir / "workspace", sandboxId, ownerMap(**sandbox));
    if (info)
        spdlog::info("snapshot {} of {}: {} entries, {} bytes, {:.1f} ms", info->ref, sandboxId, info->fileCount,
                     info->sizeBytes, info->durationMs);
    pruneSnapshots(false);
    return info;
}

Result<SnapshotInfo> SandboxPool::restore(const std::string &sandboxId, const std::string &ref)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    auto info = m_snapshots->restore(ref, (*sandbox)->dir / "workspace", (*sandbox)->dir / "scratch", ownerMap(**sandbox));
    if (info)
        spdlog::info("restored {} into {}: {} entries, {:.1f} ms", ref, sandboxId, info->fileCount, info->durationMs);
    else
        spdlog::warn("restore of {} into {} failed: {}", ref, sandboxId, info.error().message);
    return info;
}

PostMortemRecord SandboxPool::baseRecord(const Sandbox &sandbox) const
{
    PostMortemRecord pm;
    pm.sandboxId = sandbox.id;
    {
        std::lock_guard lock(m_mutex);
        pm.sessionId = sandbox.sessionId;
    }
    pm.poolId = m_config.poolId;
    pm.tier = sandbox.tier->config.name;
    pm.runtime = sandbox.tier->config.runtime;
    pm.cpuLimit = sandbox.tier->config.cpu;
    pm.memoryLimitBytes = sandbox.tier->config.memoryBytes;
    pm.pidsLimit = sandbox.tier->config.pids;
    pm.diskLimitBytes = sandbox.tier->config.diskBytes;
    pm.timeUnixMs = nowUnixMs();
    return pm;
}

std::optional<PostMortemRecord> SandboxPool::execFailure(const Sandbox &sandbox, const std::vector<std::string> &argv,
                                                         const InitExecResult &exit, const OutputTail &tail) const
{
    if (exit.reason.empty() && exit.exitCode == 0 && exit.signal == 0)
        return std::nullopt;
    PostMortemRecord pm = baseRecord(sandbox);
    pm.reason = exit.reason.empty() ? (exit.signal == SIGSYS ? "seccomp_killed" : "nonzero_exit") : exit.reason;
    pm.exitCode = exit.exitCode;
    pm.signal = exit.signal;
    pm.durationMs = exit.durationMs;
    pm.argv = argv;
    pm.lastStdout = tail.tail(1);
    pm.lastStderr = tail.tail(2);
    pm.stdoutBytes = tail.bytes(1);
    pm.stderrBytes = tail.bytes(2);
    const std::string cmd = "'" + commandLine(argv) + "'";
    if (pm.reason == "oom_killed")
        pm.detail = cmd + " was killed by the OOM killer at the tier's memory limit of " + mib(pm.memoryLimitBytes);
    else if (pm.reason == "disk_full")
        pm.detail = cmd + " failed with the workspace full: the tier's disk limit of " + mib(pm.diskLimitBytes) +
                    " is used up (delete files in /workspace or use a tier with more disk_mb)";
    else if (pm.reason == "timeout")
        pm.detail = cmd + " timed out after " + std::to_string(static_cast<int64_t>(exit.durationMs)) + " ms and was killed";
    else if (pm.reason == "seccomp_killed")
        pm.detail = cmd + " was killed by SIGSYS: a seccomp filter refused a system call (the sandbox's own filter answers "
                          "EPERM, so the program or a library it loaded installed one that kills; docs/security.md)";
    else if (exit.signal != 0)
        pm.detail = cmd + " was killed by signal " + std::to_string(exit.signal);
    else
        pm.detail = cmd + " exited with " + std::to_string(exit.exitCode);
    return pm;
}

void SandboxPool::capturePostMortem(const std::shared_ptr<Sandbox> &sandbox, PostMortemRecord pm,
                                    const std::shared_ptr<DeadlineWatcher::Watch> &watch)
{
    const int64_t t0 = monotonicUs();
    // A plain non-zero exit does not replace the post-mortem of a worse failure of the sandbox.
    auto earlier = m_postMortems->get(sandbox->id);
    const bool keepEarlier = earlier && pm.reason == "nonzero_exit" && earlier->reason != "nonzero_exit";
    if (!keepEarlier) {
        std::vector<fs::path> dirs = sandbox->cgroup ? sandbox->cgroup->dirs() : std::vector<fs::path>{};
        if (watch && pm.reason == "timeout") {
            std::lock_guard lock(watch->mutex);
            if (watch->processes) {
                pm.processes = *watch->processes;
                pm.processesNote = "taken " + std::to_string(watch->firedBeforeDeadlineMs) +
                                   " ms before the deadline, before the init killed the command's process group";
            }
        }
        if (pm.processesNote.empty()) {
            if (dirs.empty()) {
                pm.processesNote = "not available: the pool runs without cgroups";
            } else {
                pm.processes = readCgroupProcesses(dirs);
                pm.processesNote = pm.reason == "oom_killed"
                                       ? "after the OOM kill: what was left in the sandbox's cgroup (the killed process is gone)"
                                       : "after the failure: what was still in the sandbox's cgroup";
            }
        }
        pm.samples = samples(sandbox->id);
        if (sandbox->cgroup) {
            CgroupSample last = sandbox->cgroup->sample();
            if (sandbox->workspaceFs)
                last.diskBytes = sandbox->workspaceFs->usedBytes(sandbox->qgroupId);
            // At an OOM kill the cgroup was at its limit: the sample at the failure carries the
            // high-water mark, so the curve shows where it died, not what was left after.
            if (pm.reason == "oom_killed")
                last.memoryBytes = std::max(last.memoryBytes, peakMemory(dirs));
            last.unixMs = pm.timeUnixMs;
            pm.samples.push_back(last);
        }
        auto snap = m_snapshots->create(sandbox->dir / "workspace", sandbox->id, ownerMap(*sandbox));
        if (snap) {
            pm.snapshotRef = snap->ref;
            pm.snapshotSizeBytes = snap->sizeBytes;
            pm.snapshotMs = snap->durationMs;
        } else {
            pm.snapshotError = snap.error().message;
        }
        if (auto saved = m_postMortems->save(pm); !saved) {
            spdlog::error("post-mortem of {} not kept: {}", sandbox->id, saved.error().message);
            if (snap)
                m_snapshots->remove(snap->ref);
        } else {
            spdlog::info("post-mortem of {} (session '{}'): {}; snapshot {} ({} bytes, {:.1f} ms); captured in {:.1f} ms",
                         sandbox->id, pm.sessionId, pm.detail, pm.snapshotRef.empty() ? pm.snapshotError : pm.snapshotRef,
                         pm.snapshotSizeBytes, pm.snapshotMs, static_cast<double>(monotonicUs() - t0) / 1000.0);
        }
    }
    {
        std::lock_guard lock(sandbox->captureMutex);
        sandbox->pendingCaptures--;
    }
    sandbox->captureCv.notify_all();
}

void SandboxPool::pruneSnapshots(bool now)
{
    if (m_config.snapshotRetentionHours <= 0)
        return;
    // At most every 10 minutes: a listing of the directory per snapshot would cost more than it saves.
    const int64_t t = monotonicUs();
    int64_t last = m_lastSnapshotPruneUs.load();
    if (!now && last != 0 && t - last < 600ll * 1000 * 1000)
        return;
    if (!m_lastSnapshotPruneUs.compare_exchange_strong(last, t))
        return;   // another thread is at it
    std::set<std::string> kept;
    for (const auto &pm : m_postMortems->list("", 0))
        kept.insert(pm.snapshotRef);
    const size_t dropped = m_snapshots->prune(nowUnixMs() - m_config.snapshotRetentionHours * 3600 * 1000,
                                              [&](const std::string &ref) { return kept.count(ref) > 0; });
    if (dropped > 0)
        spdlog::info("{} snapshots older than {} hours deleted (snapshot_retention_hours)", dropped,
                     m_config.snapshotRetentionHours);
}

} // namespace paddock::pool
