#pragma once
// Logging goes through spdlog. Daemons call setupLogging once in main().

#include <spdlog/spdlog.h>
#include <string>

namespace paddock {

// level: trace, debug, info, warn, error. Logs go to stderr.
void setupLogging(const std::string &programName, const std::string &level);

} // namespace paddock
