#include "common/config_problems.h"

#include <algorithm>

#include <unistd.h>

namespace paddock {

Error ConfigProblems::joined() const
{
    if (m_problems.empty())
        return {ErrorCode::Internal, "no problems"};
    Error out{m_problems.front().code, {}};
    for (const auto &problem : m_problems)
        out.message += (out.message.empty() ? "" : "\n") + problem.message;
    return out;
}

bool ConfigSection::accepts(std::string_view key) const
{
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string ConfigSection::keyList() const
{
    std::string out;
    for (size_t i = 0; i < keys.size(); ++i)
        out += (i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + keys[i];
    return out;
}

void checkCreatableDirectory(const std::string &what, const std::filesystem::path &dir, const std::string &fix,
                             ConfigProblems &problems)
{
    std::error_code ec;
    std::filesystem::path existing = dir;
    while (!existing.empty() && !std::filesystem::exists(existing, ec))
        existing = existing.has_parent_path() && existing.parent_path() != existing ? existing.parent_path()
                                                                                      : std::filesystem::path();
    if (existing.empty())
        return;   // relative, with no existing parent: the start creates it under its working directory
    if (!std::filesystem::is_directory(existing, ec)) {
        problems.add(ErrorCode::FailedPrecondition,
                     what + " " + dir.string() + ": " + existing.string() + " is not a directory; " + fix);
        return;
    }
    if (::access(existing.c_str(), W_OK | X_OK) != 0)
        problems.add(ErrorCode::FailedPrecondition,
                     what + " " + dir.string() + ": " + existing.string()
                         + (existing == dir ? " is not writable by this user; "
                                            : " (where it would be created) is not writable by this user; ")
                         + fix);
}

} // namespace paddock
