// broker.toml's loader (broker/config/broker_config.h): for any file, every problem is named and
// nothing crashes; the pools it lists, the principals and the price table come out whole or not at
// all.

#include "broker/config/broker_config.h"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const std::filesystem::path file =
        std::filesystem::temp_directory_path() / ("paddock-broker-config-fuzz-" + std::to_string(::getpid()) + ".toml");
    {
        std::ofstream out(file, std::ios::trunc | std::ios::binary);
        out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
    }
    paddock::ConfigProblems problems;
    const auto config = paddock::broker_config::loadBrokerConfig(file, paddock::broker_config::defaultBrokerConfig(), problems);
    (void)config.pools.size();
    (void)problems.size();
    return 0;
}
