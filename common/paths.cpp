#include "common/paths.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock {
namespace {

std::filesystem::path homeDir()
{
    if (const char *home = std::getenv("HOME"); home && *home)
        return home;
    if (const passwd *pw = getpwuid(getuid()))
        return pw->pw_dir;
    return "/tmp";
}

std::filesystem::path fromEnv(const char *name, const std::filesystem::path &fallback)
{
    const char *value = std::getenv(name);
    // The spec says relative paths are invalid and must be ignored.
    if (value && *value == '/')
        return value;
    return fallback;
}

} // namespace

std::filesystem::path xdgConfigHome() { return fromEnv("XDG_CONFIG_HOME", homeDir() / ".config"); }
std::filesystem::path xdgDataHome() { return fromEnv("XDG_DATA_HOME", homeDir() / ".local/share"); }
std::filesystem::path xdgStateHome() { return fromEnv("XDG_STATE_HOME", homeDir() / ".local/state"); }

std::filesystem::path xdgRuntimeDir()
{
    return fromEnv("XDG_RUNTIME_DIR", std::filesystem::path("/tmp") / ("paddock-" + std::to_string(getuid())));
}

std::filesystem::path defaultConfigDir() { return xdgConfigHome() / "paddock"; }
std::filesystem::path defaultDataDir() { return xdgDataHome() / "paddock"; }
std::filesystem::path defaultBrokerSocketPath() { return xdgRuntimeDir() / "paddock" / "broker.sock"; }

std::string ensurePrivateDirectory(const std::filesystem::path &dir, unsigned mode)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        return "cannot create directory " + dir.string() + ": " + ec.message();
    if (::chmod(dir.c_str(), mode) != 0)
        return "cannot set permissions of " + dir.string() + ": " + std::strerror(errno);
    return {};
}

} // namespace paddock
