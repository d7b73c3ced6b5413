// docs/configuration.md against the loaders' own key tables: every key a loader accepts is
// documented in its table's section, and every key the reference documents is one the loader
// accepts. The loaders refuse keys outside these tables, so the reference cannot drift from them.

#include "broker/policy/policy_file.h"
#include "broker/review/review_policy.h"
#include "broker/config/broker_config.h"
#include "pool/core/pool_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace {

using namespace paddock;

std::vector<ConfigSection> allSections()
{
    std::vector<ConfigSection> out = broker_config::brokerConfigSections();
    for (const auto *list : {&pool::poolConfigSections(), &policy::policySections(), &review::reviewPolicySections()})
        out.insert(out.end(), list->begin(), list->end());
    return out;
}

// The reference, cut at its headings: "## broker.toml" starts a file, "### [[pool]]" one of its
// tables ("### Top level" for the keys outside any table). Keyed by "file/table".
std::map<std::string, std::string> referenceSections()
{
    std::ifstream in(std::string(PADDOCK_SOURCE_DIR) + "/docs/configuration.md");
    EXPECT_TRUE(in) << "docs/configuration.md is missing";
    std::map<std::string, std::string> out;
    std::string file, table, line;
    while (std::getline(in, line)) {
        if (line.starts_with("## ")) {
            file = line.substr(3, line.find(' ', 3) == std::string::npos ? std::string::npos : line.find(' ', 3) - 3);
            table.clear();
            continue;
        }
        if (line.starts_with("### ")) {
            table = line.substr(4);
            if (table == "Top level")
                table.clear();
            out[file + "/" + table];   // present even when empty
            continue;
        }
        if (!file.empty())
            out[file + "/" + table] += line + "\n";
    }
    return out;
}

std::string heading(const ConfigSection &section)
{
    return "\"## " + section.file + "\", \"### " + (section.name.empty() ? "Top level" : section.name) + "\"";
}

TEST(ConfigReference, EveryKeyTheLoadersAcceptIsDocumentedInItsTable)
{
    const auto reference = referenceSections();
    for (const auto &section : allSections()) {
        const auto found = reference.find(section.file + "/" + section.name);
        ASSERT_NE(found, reference.end()) << "docs/configuration.md has no section " << heading(section);
        for (const auto &key : section.keys) {
            const bool documented = found->second.find("`" + key + "`") != std::string::npos
                || found->second.find("`[" + key + "]`") != std::string::npos
                || found->second.find("`[[" + key + "]]`") != std::string::npos;
            EXPECT_TRUE(documented) << "docs/configuration.md, section " << heading(section) << ": key `" << key
                                    << "`, which the loader accepts, is not documented";
        }
    }
}

TEST(ConfigReference, EveryDocumentedKeyIsOneTheLoaderAccepts)
{
    const auto reference = referenceSections();
    std::map<std::string, const ConfigSection *> byName;
    const auto sections = allSections();
    for (const auto &section : sections)
        byName[section.file + "/" + section.name] = &section;
    // A table row's first cell: | `key` | or | `[key]` | or | `[[key]]` |.
    const std::regex row(R"(^\| `\[{0,2}([a-z_]+)\]{0,2}` \|)");
    for (const auto &[name, text] : reference) {
        const auto section = byName.find(name);
        if (section == byName.end())
            continue;   // a file's introduction
        std::istringstream lines(text);
        std::string line;
        int rows = 0;
        while (std::getline(lines, line)) {
            std::smatch match;
            if (!std::regex_search(line, match, row))
                continue;
            ++rows;
            EXPECT_TRUE(section->second->accepts(match[1].str()))
                << "docs/configuration.md, section " << heading(*section->second) << " documents `" << match[1]
                << "`, which the loader does not accept (it takes " << section->second->keyList() << ")";
        }
        EXPECT_EQ(rows, static_cast<int>(section->second->keys.size()))
            << "docs/configuration.md, section " << heading(*section->second) << ": one table row per key";
    }
}

} // namespace
