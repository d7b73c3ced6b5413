#include "pool/runtimes/minimal_etc.h"

#include <fstream>
#include <sys/stat.h>
#include <system_error>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxTreeDepth = 8;
constexpr const char *kHostEtc = "/etc";

// The one list. A name not here is not in a sandbox's /etc (docs/pool.md repeats it).
const std::vector<MinimalEtcEntry> kMinimalEtc = {
    {"passwd", "user names of the sandbox's own ids (root, nobody): ls -l, whoami, ssh and git need them", false, true},
    {"group", "group names of the sandbox's own ids", false, true},
    {"hosts", "localhost and the sandbox's host name", false, true},
    {"hostname", "the sandbox's host name", false, true},
    {"nsswitch.conf", "look users, groups and hosts up in these files (and DNS)", false, true},
    {"mtab", "a link to /proc/self/mounts, for df and mount listings", false, true},
    {"ld.so.cache", "where the dynamic linker finds shared libraries", false, false},
    {"alternatives", "Debian's alternatives: /usr/bin/cc, awk, python and others link through it", false, false},
    {"ssl/certs", "the CA certificates (ca-certificates.crt and the hashed links) for HTTPS", false, false},
    {"ssl/openssl.cnf", "OpenSSL's defaults", false, false},
    {"localtime", "the host's time zone", false, false},
    {"timezone", "the time zone's name", false, false},
    {"os-release", "which distribution this is (build tools read it)", false, false},
    {"debian_version", "which Debian release this is", false, false},
    {"protocols", "protocol names for getprotobyname", false, false},
    {"services", "port names for getservbyname", false, false},
    {"resolv.conf", "name servers, for tiers with a network", true, false},
};

bool worldReadable(const struct stat &st) { return (st.st_mode & S_IROTH) != 0; }

Status writeFile(const fs::path &path, const std::string &content)
{
    std::ofstream out(path, std::ios::trunc);
    out << content;
    out.close();
    if (!out)
        return fail(ErrorCode::FailedPrecondition, "cannot write " + path.string() + "; check the pool's --state-dir");
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read, ec);
    return {};
}

std::string generated(const std::string &name, uint32_t uid, uint32_t gid)
{
    const std::string user = uid == 0 ? "root" : "sandbox";
    const std::string groupName = gid == 0 ? "root" : "sandbox";
    if (name == "passwd")
        return user + ":x:" + std::to_string(uid) + ":" + std::to_string(gid) + ":sandbox:/workspace:/bin/sh\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
    if (name == "group")
        return groupName + ":x:" + std::to_string(gid) + ":\nnogroup:x:65534:\n";
    if (name == "hosts")
        return "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    if (name == "hostname")
        return "sandbox\n";
    if (name == "nsswitch.conf")
        return "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\n"
               "services: files\nethers: files\nrpc: files\n";
    return {};
}

// Copies one host path (file, symlink or directory tree) to `to`. Symlinks are copied as links
// (they point into /usr, or within the copy); regular files only when world-readable unless
// `anyMode` (an operator's etc_extra). Devices, sockets and fifos are left out.
Status copyHostPath(const fs::path &from, const fs::path &to, bool anyMode, int depth)
{
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0)
        return {};   // gone meanwhile
    std::error_code ec;
    if (S_ISLNK(st.st_mode)) {
        const fs::path target = fs::read_symlink(from, ec);
        if (!ec)
            fs::create_symlink(target, to, ec);
    } else if (S_ISREG(st.st_mode)) {
        if (!anyMode && !worldReadable(st))
            return {};
        fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
        if (!ec)
            fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read, ec);
    } else if (S_ISDIR(st.st_mode) && depth < kMaxTreeDepth && (anyMode || worldReadable(st))) {
        fs::create_directories(to, ec);
        for (const auto &entry : fs::directory_iterator(from, ec))
            if (auto copied = copyHostPath(entry.path(), to / entry.path().filename(), anyMode, depth + 1); !copied)
                return copied;
    }
    if (ec)
        return fail(ErrorCode::FailedPrecondition, "cannot copy " + from.string() + " into the sandboxes' /etc (" + to.string() +
                                                       "): " + ec.message() + "; check the pool's --state-dir");
    return {};
}

Status buildTree(const fs::path &root, bool network, const std::vector<std::string> &extra, uint32_t uid, uint32_t gid)
{
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::create_directories(root, ec);
    if (ec)
        return fail(ErrorCode::FailedPrecondition, "cannot create " + root.string() + ": " + ec.message() + "; check the pool's --state-dir");
    for (const auto &entry : kMinimalEtc) {
        if (entry.networkOnly && !network)
            continue;
        const fs::path to = root / entry.path;
        fs::create_directories(to.parent_path(), ec);
        Status done;
        if (std::string(entry.path) == "mtab")
            fs::create_symlink("../proc/self/mounts", to, ec);
        else if (entry.generated)
            done = writeFile(to, generated(entry.path, uid, gid));
        else
            done = copyHostPath(fs::path(kHostEtc) / entry.path, to, false, 0);
        if (!done)
            return done;
    }
    for (const auto &path : extra) {
        if (auto check = checkEtcExtra(path); !check.error.empty())
            return fail(ErrorCode::FailedPrecondition, check.error);
        const fs::path relative = fs::path(path).lexically_relative(kHostEtc);
        fs::create_directories((root / relative).parent_path(), ec);
        fs::remove_all(root / relative, ec);   // an extra may replace a listed entry
        if (auto done = copyHostPath(path, root / relative, true, 0); !done)
            return done;
    }
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_directory(ec) && !it->is_symlink(ec))
            fs::permissions(it->path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                                            fs::perms::others_exec, ec);
    fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec, ec);
    return {};
}

} // namespace

const std::vector<MinimalEtcEntry> &minimalEtcEntries() { return kMinimalEtc; }

fs::path minimalEtcFor(const fs::path &dir, bool network) { return dir / (network ? "network" : "base"); }

EtcExtraCheck checkEtcExtra(const std::string &path)
{
    EtcExtraCheck out;
    const fs::path p(path);
    const fs::path relative = p.lexically_normal().lexically_relative(kHostEtc);
    if (!p.is_absolute() || relative.empty() || *relative.begin() == ".." || relative == ".") {
        out.error = "etc_extra: '" + path + "' is not a path under /etc; list host paths such as \"/etc/gitconfig\"";
        return out;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        out.error = "etc_extra: " + path + " does not exist on this host; create it or remove it from etc_extra in pool.toml";
        return out;
    }
    if (!worldReadable(st))
        out.warning = "etc_extra: " + path + " is not world-readable (mode " + [&] {
            char mode[8];
            std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
            return std::string(mode);
        }() + "), yet every sandbox of this pool will read its copy; make sure it holds no secret";
    return out;
}

Status buildMinimalEtc(const fs::path &dir, const std::vector<std::string> &extra, uint32_t uid, uint32_t gid)
{
    if (auto base = buildTree(minimalEtcFor(dir, false), false, extra, uid, gid); !base)
        return base;
    return buildTree(minimalEtcFor(dir, true), true, extra, uid, gid);
}

} // namespace paddock::pool
