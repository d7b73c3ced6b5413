#include "pool/runtimes/oci_bundle.h"

#include "pool/runtimes/runtime.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <system_error>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json bindMount(const fs::path &source, const std::string &destination, bool readOnly)
{
    return {{"destination", destination},
            {"type", "bind"},
            {"source", source.string()},
            {"options", {"rbind", readOnly ? "ro" : "rw", "nosuid", "nodev"}}};
}

// The host's top-level system directories: symlinks on a merged-/usr system (mirrored in the
// rootfs), read-only binds otherwise.
const char *const kSystemDirs[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

} // namespace

std::string ociConfigJson(const OciBundleOptions &o)
{
    json mounts = json::array();
    mounts.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
    mounts.push_back({{"destination", "/dev"},
                      {"type", "tmpfs"},
                      {"source", "tmpfs"},
                      {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}});
    mounts.push_back({{"destination", "/dev/pts"},
                      {"type", "devpts"},
                      {"source", "devpts"},
                      {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}});
    mounts.push_back({{"destination", "/dev/shm"},
                      {"type", "tmpfs"},
                      {"source", "shm"},
                      {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}});
    mounts.push_back({{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid", "nodev", "mode=1777"}}});
    mounts.push_back(bindMount("/usr", "/usr", true));
    for (const char *dir : kSystemDirs) {
        const fs::path host = fs::path("/") / dir;
        std::error_code ec;
        auto st = fs::symlink_status(host, ec);
        if (!ec && fs::is_directory(st))
            mounts.push_back(bindMount(host, host.string(), true));
    }
    mounts.push_back(bindMount("/etc", "/etc", true));
    // /etc is shared read-only, but uid 0 inside still owns its files: hide the host's secrets.
    for (const char *secret : {"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}) {
        std::error_code ec;
        if (fs::exists(secret, ec))
            mounts.push_back(bindMount("/dev/null", secret, true));
    }
    if (std::error_code ec; fs::is_directory("/etc/ssh", ec))
        mounts.push_back({{"destination", "/etc/ssh"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"ro", "size=4k"}}});
    mounts.push_back(bindMount(o.workspaceDir, "/workspace", false));
    mounts.push_back(bindMount(o.initPath, kOciInitInsidePath, true));
    if (!o.controlDir.empty())
        mounts.push_back(bindMount(o.controlDir, kOciControlInsideDir, false));
    if (!o.egressSocket.empty())
        mounts.push_back(bindMount(o.egressSocket, kEgressSocketInside, true));

    json resources = json::object();
    if (o.memoryBytes > 0)
        resources["memory"] = {{"limit", o.memoryBytes}, {"swap", o.memoryBytes}};
    if (o.cpu > 0)
        resources["cpu"] = {{"period", 10000}, {"quota", static_cast<int64_t>(o.cpu * 10000)}};
    if (o.pids > 0)
        resources["pids"] = {{"limit", o.pids}};

    const json noCaps = json::array();
    json config = {
        {"ociVersion", "1.0.2"},
        {"process",
         {{"terminal", false},
          {"user", {{"uid", 0}, {"gid", 0}}},
          {"args", o.args},
          // Built from nothing: no variable of the host or the pool.
          {"env", {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8"}},
          {"cwd", "/workspace"},
          {"capabilities",
           {{"bounding", noCaps}, {"effective", noCaps}, {"inheritable", noCaps}, {"permitted", noCaps}, {"ambient", noCaps}}},
          {"noNewPrivileges", true}}},
        {"root", {{"path", "rootfs"}, {"readonly", true}}},
        {"hostname", "sandbox"},
        {"mounts", mounts},
        {"linux",
         {{"namespaces", {{{"type", "pid"}}, {{"type", "network"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}}},
          {"resources", resources},
          // uid 0 without capabilities still owns /proc/sys and friends: keep them read-only or hidden.
          {"maskedPaths",
           {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
            "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
          {"readonlyPaths",
           {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
    };
    return config.dump(1);
}

Status writeOciBundle(const OciBundleOptions &o)
{
    const fs::path rootfs = o.bundleDir / "rootfs";
    std::error_code ec;
    for (const char *dir : {"usr", "etc", "proc", "dev", "tmp", "workspace", "run/paddock/ctl"}) {
        fs::create_directories(rootfs / dir, ec);
        if (ec)
            return fail(ErrorCode::FailedPrecondition, "cannot create " + (rootfs / dir).string() + ": " + ec.message() +
                                                           "; check that the pool's --state-dir is writable and has space");
    }
    // The init binary and the egress socket are bound onto files.
    { std::ofstream(rootfs / "run/paddock/paddock-sandbox-init"); }
    if (!o.egressSocket.empty())
        std::ofstream(rootfs / "run/paddock/egress.sock");
    for (const char *dir : kSystemDirs) {
        const fs::path host = fs::path("/") / dir;
        auto st = fs::symlink_status(host, ec);
        if (ec || fs::exists(fs::symlink_status(rootfs / dir, ec))) {   // absent on the host, or written before
            ec.clear();
            continue;
        }
        if (fs::is_symlink(st))
            fs::create_symlink(fs::read_symlink(host, ec), rootfs / dir, ec);
        else if (fs::is_directory(st))
            fs::create_directory(rootfs / dir, ec);
        if (ec)
            return fail(ErrorCode::FailedPrecondition, "cannot create " + (rootfs / dir).string() + ": " + ec.message());
    }
    std::ofstream out(o.bundleDir / "config.json", std::ios::trunc);
    out << ociConfigJson(o);
    out.close();
    if (!out)
        return fail(ErrorCode::FailedPrecondition, "cannot write " + (o.bundleDir / "config.json").string() +
                                                       "; check that the pool's --state-dir is writable and has space");
    return {};
}

} // namespace paddock::pool
