#include "pool/runtimes/runsc_runtime.h"

namespace paddock::pool {

Result<std::unique_ptr<RunscRuntime>> RunscRuntime::create()
{
    std::string runsc = findExecutable("runsc");
    if (runsc.empty())
        return fail(ErrorCode::FailedPrecondition,
                    "runsc (gVisor) is not installed or not on PATH; install it (Debian/Ubuntu: apt-get install runsc, "
                    "or scripts/setup-deps) or give the tier runtime = \"bwrap\"");
    return std::unique_ptr<RunscRuntime>(new RunscRuntime(std::move(runsc)));
}

std::vector<std::string> RunscRuntime::runCommand(const std::filesystem::path &bundleDir,
                                                  const std::filesystem::path &stateDir, const std::string &id,
                                                  int /*preservedFds*/, bool egress) const
{
    return {binary(),
            "--root", stateDir.string(),
            "--network=none",
            // The init's socket: created through the gofer as a host socket the pool can reach.
            // Not "open" unless the tier has egress: then the init connects out to the pool's
            // egress socket, the only host socket the sandbox's mounts show besides its own.
            egress ? "--host-uds=all" : "--host-uds=create",
            // Limits come from the pool's cgroup, which runsc, its gofer and its sandbox joined
            // before they started (this runsc cannot use hybrid v1/v2 hosts itself).
            "--ignore-cgroups",
            "run", "--bundle", bundleDir.string(), id};
}

} // namespace paddock::pool
