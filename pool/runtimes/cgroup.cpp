#include "pool/runtimes/cgroup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <signal.h>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

// A short CFS period bounds how long a throttled sandbox waits: with 100 ms (the kernel default) a
// 0.5-core tier that used its quota stalls for up to 50 ms; with 10 ms, for up to 5 ms.
constexpr int64_t kCpuPeriodUs = 10000;
constexpr int kRemoveAttempts = 300;   // x 10 ms: processes killed must leave before rmdir works

std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep))
        out.push_back(cur);
    return out;
}

// "" on success, else the error.
std::string writeFile(const fs::path &path, const std::string &value)
{
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return std::string(std::strerror(errno));
    ssize_t n;
    do {
        n = ::write(fd, value.data(), value.size());
    } while (n < 0 && errno == EINTR);
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(value.size()))
        return std::string(std::strerror(err));
    return {};
}

std::optional<std::string> readFile(const fs::path &path)
{
    std::ifstream in(path);
    if (!in)
        return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int64_t readInt(const fs::path &path)
{
    auto text = readFile(path);
    if (!text)
        return -1;
    try {
        return std::stoll(*text);
    } catch (...) {
        return -1;
    }
}

// The value of "key N" in the text of a flat keyed file (memory.events, memory.oom_control,
// cpu.stat); -1 when the key is missing.
int64_t keyedValue(std::string_view text, std::string_view key)
{
    while (!text.empty()) {
        const size_t end = std::min(text.find('\n'), text.size());
        const std::string_view line = text.substr(0, end);
        text.remove_prefix(std::min(end + 1, text.size()));
        if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
            int64_t v = -1;
            const std::string_view digits = line.substr(key.size() + 1);
            std::from_chars(digits.data(), digits.data() + digits.size(), v);
            return v;
        }
    }
    return -1;
}

int64_t readKey(const fs::path &path, const std::string &key)
{
    auto text = readFile(path);
    return text ? keyedValue(*text, key) : -1;
}

std::string unescapeMount(const std::string &s)
{
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
            i += 3;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

// The directory of the calling process's cgroup in the hierarchy mounted at mount (whose root
// inside the hierarchy is mountRoot).
fs::path ownDir(const fs::path &mount, const std::string &mountRoot, const std::string &selfPath)
{
    std::string rel = selfPath;
    if (mountRoot != "/" && rel.rfind(mountRoot, 0) == 0)
        rel = rel.substr(mountRoot.size());
    while (!rel.empty() && rel.front() == '/')
        rel.erase(rel.begin());
    return rel.empty() ? mount : mount / rel;
}

// Where a pool's cgroups may go in one hierarchy, first choice first: its own cgroup there (a
// limit put on the pool then bounds its sandboxes too), then the hierarchy's root. controller ""
// is v2's unified hierarchy.
std::vector<fs::path> cgroupBases(const CgroupLayout &layout, const std::string &controller, const fs::path &mount)
{
    const auto self = layout.selfPaths.find(controller);
    std::vector<fs::path> bases = {ownDir(mount, "/", self == layout.selfPaths.end() ? "/" : self->second)};
    if (bases.front() != mount)
        bases.push_back(mount);
    return bases;
}

std::vector<pid_t> procsOf(const fs::path &dir)
{
    std::vector<pid_t> pids;
    auto text = readFile(dir / "cgroup.procs");
    if (!text)
        return pids;
    std::istringstream in(*text);
    pid_t pid;
    while (in >> pid)
        pids.push_back(pid);
    return pids;
}

// Kills every process in dir and removes it; false if it is still there at the end.
bool killAndRemove(const fs::path &dir)
{
    std::error_code ec;
    if (!fs::exists(dir, ec))
        return true;
    if (fs::exists(dir / "cgroup.kill", ec))
        writeFile(dir / "cgroup.kill", "1");
    for (int attempt = 0; attempt < kRemoveAttempts; ++attempt) {
        for (pid_t pid : procsOf(dir))
            if (pid > 0)
                ::kill(pid, SIGKILL);
        if (::rmdir(dir.c_str()) == 0 || errno == ENOENT)
            return true;
        if (errno != EBUSY) {
            spdlog::warn("cannot remove cgroup {}: {}", dir.string(), std::strerror(errno));
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    spdlog::warn("cgroup {} still has processes after SIGKILL; left in place", dir.string());
    return false;
}

// mkdir -p, reporting the first error.
std::string makeDirs(const fs::path &dir)
{
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return "cannot create " + dir.string() + ": " + ec.message();
    return {};
}

// makeDirs, then proof that this process may create a cgroup inside: a directory left by a pool
// that ran as root is of no use to one that runs as a user, though it exists.
std::string makeUsableDir(const fs::path &dir)
{
    if (auto err = makeDirs(dir); !err.empty())
        return err;
    const fs::path probe = dir / ("probe-" + std::to_string(::getpid()));
    if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST)
        return "cannot create a cgroup in " + dir.string() + ": " + std::strerror(errno);
    ::rmdir(probe.c_str());
    return {};
}

// Under systemd with Delegate=yes the pool's own cgroup is handed to it, but cgroup v2 passes
// controllers to a cgroup's children only while it holds no process itself (the root excepted).
// So when the pool is alone in its cgroup it moves into a leaf of it, "pool-process", first: what
// systemd's DelegateSubgroup= does from version 254 on (Debian 12 has 252). With other processes
// beside it (a login shell's scope, not a delegated cgroup) it leaves everything as it is.
void moveIntoOwnLeaf(const fs::path &ownCgroup)
{
    auto procs = readFile(ownCgroup / "cgroup.procs");
    if (!procs)
        return;
    std::istringstream in(*procs);
    std::vector<std::string> pids;
    for (std::string pid; in >> pid;)
        pids.push_back(pid);
    const std::string self = std::to_string(::getpid());
    if (pids != std::vector<std::string>{self})
        return;
    const fs::path leaf = ownCgroup / "pool-process";
    std::string err = makeDirs(leaf);
    if (err.empty())
        err = writeFile(leaf / "cgroup.procs", self);
    if (!err.empty())
        spdlog::warn("cannot move the pool into {} ({}); its cgroup keeps the process and cannot pass on controllers",
                     leaf.string(), err);
    else
        spdlog::info("cgroups: the pool moved into {} so that its own cgroup can hold the sandboxes'", leaf.string());
}

} // namespace

CpuThrottling parseCpuStat(std::string_view text)
{
    CpuThrottling t;
    t.periods = keyedValue(text, "nr_periods");
    t.throttledPeriods = keyedValue(text, "nr_throttled");
    t.throttledUs = keyedValue(text, "throttled_usec");
    if (t.throttledUs < 0) {
        const int64_t ns = keyedValue(text, "throttled_time");
        t.throttledUs = ns < 0 ? -1 : ns / 1000;
    }
    return t;
}

CpuThrottling CpuThrottling::since(const CpuThrottling &earlier) const
{
    auto minus = [](int64_t now, int64_t then) { return now < 0 || then < 0 ? int64_t{-1} : std::max<int64_t>(0, now - then); };
    return {minus(periods, earlier.periods), minus(throttledPeriods, earlier.throttledPeriods),
            minus(throttledUs, earlier.throttledUs)};
}

std::string CgroupLayout::statusText() const
{
    if (version == "none")
        return "none (no limits enforced)";
    if (version == "v1" && hybrid)
        return "v1 (hybrid)";
    return version;
}

CgroupLayout detectCgroupLayout(const fs::path &mountinfo, const fs::path &selfCgroup)
{
    CgroupLayout layout;
    // /proc/self/cgroup: "ID:controllers:path"; the v2 line is "0::path".
    if (auto text = readFile(selfCgroup)) {
        std::istringstream in(*text);
        std::string line;
        while (std::getline(in, line)) {
            auto first = line.find(':');
            auto second = line.find(':', first + 1);
            if (first == std::string::npos || second == std::string::npos)
                continue;
            const std::string controllers = line.substr(first + 1, second - first - 1);
            const std::string path = line.substr(second + 1);
            if (controllers.empty())
                layout.selfPaths[""] = path;
            for (const auto &c : split(controllers, ','))
                layout.selfPaths[c] = path;
        }
    }
    std::map<std::string, std::string> mountRoots;   // controller ("" for v2) -> root inside the hierarchy
    if (auto text = readFile(mountinfo)) {
        std::istringstream in(*text);
        std::string line;
        while (std::getline(in, line)) {
            // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
            auto dash = line.find(" - ");
            if (dash == std::string::npos)
                continue;
            auto left = split(line.substr(0, dash), ' ');
            auto right = split(line.substr(dash + 3), ' ');
            if (left.size() < 5 || right.size() < 3)
                continue;
            const std::string root = unescapeMount(left[3]);
            const fs::path mountPoint = unescapeMount(left[4]);
            if (right[0] == "cgroup2") {
                if (layout.unifiedMount.empty()) {
                    layout.unifiedMount = mountPoint;
                    mountRoots[""] = root;
                }
            } else if (right[0] == "cgroup") {
                for (const auto &opt : split(right[2], ',')) {
                    if (opt == "memory" || opt == "cpu" || opt == "cpuacct" || opt == "pids") {
                        if (!layout.v1Mounts.count(opt)) {
                            layout.v1Mounts[opt] = mountPoint;
                            mountRoots[opt] = root;
                        }
                    }
                }
            }
        }
    }
    bool v2HasMemory = false;
    if (!layout.unifiedMount.empty()) {
        if (auto controllers = readFile(layout.unifiedMount / "cgroup.controllers")) {
            std::istringstream in(*controllers);
            std::string c;
            while (in >> c)
                if (c == "memory")
                    v2HasMemory = true;
        }
    }
    if (v2HasMemory) {
        layout.version = "v2";
        layout.hybrid = !layout.v1Mounts.empty();
    } else if (layout.v1Mounts.count("memory")) {
        layout.version = "v1";
        layout.hybrid = !layout.unifiedMount.empty();
    }
    // Rewrite selfPaths relative to each mount (a cgroup namespace or bind mount may root it).
    for (auto &[controller, path] : layout.selfPaths) {
        auto it = mountRoots.find(controller);
        if (it != mountRoots.end() && it->second != "/" && path.rfind(it->second, 0) == 0)
            path = path.substr(it->second.size());
        if (path.empty())
            path = "/";
    }
    return layout;
}

CgroupManager::CgroupManager(CgroupLayout layout, std::map<std::string, fs::path> controllerDirs)
    : m_layout(std::move(layout)), m_controllerDirs(std::move(controllerDirs))
{
    std::set<fs::path> seen;
    for (const auto &[c, dir] : m_controllerDirs)
        if (seen.insert(dir).second)
            m_poolDirs.push_back(dir);
}

std::unique_ptr<CgroupManager> CgroupManager::create(const CgroupLayout &layout, const std::string &poolId)
{
    if (layout.version == "none") {
        spdlog::error("no usable cgroup hierarchy (no cgroup2 mount with the memory controller, no v1 memory "
                      "hierarchy): sandboxes run WITHOUT memory, cpu or pids limits");
        return nullptr;
    }
    const std::string poolDirName = poolId.empty() ? std::string("pool") : poolId;
    if (layout.version == "v2") {
        const std::vector<fs::path> bases = cgroupBases(layout, "", layout.unifiedMount);
        std::string lastError;
        if (bases.size() > 1)
            moveIntoOwnLeaf(bases.front());
        for (const auto &base : bases) {
            const fs::path poolDir = base / "paddock" / poolDirName;
            if (auto err = makeUsableDir(poolDir); !err.empty()) {
                lastError = err;
                continue;
            }
            // Enable the controllers from base down to the pool's directory, so that each
            // sandbox's directory gets memory.max, cpu.max and pids.max.
            bool memoryOk = true;
            for (const fs::path &dir : {base, base / "paddock", poolDir}) {
                for (const char *c : {"memory", "cpu", "pids"}) {
                    auto err = writeFile(dir / "cgroup.subtree_control", std::string("+") + c);
                    if (!err.empty() && std::string(c) == "memory") {
                        memoryOk = false;
                        lastError = "cannot enable the memory controller in " + dir.string() + ": " + err;
                    } else if (!err.empty()) {
                        spdlog::warn("cannot enable the {} controller in {}: {}; that limit is not enforced", c,
                                     dir.string(), err);
                    }
                }
                if (!memoryOk)
                    break;
            }
            if (!memoryOk) {
                std::error_code ec;
                fs::remove(poolDir, ec);
                fs::remove(base / "paddock", ec);   // only if empty
                continue;
            }
            spdlog::info("cgroups: v2, sandboxes under {}", poolDir.string());
            return std::unique_ptr<CgroupManager>(new CgroupManager(layout, {{"", poolDir}}));
        }
        spdlog::error("cgroup v2 is mounted at {} but the pool cannot create its cgroups ({}): sandboxes run WITHOUT "
                      "memory, cpu or pids limits; run paddock-pool as root or delegate a cgroup to it",
                      layout.unifiedMount.string(), lastError);
        return nullptr;
    }

    // v1 (or hybrid): one directory per hierarchy; memory is required, the others are optional.
    std::map<std::string, fs::path> dirs;
    for (const auto &[controller, mount] : layout.v1Mounts) {
        if (controller != "memory" && controller != "cpu" && controller != "cpuacct" && controller != "pids")
            continue;
        const std::vector<fs::path> bases = cgroupBases(layout, controller, mount);
        std::string lastError;
        for (const auto &base : bases) {
            const fs::path poolDir = base / "paddock" / poolDirName;
            if (auto err = makeUsableDir(poolDir); !err.empty()) {
                lastError = err;
                continue;
            }
            dirs[controller] = poolDir;
            break;
        }
        if (!dirs.count(controller)) {
            if (controller == "memory") {
                spdlog::error("cgroup v1 memory hierarchy at {} is not writable ({}): sandboxes run WITHOUT memory, "
                              "cpu or pids limits; run paddock-pool as root",
                              mount.string(), lastError);
                return nullptr;
            }
            spdlog::warn("cgroup v1 {} hierarchy is not writable ({}); that limit is not enforced", controller, lastError);
        }
    }
    if (!dirs.count("memory")) {
        spdlog::error("no cgroup v1 memory hierarchy: sandboxes run WITHOUT limits");
        return nullptr;
    }
    spdlog::info("cgroups: v1{}, sandboxes under {} (memory){}{}", layout.hybrid ? " (hybrid: the v2 mount has no controllers)" : "",
                 dirs["memory"].string(), dirs.count("cpu") ? ", " + dirs["cpu"].string() + " (cpu)" : std::string(),
                 dirs.count("pids") ? ", " + dirs["pids"].string() + " (pids)" : std::string());
    return std::unique_ptr<CgroupManager>(new CgroupManager(layout, std::move(dirs)));
}

std::string cgroupAccessProblem(const CgroupLayout &layout, const std::string &poolId)
{
    if (layout.version == "none")
        return "no usable cgroup hierarchy (no cgroup2 mount with the memory controller, no v1 memory hierarchy)";
    const fs::path mount = layout.version == "v2" ? layout.unifiedMount : layout.v1Mounts.at("memory");
    const std::vector<fs::path> bases = cgroupBases(layout, layout.version == "v2" ? "" : "memory", mount);
    for (const auto &base : bases) {
        // The pool's directory, or the nearest one above it that exists, must let this user create in it.
        fs::path dir = base / "paddock" / (poolId.empty() ? std::string("pool") : poolId);
        std::error_code ec;
        while (!fs::exists(dir, ec) && dir.has_parent_path() && dir != dir.parent_path())
            dir = dir.parent_path();
        if (::access(dir.c_str(), W_OK) == 0)
            return {};
    }
    return "this user may not create cgroups under " + bases.front().string()
        + (bases.size() > 1 ? " or " + bases.back().string() : std::string());
}

Result<std::unique_ptr<SandboxCgroup>> CgroupManager::createSandbox(const std::string &sandboxId, const CgroupLimits &limits) const
{
    std::unique_ptr<SandboxCgroup> cg(new SandboxCgroup());
    cg->m_version = m_layout.version;
    auto fail_ = [&](const std::string &what) -> Result<std::unique_ptr<SandboxCgroup>> {
        cg->remove();
        return fail(ErrorCode::Internal, "cannot set up the cgroup of sandbox " + sandboxId + ": " + what);
    };
    for (const auto &poolDir : m_poolDirs) {
        const fs::path dir = poolDir / sandboxId;
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return fail_("mkdir " + dir.string() + ": " + std::strerror(errno));
        cg->m_dirs.push_back(dir);
    }
    auto dirFor = [&](const std::string &controller) -> fs::path {
        auto it = m_controllerDirs.find(m_layout.version == "v2" ? std::string() : controller);
        return it == m_controllerDirs.end() ? fs::path() : it->second / sandboxId;
    };
    cg->m_memoryDir = dirFor("memory");
    if (!cg->m_memoryDir.empty())
        cg->m_oomFd = ::open((cg->m_memoryDir / (m_layout.version == "v2" ? "memory.events" : "memory.oom_control")).c_str(),
                             O_RDONLY | O_CLOEXEC);
    cg->m_cpuDir = dirFor("cpu");
    cg->m_cpuacctDir = dirFor("cpuacct");
    cg->m_pidsDir = dirFor("pids");

    const int64_t quotaUs = limits.cpu > 0 ? std::max<int64_t>(1000, std::llround(limits.cpu * kCpuPeriodUs)) : 0;
    std::error_code ec;
    if (m_layout.version == "v2") {
        const fs::path &dir = cg->m_dirs.front();
        if (limits.memoryBytes > 0) {
            if (auto err = writeFile(dir / "memory.max", std::to_string(limits.memoryBytes)); !err.empty())
                return fail_("memory.max: " + err);
            if (fs::exists(dir / "memory.swap.max", ec))
                writeFile(dir / "memory.swap.max", "0");
        }
        if (quotaUs > 0 && fs::exists(dir / "cpu.max", ec))
            if (auto err = writeFile(dir / "cpu.max", std::to_string(quotaUs) + " " + std::to_string(kCpuPeriodUs)); !err.empty())
                return fail_("cpu.max: " + err);
        if (limits.pids > 0 && fs::exists(dir / "pids.max", ec))
            if (auto err = writeFile(dir / "pids.max", std::to_string(limits.pids)); !err.empty())
                return fail_("pids.max: " + err);
    } else {
        if (limits.memoryBytes > 0) {
            if (auto err = writeFile(cg->m_memoryDir / "memory.limit_in_bytes", std::to_string(limits.memoryBytes)); !err.empty())
                return fail_("memory.limit_in_bytes: " + err);
            // With swap, the limit alone lets a sandbox swap instead of being OOM-killed.
            if (fs::exists(cg->m_memoryDir / "memory.memsw.limit_in_bytes", ec))
                writeFile(cg->m_memoryDir / "memory.memsw.limit_in_bytes", std::to_string(limits.memoryBytes));
        }
        if (quotaUs > 0 && !cg->m_cpuDir.empty()) {
            if (auto err = writeFile(cg->m_cpuDir / "cpu.cfs_period_us", std::to_string(kCpuPeriodUs)); !err.empty())
                return fail_("cpu.cfs_period_us: " + err);
            if (auto err = writeFile(cg->m_cpuDir / "cpu.cfs_quota_us", std::to_string(quotaUs)); !err.empty())
                return fail_("cpu.cfs_quota_us: " + err);
        }
        if (limits.pids > 0 && !cg->m_pidsDir.empty())
            if (auto err = writeFile(cg->m_pidsDir / "pids.max", std::to_string(limits.pids)); !err.empty())
                return fail_("pids.max: " + err);
    }
    for (const auto &dir : cg->m_dirs) {
        int fd = ::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return fail_("open " + (dir / "cgroup.procs").string() + ": " + std::strerror(errno));
        // Above the descriptors a child dup2()s onto (0-4), like the runtime's own.
        int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
        ::close(fd);
        if (high < 0)
            return fail_(std::string("fcntl: ") + std::strerror(errno));
        cg->m_procsFds.push_back(high);
    }
    return cg;
}

void CgroupManager::removeLeftover(const std::string &sandboxId) const
{
    for (const auto &poolDir : m_poolDirs)
        killAndRemove(poolDir / sandboxId);
}

SandboxCgroup::~SandboxCgroup()
{
    remove();
    if (m_oomFd >= 0)
        ::close(m_oomFd);
}

int64_t SandboxCgroup::oomKills() const
{
    if (m_memoryDir.empty())
        return -1;
    if (m_oomFd >= 0) {
        char buf[1024];
        ssize_t n;
        do {
            n = ::pread(m_oomFd, buf, sizeof buf, 0);
        } while (n < 0 && errno == EINTR);
        return n > 0 ? keyedValue(std::string_view(buf, static_cast<size_t>(n)), "oom_kill") : -1;
    }
    if (m_version == "v2")
        return readKey(m_memoryDir / "memory.events", "oom_kill");
    return readKey(m_memoryDir / "memory.oom_control", "oom_kill");
}

CgroupSample SandboxCgroup::sample() const
{
    CgroupSample s;
    s.unixMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (m_version == "v2") {
        s.memoryBytes = readInt(m_memoryDir / "memory.current");
        // One cpu.stat has both the usage and, with the cpu controller enabled, the throttling.
        if (auto cpuStat = readFile(m_memoryDir / "cpu.stat")) {
            s.cpuUsageUs = keyedValue(*cpuStat, "usage_usec");
            s.throttling = parseCpuStat(*cpuStat);
        }
        s.pids = readInt(m_memoryDir / "pids.current");
    } else {
        if (!m_memoryDir.empty())
            s.memoryBytes = readInt(m_memoryDir / "memory.usage_in_bytes");
        if (!m_cpuacctDir.empty()) {
            int64_t ns = readInt(m_cpuacctDir / "cpuacct.usage");
            s.cpuUsageUs = ns < 0 ? -1 : ns / 1000;
        }
        if (!m_pidsDir.empty())
            s.pids = readInt(m_pidsDir / "pids.current");
        if (!m_cpuDir.empty())
            if (auto cpuStat = readFile(m_cpuDir / "cpu.stat"))
                s.throttling = parseCpuStat(*cpuStat);
    }
    if (m_throttlingAtStart.known())
        s.throttling = s.throttling.since(m_throttlingAtStart);
    return s;
}

namespace {

// The cgroup's cumulative CPU time from its v2 cpu.stat or v1 cpuacct.usage, in microseconds; -1
// when unreadable.
int64_t cpuUsageUs(const std::string &version, const fs::path &file)
{
    if (file.empty())
        return -1;
    if (version == "v2")
        return readKey(file, "usage_usec");
    const int64_t ns = readInt(file);
    return ns < 0 ? -1 : ns / 1000;
}

int64_t preadInt(int fd)
{
    char buf[64];
    ssize_t n;
    do {
        n = ::pread(fd, buf, sizeof buf - 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    int64_t v = -1;
    std::from_chars(buf, buf + n, v);
    return v;
}

bool pwriteAll(int fd, std::string_view value)
{
    ssize_t n;
    do {
        n = ::pwrite(fd, value.data(), value.size(), 0);
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(value.size());
}

} // namespace

std::shared_ptr<CommandUsageMeter> SandboxCgroup::startCommand() const
{
    std::shared_ptr<CommandUsageMeter> meter(new CommandUsageMeter());
    meter->m_commands = m_commands;
    meter->m_version = m_version;
    if (m_version == "v2")
        meter->m_cpuFile = m_memoryDir / "cpu.stat";   // usage_usec is there even without the cpu controller
    else if (!m_cpuacctDir.empty())
        meter->m_cpuFile = m_cpuacctDir / "cpuacct.usage";
    const fs::path peakFile = m_memoryDir.empty() ? fs::path()
                              : m_memoryDir / (m_version == "v2" ? "memory.peak" : "memory.max_usage_in_bytes");
    if (!peakFile.empty()) {
        // Read-write where the kernel lets us (the reset), else read-only (the lifetime peak).
        meter->m_peakFd = ::open(peakFile.c_str(), O_RDWR | O_CLOEXEC);
        if (meter->m_peakFd < 0)
            meter->m_peakFd = ::open(peakFile.c_str(), O_RDONLY | O_CLOEXEC);
    }
    {
        std::lock_guard lock(m_commands->mutex);
        meter->m_overlapped = m_commands->running > 0;
        m_commands->running++;
        meter->m_startIndex = ++m_commands->starts;
        if (meter->m_peakFd >= 0) {
            if (m_version == "v2") {
                // Any non-empty write resets the peak this open file reports (kernel 6.12 and later).
                meter->m_peakReset = pwriteAll(meter->m_peakFd, "reset");
            } else if (!meter->m_overlapped) {
                // v1's reset is the cgroup's, for every reader: never under a command still running.
                meter->m_peakReset = pwriteAll(meter->m_peakFd, "0");
                m_commands->resetWorks = meter->m_peakReset;
            }
        }
    }
    meter->m_cpuAtStartUs = cpuUsageUs(m_version, meter->m_cpuFile);
    return meter;
}

CommandUsageMeter::~CommandUsageMeter()
{
    finish();
    if (m_peakFd >= 0)
        ::close(m_peakFd);
}

CommandUsage CommandUsageMeter::finish()
{
    CommandUsage usage;
    if (m_finished || !m_commands)
        return usage;
    m_finished = true;
    const int64_t cpuNowUs = cpuUsageUs(m_version, m_cpuFile);
    if (m_cpuAtStartUs >= 0 && cpuNowUs >= m_cpuAtStartUs)
        usage.cpuTimeUs = cpuNowUs - m_cpuAtStartUs;
    usage.peakMemoryBytes = m_peakFd >= 0 ? preadInt(m_peakFd) : -1;
    std::lock_guard lock(m_commands->mutex);
    const bool overlapped = m_overlapped || m_commands->starts != m_startIndex;
    m_commands->running--;
    if (usage.peakMemoryBytes < 0)
        return usage;
    // A v1 command that started beside another did not reset the peak: it counts from that one's
    // reset, if resets work here at all.
    const bool resetCovers = m_peakReset || (m_version != "v2" && m_overlapped && m_commands->resetWorks);
    usage.peakScope = !resetCovers ? "sandbox" : overlapped ? "concurrent" : "command";
    return usage;
}

void SandboxCgroup::markStarted()
{
    m_throttlingAtStart = {};
    m_throttlingAtStart = sample().throttling;
}

void SandboxCgroup::closeProcsFds()
{
    for (int fd : m_procsFds)
        ::close(fd);
    m_procsFds.clear();
}

void SandboxCgroup::remove()
{
    closeProcsFds();
    if (m_removed)
        return;
    m_removed = true;
    for (const auto &dir : m_dirs)
        killAndRemove(dir);
}

} // namespace paddock::pool
