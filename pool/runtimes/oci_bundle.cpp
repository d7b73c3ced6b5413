#include "pool/runtimes/oci_bundle.h"

#include "pool/runtimes/runtime.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <unistd.h>
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
    if (!o.etcDir.empty())
        mounts.push_back(bindMount(o.etcDir, "/etc", true));
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

    json namespaces = {{{"type", "pid"}}, {{"type", "network"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}};
    json uidMappings = json::array(), gidMappings = json::array();
    if (o.identity.mapped()) {
        uidMappings.push_back({{"containerID", 0}, {"hostID", o.identity.hostId}, {"size", o.identity.count}});
        gidMappings = uidMappings;
    } else if (::geteuid() != 0) {
        uidMappings.push_back({{"containerID", 0}, {"hostID", ::geteuid()}, {"size", 1}});
        gidMappings.push_back({{"containerID", 0}, {"hostID", ::getegid()}, {"size", 1}});
    }
    if (!uidMappings.empty())
        namespaces.push_back({{"type", "user"}});
    json masked = json::array();
    for (const char *path : kMaskedProcPaths)
        masked.push_back(path);
    masked.push_back("/sys/firmware");

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
         {{"namespaces", namespaces},
          {"resources", resources},
          {"maskedPaths", masked},
          {"readonlyPaths",
           {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
    };
    if (!uidMappings.empty()) {
        config["linux"]["uidMappings"] = uidMappings;
        config["linux"]["gidMappings"] = gidMappings;
    }
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
