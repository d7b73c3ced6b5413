// pool.toml's loader (pool/core/pool_config.h): every problem is named and nothing crashes, for
// any file an operator (or a broken deploy script) writes.

#include "pool/core/pool_config.h"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const std::filesystem::path file =
        std::filesystem::temp_directory_path() / ("paddock-pool-config-fuzz-" + std::to_string(::getpid()) + ".toml");
    {
        std::ofstream out(file, std::ios::trunc | std::ios::binary);
        out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
    }
    paddock::ConfigProblems problems;
    const auto config = paddock::pool::loadPoolConfig(file, true, problems);
    (void)config.tiers.size();
    (void)problems.size();
    return 0;
}
