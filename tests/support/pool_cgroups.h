#pragma once
// Tests and benchmarks whose pool id is theirs alone (it names their pid) end their pool with
// this: paddock-pool keeps its cgroup directories (pools with the same id share them), so without
// it every run would leave paddock/<id> behind in each cgroup hierarchy.
// Threads: the test's main thread.

#include "pool/core/sandbox_pool.h"

#include <unistd.h>

#include <memory>

namespace paddock::test {

inline void endPoolAndItsCgroups(std::unique_ptr<pool::SandboxPool> &sandboxPool)
{
    if (!sandboxPool)
        return;
    const auto dirs = sandboxPool->cgroupPoolDirs();
    sandboxPool->shutdown();
    sandboxPool.reset();
    for (const auto &dir : dirs)
        ::rmdir(dir.c_str());   // kept (EBUSY) while another pool of this process still uses it
}

} // namespace paddock::test
