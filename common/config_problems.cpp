#include "common/config_problems.h"

#include <algorithm>
#include <cstdio>

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

void printProblems(const ConfigProblems &problems, std::string_view program)
{
    for (const auto &problem : problems.all()) {
        std::string_view rest = problem.message;
        while (true) {
            const size_t end = std::min(rest.find('\n'), rest.size());
            std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
                         static_cast<int>(end), rest.data());
            if (end == rest.size())
                break;
            rest.remove_prefix(end + 1);
        }
    }
}

} // namespace paddock
