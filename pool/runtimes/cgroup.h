#pragma once
// cgroup limits for sandboxes: the host's layout is detected once at pool start, then each sandbox
// gets its own cgroup <base>/paddock/<pool-id>/<sandbox-id> with the tier's memory, cpu and pids
// limits. Three layouts exist:
//   v2      one unified hierarchy (memory.max, cpu.max, pids.max, memory.events);
//   v1      one hierarchy per controller (memory.limit_in_bytes, cpu.cfs_quota_us, pids.max,
//           memory.oom_control), each under /sys/fs/cgroup/<controller>;
//   hybrid  v1 controllers plus a v2 mount without them (systemd's "hybrid"): limits go through
//           v1, exactly as for v1.
// With none of them (or when nothing can be written, e.g. not root) sandboxes run without limits;
// the pool logs that as an error and Status.cgroup_version says so.
//
// <base> is the pool's own cgroup (from /proc/self/cgroup) when paddock/ can be created and, on
// v2, its controllers enabled there; otherwise the root of the hierarchy.
//
// Threads: CgroupManager is immutable after create() and shared; SandboxCgroup methods only read
// and write files and may be called from any thread. A CommandUsageMeter belongs to the one
// command it measures: started and finished by whichever thread runs that command's exec.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::pool {

struct CgroupLayout {
    std::string version = "none";   // "v2", "v1" or "none" (hybrid is "v1" with hybrid = true)
    bool hybrid = false;
    std::filesystem::path unifiedMount;                             // the cgroup2 mount, if any
    std::map<std::string, std::filesystem::path> v1Mounts;          // controller -> its hierarchy's directory
    std::map<std::string, std::string> selfPaths;                   // from /proc/self/cgroup; "" is the v2 line
    // What Status.cgroup_version shows: "v2", "v1", "v1 (hybrid)" or "none (no limits enforced)".
    std::string statusText() const;
};

// Reads /proc/self/mountinfo and /proc/self/cgroup (the paths are parameters for tests).
CgroupLayout detectCgroupLayout(const std::filesystem::path &mountinfo = "/proc/self/mountinfo",
                                const std::filesystem::path &selfCgroup = "/proc/self/cgroup");

struct CgroupLimits {
    double cpu = 0;            // cores; 0: no cpu limit
    int64_t memoryBytes = 0;   // 0: no memory limit
    int64_t pids = 0;          // 0: no pids limit
};

// CFS bandwidth control's counters from cpu.stat: the periods in which the cgroup's tasks ran, the
// periods in which they used the whole quota and waited for the next one, and how long they waited.
// v2 names the wait throttled_usec; v1's cpu controller names it throttled_time, in nanoseconds.
struct CpuThrottling {
    int64_t periods = -1;            // nr_periods; -1: not known (no cpu controller, unreadable)
    int64_t throttledPeriods = -1;   // nr_throttled
    int64_t throttledUs = -1;        // throttled_usec, or throttled_time / 1000
    bool known() const { return periods >= 0 && throttledPeriods >= 0; }
    // this - since, counter by counter; unknown when either is.
    CpuThrottling since(const CpuThrottling &earlier) const;
};

// The counters in the text of a v1 or v2 cpu.stat (which one is told by its keys); fields the text
// lacks stay -1 (a v2 cpu.stat without the cpu controller has usage_usec only).
CpuThrottling parseCpuStat(std::string_view text);

struct CgroupSample {
    int64_t unixMs = 0;
    int64_t memoryBytes = -1;   // memory.current / memory.usage_in_bytes; -1 when unreadable
    int64_t cpuUsageUs = -1;    // cumulative cpu time of the cgroup
    int64_t pids = -1;          // pids.current
    int64_t diskBytes = -1;     // not the cgroup's: the sandbox directory's disk use (workspace_fs.h), -1 without disk limits
    CpuThrottling throttling;   // since markStarted(): a runtime's own boot is not the session's
};

// What one command used of its sandbox's cgroup, read when its exit is known: a command shorter
// than the pool's sampling period has these figures and no sample.
struct CommandUsage {
    int64_t peakMemoryBytes = -1;   // the cgroup's memory high-water mark; -1: not known
    int64_t cpuTimeUs = -1;         // CPU time the cgroup used from the command's start to its exit; -1: not known
    // What peakMemoryBytes covers: "command" (reset at the command's start, no other command of
    // the sandbox ran meanwhile), "concurrent" (others did, and their memory counts too) or
    // "sandbox" (the kernel refused the reset: the peak since the sandbox started). "" without a
    // peak.
    std::string peakScope;
};

// Measures one command, from SandboxCgroup::startCommand() just before it starts to finish() once
// its exit is known. The CPU time is the cgroup's (v2 cpu.stat usage_usec, v1 cpuacct.usage)
// between the two, so a process the command left running in the background counts too. The peak
// is reset at the start where the kernel allows: v1 by writing 0 to memory.max_usage_in_bytes
// (for every reader: so only when no other command of the sandbox runs), v2 by writing to
// memory.peak, which kernels from 6.12 take as a reset for reads through the same open file (so
// the meter keeps it open). Older kernels refuse that write: the peak is then the cgroup's
// lifetime one.
class CommandUsageMeter {
public:
    ~CommandUsageMeter();
    CommandUsageMeter(const CommandUsageMeter &) = delete;
    CommandUsageMeter &operator=(const CommandUsageMeter &) = delete;
    // Reads the figures; once (a second call answers nothing known).
    CommandUsage finish();

private:
    friend class SandboxCgroup;
    // The sandbox's commands in flight, shared by its cgroup and their meters (which may outlive it).
    struct Commands {
        std::mutex mutex;
        int running = 0;          // guarded by mutex
        uint64_t starts = 0;      // guarded by mutex: every start so far
        bool resetWorks = false;  // guarded by mutex: a v1 reset has worked in this cgroup
    };
    CommandUsageMeter() = default;

    std::shared_ptr<Commands> m_commands;
    std::string m_version;
    std::filesystem::path m_cpuFile;   // v2 cpu.stat or v1 cpuacct.usage; empty without one
    int m_peakFd = -1;                 // memory.peak (v2) or memory.max_usage_in_bytes (v1)
    int64_t m_cpuAtStartUs = -1;
    uint64_t m_startIndex = 0;
    bool m_overlapped = false;         // another command was running at the start
    bool m_peakReset = false;
    bool m_finished = false;
};

class SandboxCgroup {
public:
    ~SandboxCgroup();
    SandboxCgroup(const SandboxCgroup &) = delete;
    SandboxCgroup &operator=(const SandboxCgroup &) = delete;

    // The cgroup.procs file of each hierarchy, opened for writing and close-on-exec. A child
    // writes "0" to each between fork and exec and so runs in the cgroup before its first
    // instruction. Valid until remove().
    const std::vector<int> &procsFds() const { return m_procsFds; }
    // The directories (one on v2, one per controller hierarchy on v1).
    const std::vector<std::filesystem::path> &dirs() const { return m_dirs; }
    // The pool's copies are closed once the runtime has started (the child has its own).
    void closeProcsFds();
    // How many processes the OOM killer has killed in this cgroup so far (-1: unknown).
    int64_t oomKills() const;
    // Once the runtime has started (the init waits for work): later samples count CPU throttling
    // from here, so that a runtime whose boot is CPU-heavy under a small quota (runsc) does not
    // show its boot as the session's throttling. Call before the sandbox is shared.
    void markStarted();
    CgroupSample sample() const;
    // Starts measuring a command about to start in this sandbox (CommandUsageMeter).
    std::shared_ptr<CommandUsageMeter> startCommand() const;
    // Kills whatever still runs in the cgroup and removes its directories. Idempotent.
    void remove();

private:
    friend class CgroupManager;
    SandboxCgroup() = default;

    std::string m_version;
    std::vector<std::filesystem::path> m_dirs;
    std::filesystem::path m_memoryDir, m_cpuacctDir, m_pidsDir, m_cpuDir;
    std::vector<int> m_procsFds;
    CpuThrottling m_throttlingAtStart;   // written by markStarted() only
    std::shared_ptr<CommandUsageMeter::Commands> m_commands = std::make_shared<CommandUsageMeter::Commands>();
    // memory.events (v2) or memory.oom_control (v1), opened once: oomKills() runs before every
    // exec, on its latency path, and a pread of an open file costs a fraction of an open, read and
    // close by path. Closed by the destructor only (never while an exec may read it); it keeps
    // working until the cgroup is removed and fails (-1) after.
    int m_oomFd = -1;
    bool m_removed = false;
};

// Without creating anything: "" when this process may create the sandboxes' cgroups (in the v1
// memory hierarchy, or the v2 unified one), else why not. For paddock-pool --check-config.
std::string cgroupAccessProblem(const CgroupLayout &layout, const std::string &poolId);

class CgroupManager {
public:
    // nullptr (after logging why, at error level) when the layout is "none" or the pool cannot
    // create its cgroups: sandboxes then run without limits.
    static std::unique_ptr<CgroupManager> create(const CgroupLayout &layout, const std::string &poolId);

    Result<std::unique_ptr<SandboxCgroup>> createSandbox(const std::string &sandboxId, const CgroupLimits &limits) const;
    // Kills and removes the cgroup of a sandbox left by an earlier run, if it exists.
    void removeLeftover(const std::string &sandboxId) const;
    // The pool's own directories (paddock/<pool id>, one per hierarchy). The pool never removes
    // them: pools with the same id (the default is the host name) share them.
    const std::vector<std::filesystem::path> &poolDirs() const { return m_poolDirs; }

private:
    CgroupManager(CgroupLayout layout, std::map<std::string, std::filesystem::path> controllerDirs);
    CgroupLayout m_layout;
    // The pool's directory per controller: v2 has one entry ""; v1 has memory and, when mounted,
    // cpu, cpuacct and pids (co-mounted controllers share a directory).
    std::map<std::string, std::filesystem::path> m_controllerDirs;
    std::vector<std::filesystem::path> m_poolDirs;   // the distinct values of m_controllerDirs
};

} // namespace paddock::pool
