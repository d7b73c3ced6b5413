// Agent validation: every refusal names the problem and the fix.

#include "broker/agents/agent.h"

#include <gtest/gtest.h>

namespace paddock::agents {
namespace {

const std::optional<std::set<std::string>> kTiers = std::set<std::string>{"lite", "standard", "heavy"};

Agent valid()
{
    Agent agent;
    agent.name = "build-bot";
    agent.defaultTier = "lite";
    agent.allowedTiers = {"lite", "standard"};
    return agent;
}

std::string refusal(const Agent &agent, const std::optional<std::set<std::string>> &tiers = kTiers)
{
    auto status = validateAgent(agent, tiers);
    EXPECT_FALSE(status);
    if (status)
        return {};
    EXPECT_EQ(status.error().code, ErrorCode::InvalidArgument);
    return status.error().message;
}

TEST(AgentValidation, AcceptsAValidAgent)
{
    EXPECT_TRUE(validateAgent(valid(), kTiers));
    // Unknown tiers cannot be checked while no pool answers; the form still is.
    Agent agent = valid();
    agent.allowedTiers.push_back("gpu");
    EXPECT_TRUE(validateAgent(agent, std::nullopt));
}

TEST(AgentValidation, RefusesBadInput)
{
    Agent agent = valid();
    agent.defaultTier = "huge";
    agent.allowedTiers.clear();
    EXPECT_NE(refusal(agent).find("unknown tier 'huge' in its default tier; the pools offer: heavy, lite, standard"),
              std::string::npos);
    agent = valid();
    agent.defaultTier = "heavy";
    EXPECT_NE(refusal(agent).find("default tier 'heavy' is not among its allowed tiers"), std::string::npos);
    agent = valid();
    agent.budgetPerDayMicros = -5;
    EXPECT_NE(refusal(agent).find("negative budget"), std::string::npos);
    agent = valid();
    agent.allowedTiers = {"lite", "lite"};
    EXPECT_NE(refusal(agent).find("twice"), std::string::npos);
    for (const std::string &name : std::vector<std::string>{"", "Upper", "-dash-first", "with space", std::string(65, 'a')}) {
        agent = valid();
        agent.name = name;
        EXPECT_NE(refusal(agent).find("a-z, 0-9"), std::string::npos) << name;
    }
    agent = valid();
    agent.name = "default";
    EXPECT_NE(refusal(agent).find("built in"), std::string::npos);
    agent = valid();
    agent.records["repo"] = "{\"branch\": ";
    EXPECT_NE(refusal(agent).find("record 'repo' is not a JSON document"), std::string::npos);
    agent = valid();
    agent.records["has space"] = "1";
    EXPECT_NE(refusal(agent).find("contains a space"), std::string::npos);
}

TEST(AgentValidation, RecordsAreAnyJsonDocument)
{
    EXPECT_TRUE(validateRecord("k", "{\"a\": [1, 2]}"));
    EXPECT_TRUE(validateRecord("k", "\"text\""));
    EXPECT_TRUE(validateRecord("k", "42"));
    EXPECT_FALSE(validateRecord("k", "text"));
    EXPECT_FALSE(validateRecord("k", std::string(kMaxRecordBytes + 1, ' ')));
}

TEST(AgentValidation, ModesRoundTripTheirNames)
{
    for (auto mode : {SelectionMode::Default, SelectionMode::Agent, SelectionMode::Platform, SelectionMode::Human,
                      SelectionMode::Hybrid})
        EXPECT_EQ(selectionModeFromName(selectionModeName(mode)), mode);
    EXPECT_FALSE(selectionModeFromName("whoever"));
}

} // namespace
} // namespace paddock::agents
