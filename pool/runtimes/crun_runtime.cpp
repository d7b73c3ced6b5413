#include "pool/runtimes/crun_runtime.h"

#include "pool/runtimes/cgroup.h"

namespace paddock::pool {

CrunRuntime::CrunRuntime(std::string binary, std::filesystem::path detachMount)
    : OciRuntime(std::move(binary), SocketMode::InheritedFd)
{
    m_detachMount = std::move(detachMount);
}

Result<std::unique_ptr<CrunRuntime>> CrunRuntime::create()
{
    std::string crun = findExecutable("crun");
    if (crun.empty())
        return fail(ErrorCode::FailedPrecondition,
                    "crun is not installed or not on PATH; install it (Debian/Ubuntu: apt-get install crun, or "
                    "scripts/setup-deps) or give the tier runtime = \"bwrap\"");
    const CgroupLayout layout = detectCgroupLayout();
    return std::unique_ptr<CrunRuntime>(new CrunRuntime(std::move(crun), layout.hybrid ? layout.unifiedMount : std::filesystem::path{}));
}

std::vector<std::string> CrunRuntime::runCommand(const std::filesystem::path &bundleDir,
                                                 const std::filesystem::path &stateDir, const std::string &id,
                                                 int preservedFds, bool /*egress: a bind mount is enough*/) const
{
    std::vector<std::string> argv = {binary(), "--root", stateDir.string(), "--cgroup-manager=disabled", "run"};
    if (preservedFds > 0)
        argv.insert(argv.end(), {"--preserve-fds", std::to_string(preservedFds)});
    argv.insert(argv.end(), {"--bundle", bundleDir.string(), id});
    return argv;
}

} // namespace paddock::pool
