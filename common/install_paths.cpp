#include "common/install_paths.h"

#include <unistd.h>

namespace paddock {
namespace fs = std::filesystem;

namespace {

fs::path prefixOf(const fs::path &executable)
{
    return executable.parent_path().parent_path();
}

} // namespace

fs::path currentExecutable()
{
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe;
}

fs::path installedLibexecDir(const fs::path &executable)
{
    return prefixOf(executable) / "libexec" / "paddock";
}

fs::path installedDataDir(const fs::path &executable)
{
    return prefixOf(executable) / "share" / "paddock";
}

fs::path findHelperProgram(const fs::path &executable, std::string_view name)
{
    if (executable.empty())
        return fs::path(".") / name;
    const fs::path installed = installedLibexecDir(executable) / name;
    std::error_code ec;
    if (fs::is_regular_file(installed, ec) && ::access(installed.c_str(), X_OK) == 0)
        return installed;
    return executable.parent_path() / name;
}

fs::path findDataDir(const fs::path &executable, std::string_view subdir, const fs::path &buildTreeFallback)
{
    if (!executable.empty()) {
        const fs::path installed = installedDataDir(executable) / subdir;
        std::error_code ec;
        if (fs::is_directory(installed, ec))
            return installed;
    }
    return buildTreeFallback;
}

} // namespace paddock
