// The policy file's [[tier_rule]] tables: parsing, errors with file:line, and matching.

#include "broker/policy/tier_rules.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

namespace paddock::policy {
namespace {

Result<TierPolicy> parse(std::string_view text)
{
    PolicyFile file;
    file.path = "policy.toml";
    file.table = toml::parse(text, std::string_view("policy.toml"));
    return parseTierPolicy(file);
}

TEST(TierRules, FirstMatchingRuleWins)
{
    auto policy = parse(R"(
[decisions]
expected_duration_minutes = 45

[[tier_rule]]
name = "bots build big"
agent = "build-bot"
tags = ["build", "release"]
tier = "heavy"
max_tier_without_review = "heavy"

[[tier_rule]]
goal_words = ["Compile", "link"]
tier = "standard"

[[tier_rule]]
playbook = "hello-c"
tier = "lite"
)");
    ASSERT_TRUE(policy) << policy.error().message;
    EXPECT_EQ(policy->expectedDurationMs, 45 * 60000);
    ASSERT_EQ(policy->rules.size(), 3u);
    EXPECT_EQ(policy->rules[1].name, "rule 2");
    EXPECT_EQ(policy->rules[1].maxTierWithoutReview, "standard") << "defaults to the rule's tier";

    // Every condition a rule gives must match; within a list, any item.
    EXPECT_EQ(policy->match({"build-bot", {"release"}, "ship it", ""})->name, "bots build big");
    EXPECT_EQ(policy->match({"other-bot", {"release"}, "please compile this", ""})->name, "rule 2");
    EXPECT_EQ(policy->match({"build-bot", {}, "LINK: the binary", ""})->name, "rule 2") << "words, case-insensitive";
    EXPECT_EQ(policy->match({"x", {}, "compiler", ""}), nullptr) << "whole words only";
    EXPECT_EQ(policy->match({"x", {}, "say hello", "hello-c"})->name, "rule 3");
    EXPECT_EQ(policy->match({"x", {"docs"}, "write docs", "inspect"}), nullptr);
    EXPECT_EQ(policy->rules[0].describe(), "agent=build-bot, tags=[build,release]");
}

TEST(TierRules, ErrorsNameTheLineAndTheFix)
{
    auto noTier = parse("[[tier_rule]]\nagent = \"a\"\n");
    ASSERT_FALSE(noTier);
    EXPECT_NE(noTier.error().message.find("policy.toml:1"), std::string::npos) << noTier.error().message;
    EXPECT_NE(noTier.error().message.find("add tier = "), std::string::npos);
    auto unknown = parse("[[tier_rule]]\ntier = \"lite\"\ngoal = \"x\"\n");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("policy.toml:3: unknown key 'goal'"), std::string::npos)
        << unknown.error().message;
    auto badTags = parse("[[tier_rule]]\ntier = \"lite\"\ntags = [1]\n");
    ASSERT_FALSE(badTags);
    EXPECT_NE(badTags.error().message.find("tags must be a list of strings"), std::string::npos);
    auto notArray = parse("tier_rule = 3\n");
    ASSERT_FALSE(notArray);
    EXPECT_NE(notArray.error().message.find("[[tier_rule]]"), std::string::npos);
    // No file: no rules, the default duration.
    auto none = parseTierPolicy(PolicyFile{});
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->rules.empty());
}

TEST(PolicyFile, BadTomlNamesFileAndLine)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-policy-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = dir / "policy.toml";
    {
        std::ofstream(path) << "[[tier_rule]]\ntier = \"lite\"\nagent = \n";
    }
    auto loaded = loadPolicyFile(path);
    ASSERT_FALSE(loaded);
    EXPECT_NE(loaded.error().message.find(path.string() + ":3"), std::string::npos) << loaded.error().message;
    auto missing = loadPolicyFile(dir / "nope.toml");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("policy_file"), std::string::npos);
    std::filesystem::remove_all(dir);
}

} // namespace
} // namespace paddock::policy
