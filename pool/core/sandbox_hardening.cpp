#include "pool/core/sandbox_hardening.h"

#include "common/paths.h"
#include "pool/init/seccomp_policy.h"
#include "pool/runtimes/minimal_etc.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

int64_t sandboxesAtMax(const PoolConfig &config)
{
    int64_t total = 0;
    for (const auto &tier : config.tiers)
        total += tier.maxCount;
    return total;
}

std::string octal(unsigned mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", mode & 07777);
    return text;
}

// Every directory above `path` must let others pass (o+x): the sandbox's runtime runs as the
// sandbox's uid while it binds the workspace, the init and the /etc tree.
std::string unreachableAncestor(const fs::path &path, const char *key)
{
    for (fs::path p = fs::absolute(path).parent_path(); !p.empty(); p = p.parent_path()) {
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH))
            return p.string() + " is mode " + octal(st.st_mode) + ", so sandbox uids cannot pass through it to " + path.string() +
                   "; give it o+x (chmod o+x " + p.string() + ") or choose a " + key + " under directories others may pass";
        if (p == p.root_path())
            break;
    }
    return {};
}

} // namespace

TierIsolation SandboxHardening::describe(const TierConfig &tier) const
{
    TierIsolation out;
    if (identities)
        out.identity = "own host ids (" + identities->describe() + "); sandbox root is never host root";
    else if (::geteuid() == 0)
        out.identity = "host root (hardening off)";
    else
        out.identity = "the pool's user (uid " + std::to_string(::geteuid()) + "), capabilities dropped";
    if (seccomp)
        out.seccomp = "on (EPERM for " + std::to_string(init::seccompGroups().size()) + " groups and " +
                      std::to_string(init::seccompArgumentRules().size()) + " argument rules" +
                      (tier.runtime == "runsc" ? ", enforced by gVisor; runsc's own filter guards the host" : "") + ")";
    else
        out.seccomp = "off";
    if (etcDir.empty()) {
        out.etc = "empty";
    } else {
        size_t entries = 0;
        for (const auto &e : minimalEtcEntries())
            entries += (!e.networkOnly || tier.network == "allowlist") ? 1 : 0;
        out.etc = "minimal (" + std::to_string(entries) + " entries" +
                  (etcExtraCount ? " and " + std::to_string(etcExtraCount) + " from etc_extra" : std::string()) + ")";
    }
    return out;
}

std::vector<std::string> checkSandboxHardening(const PoolConfig &config, std::vector<std::string> &warnings)
{
    std::vector<std::string> problems;
    if (config.hardenSandboxes && canMapIdentities())
        problems = checkIdentityRange(config.identity, sandboxesAtMax(config));
    for (const auto &path : config.etcExtra) {
        const EtcExtraCheck check = checkEtcExtra(path);
        if (!check.error.empty())
            problems.push_back(check.error);
        if (!check.warning.empty())
            warnings.push_back(check.warning);
    }
    return problems;
}

Result<SandboxHardening> prepareSandboxHardening(const PoolConfig &config)
{
    SandboxHardening out;
    if (!config.hardenSandboxes) {
        spdlog::warn("sandbox hardening is off (a benchmark's setting): sandboxes see an empty /etc and run unfiltered");
        return out;
    }
    std::vector<std::string> warnings;
    if (auto problems = checkSandboxHardening(config, warnings); !problems.empty()) {
        std::string joined;
        for (const auto &p : problems)
            joined += (joined.empty() ? "" : "; ") + p;
        return fail(ErrorCode::FailedPrecondition, joined + " (pool.toml, docs/security.md)");
    }
    for (const auto &w : warnings)
        spdlog::warn("{}", w);
    if (canMapIdentities()) {
        for (const auto &[path, key] : {std::pair{config.stateDir, "state_dir"}, std::pair{config.initPath, "init_path"}})
            if (const std::string why = unreachableAncestor(path, key); !why.empty())
                return fail(ErrorCode::FailedPrecondition, why);
        out.identities = std::make_unique<IdentityAllocator>(config.identity);
    } else {
        spdlog::info("running as uid {}, not root: every sandbox is this user, with no capabilities (docs/security.md)", ::geteuid());
    }
    out.etcDir = config.stateDir / "etc";
    if (auto err = ensurePrivateDirectory(out.etcDir, 0755); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; pass a writable --state-dir");
    if (auto built = buildMinimalEtc(out.etcDir, config.etcExtra, 0, 0); !built)
        return std::unexpected(built.error());
    out.etcExtraCount = config.etcExtra.size();
    out.seccomp = true;
    return out;
}

Status giveToSandbox(const fs::path &path, const SandboxIdentity &identity, unsigned mode)
{
    if (!identity.mapped())
        return {};
    if (::chown(path.c_str(), identity.hostId, identity.hostId) != 0 || ::chmod(path.c_str(), mode) != 0)
        return fail(ErrorCode::Internal, "cannot give " + path.string() + " to the sandbox's uid " + std::to_string(identity.hostId) + ": " +
                                             std::strerror(errno));
    return {};
}

unsigned passThroughMode(const PoolConfig &config) { return config.hardenSandboxes && canMapIdentities() ? 0711 : 0700; }

} // namespace paddock::pool
