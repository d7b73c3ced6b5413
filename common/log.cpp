#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>

namespace paddock {

void setupLogging(const std::string &programName, const std::string &level)
{
    auto logger = spdlog::stderr_color_mt(programName);
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
    spdlog::flush_on(spdlog::level::warn);
}

const std::vector<std::string> &logLevels()
{
    static const std::vector<std::string> levels = {"trace", "debug", "info", "warn", "error"};
    return levels;
}

bool isLogLevel(std::string_view level)
{
    return std::ranges::find(logLevels(), level) != logLevels().end();
}

} // namespace paddock
