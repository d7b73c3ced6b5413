#pragma once
// Logging goes through spdlog. Daemons call setupLogging once in main().

#include <spdlog/spdlog.h>
#include <string>
#include <string_view>
#include <vector>

namespace paddock {

// level: trace, debug, info, warn, error. Logs go to stderr.
void setupLogging(const std::string &programName, const std::string &level);

// Those levels, for --log-level and the configs' log_level.
const std::vector<std::string> &logLevels();
bool isLogLevel(std::string_view level);

} // namespace paddock
