#pragma once
// Problems found while reading or checking a configuration. A loader adds each problem and carries
// on, so one run names every problem (`paddockd --check-config`, `paddock-pool --check-config`);
// a start that stops at problems reports them all at once. Each message names file:line (where
// there is one), the key and the fix.
//
// Also the known keys of each config section (ConfigSection): the loaders refuse keys outside
// these lists, and a test holds docs/configuration.md to them, so the reference cannot drift.
//
// Threads: plain values; one owner at a time.

#include "common/result.h"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace paddock {

class ConfigProblems {
public:
    void add(Error error) { m_problems.push_back(std::move(error)); }
    void add(ErrorCode code, std::string message) { m_problems.push_back({code, std::move(message)}); }
    // Adds the error of a failed Status or Result; true when there was one.
    template <typename T>
    bool addIfFailed(const std::expected<T, Error> &result)
    {
        if (result)
            return false;
        add(result.error());
        return true;
    }

    bool empty() const { return m_problems.empty(); }
    size_t size() const { return m_problems.size(); }
    const std::vector<Error> &all() const { return m_problems; }

    // For callers that stop at problems: the first problem's code, every message one per line.
    Error joined() const;

private:
    std::vector<Error> m_problems;
};

// One table of a config file and the keys its loader accepts. name is how docs/configuration.md
// heads the table: "" for the top level, "[[pool]]", "[models.openai]", ...
struct ConfigSection {
    std::string file;     // "broker.toml", "pool.toml", "policy.toml"
    std::string name;
    std::vector<std::string> keys;

    bool accepts(std::string_view key) const;
    // "a, b and c", for messages that list the keys.
    std::string keyList() const;
};

// For a directory a start would create (ensurePrivateDirectory), checked without creating it: adds
// a problem unless it is a directory this user may write, or its nearest existing parent is one.
// what names the key ("data_dir"), fix says how to point it elsewhere.
void checkCreatableDirectory(const std::string &what, const std::filesystem::path &dir, const std::string &fix,
                             ConfigProblems &problems);

// Prints each problem to stderr as "program: message", a line per line of a message that has several.
void printProblems(const ConfigProblems &problems, std::string_view program);

} // namespace paddock
