// The environment decision of each selection mode, at start and on request_environment, and an
// override: chooser, tier, rule, verdict and alternatives.

#include "broker/policy/environment.h"

#include <gtest/gtest.h>

namespace paddock::policy {
namespace {

const std::vector<TierInfo> kTiers{{"heavy", 8, 16LL << 30, 0.96},
                                   {"lite", 0.5, 512LL << 20, 0.02},
                                   {"standard", 2, 4LL << 30, 0.12}};

struct Fixture {
    agents::Agent agent;
    TierPolicy policy;
    DecisionContext context()
    {
        DecisionContext c;
        c.agent = &agent;
        c.facts = {agent.name, {"build"}, "compile the thing", "hello-c"};
        c.policy = &policy;
        c.tiers = kTiers;
        c.brokerDefaultTier = "lite";
        return c;
    }
};

Fixture withMode(agents::SelectionMode mode)
{
    Fixture f;
    f.agent.name = "bot";
    f.agent.selectionMode = mode;
    TierRule rule;
    rule.name = "builds";
    rule.tags = {"build"};
    rule.tier = "standard";
    rule.maxTierWithoutReview = "standard";
    f.policy.rules.push_back(rule);
    f.policy.expectedDurationMs = 60 * 60000;
    return f;
}

TEST(EnvironmentDecision, TiersOrderBySize)
{
    const auto ordered = orderedTiers(kTiers);
    EXPECT_EQ(ordered[0].name, "lite");
    EXPECT_EQ(ordered[2].name, "heavy");
    EXPECT_EQ(tierRank(ordered, "standard"), 1);
    EXPECT_EQ(tierRank(ordered, "gpu"), -1);
    EXPECT_EQ(estimatedCostMicros(kTiers[2], 30 * 60000), 60000);   // $0.12/h for half an hour
}

TEST(EnvironmentDecision, EachModeAtStart)
{
    auto f = withMode(agents::SelectionMode::Default);
    f.agent.defaultTier = "standard";
    auto d = decideAtStart(f.context(), "");
    EXPECT_EQ(d.chooser, "default");
    EXPECT_EQ(d.chosenTier, "standard");
    ASSERT_EQ(d.alternatives.size(), 3u);
    EXPECT_EQ(d.alternatives[0].tier, "lite");
    EXPECT_EQ(d.alternatives[0].estimatedCostMicros, 20000);
    EXPECT_EQ(d.alternatives[1].note, "chosen");
    EXPECT_EQ(d.toJson()["verdict"], "granted");

    f = withMode(agents::SelectionMode::Human);
    d = decideAtStart(f.context(), "heavy");
    EXPECT_EQ(d.chooser, "human");
    EXPECT_EQ(d.chosenTier, "heavy");
    d = decideAtStart(f.context(), "");
    EXPECT_EQ(d.chooser, "default");
    EXPECT_EQ(d.chosenTier, "lite") << "no agent default: the broker's";

    f = withMode(agents::SelectionMode::Platform);
    d = decideAtStart(f.context(), "heavy");
    EXPECT_EQ(d.chooser, "platform");
    EXPECT_EQ(d.rule, "builds");
    EXPECT_EQ(d.chosenTier, "standard");
    EXPECT_NE(d.reason.find("gives way"), std::string::npos) << d.reason;
    f.policy.rules.clear();
    d = decideAtStart(f.context(), "");
    EXPECT_EQ(d.chooser, "default");
    EXPECT_NE(d.reason.find("no [[tier_rule]] matches"), std::string::npos);

    f = withMode(agents::SelectionMode::Agent);
    f.agent.allowedTiers = {"lite", "standard"};
    d = decideAtStart(f.context(), "");
    EXPECT_EQ(d.chooser, "default");
    EXPECT_EQ(d.alternatives[2].note, "not allowed for this agent");

    f = withMode(agents::SelectionMode::Hybrid);
    d = decideAtStart(f.context(), "");
    EXPECT_EQ(d.chosenTier, "lite");
    EXPECT_EQ(d.maxTierWithoutReview, "standard");
    EXPECT_EQ(d.alternatives[2].note, "needs review (above standard)");
}

TEST(EnvironmentDecision, AgentRequestsWithinAllowedTiers)
{
    auto f = withMode(agents::SelectionMode::Agent);
    f.agent.allowedTiers = {"lite", "standard"};
    auto d = decideRequest(f.context(), "lite", "standard", "needs memory");
    EXPECT_EQ(d.verdict, Verdict::Granted);
    EXPECT_EQ(d.chooser, "agent");
    EXPECT_EQ(d.chosenTier, "standard");
    EXPECT_NE(d.reason.find("needs memory"), std::string::npos);
    d = decideRequest(f.context(), "lite", "heavy", "");
    EXPECT_EQ(d.verdict, Verdict::Refused);
    EXPECT_EQ(d.chosenTier, "lite") << "a refusal keeps the tier";
    EXPECT_NE(d.reason.find("not among agent 'bot''s allowed tiers (lite, standard)"), std::string::npos) << d.reason;
    d = decideRequest(f.context(), "lite", "gpu", "");
    EXPECT_EQ(d.verdict, Verdict::Refused);
    EXPECT_NE(d.reason.find("no pool offers tier 'gpu'"), std::string::npos);

    f = withMode(agents::SelectionMode::Default);
    d = decideRequest(f.context(), "lite", "standard", "");
    EXPECT_EQ(d.verdict, Verdict::Refused);
    EXPECT_NE(d.reason.find("cannot choose its tier"), std::string::npos);
}

TEST(EnvironmentDecision, HybridBeyondThePolicyBoundNeedsReview)
{
    auto f = withMode(agents::SelectionMode::Hybrid);
    auto d = decideRequest(f.context(), "lite", "standard", "");
    EXPECT_EQ(d.verdict, Verdict::Granted);
    EXPECT_EQ(d.rule, "builds");
    d = decideRequest(f.context(), "lite", "heavy", "big build");
    EXPECT_EQ(d.verdict, Verdict::NeedsReview);
    EXPECT_EQ(d.maxTierWithoutReview, "standard");
    EXPECT_EQ(d.toJson()["verdict"], "needs_review");
    // No rule matches: the agent's default tier is the bound.
    f.policy.rules.clear();
    d = decideRequest(f.context(), "lite", "standard", "");
    EXPECT_EQ(d.verdict, Verdict::NeedsReview);
    EXPECT_EQ(d.rule, "default tier bound");
    // Beyond the allowed tiers is refused outright, review or not.
    f.agent.allowedTiers = {"lite"};
    EXPECT_EQ(decideRequest(f.context(), "lite", "heavy", "").verdict, Verdict::Refused);
}

TEST(EnvironmentDecision, AgentModeIsBoundByAMatchingRule)
{
    // A matching rule's bound holds in agent mode too: above it a human decides.
    auto f = withMode(agents::SelectionMode::Agent);
    auto d = decideRequest(f.context(), "lite", "heavy", "big build");
    EXPECT_EQ(d.verdict, Verdict::NeedsReview);
    EXPECT_EQ(d.rule, "builds");
    EXPECT_EQ(d.maxTierWithoutReview, "standard");
    EXPECT_EQ(d.chosenTier, "lite") << "the session keeps its tier until a human decides";
    EXPECT_NE(d.reason.find("above standard"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("big build"), std::string::npos) << d.reason;
    EXPECT_EQ(decideAtStart(f.context(), "").maxTierWithoutReview, "standard");
    EXPECT_EQ(decideRequest(f.context(), "lite", "standard", "").verdict, Verdict::Granted);
    // Without one, agent mode is bound only by its allowed tiers (hybrid: by its default tier).
    f.policy.rules.clear();
    d = decideRequest(f.context(), "lite", "heavy", "");
    EXPECT_EQ(d.verdict, Verdict::Granted);
    EXPECT_EQ(d.rule, "allowed tiers");
    EXPECT_EQ(d.maxTierWithoutReview, "");
}

TEST(EnvironmentDecision, OverrideIsAHumansChoice)
{
    auto f = withMode(agents::SelectionMode::Platform);
    auto d = decideOverride(f.context(), "lite", "heavy", "the build OOMs", "alice");
    EXPECT_EQ(d.chooser, "human");
    EXPECT_EQ(d.who, "alice");
    EXPECT_EQ(d.trigger, "override");
    EXPECT_EQ(d.chosenTier, "heavy");
    EXPECT_EQ(d.reason, "alice moved the session from lite to heavy: the build OOMs");
    const auto j = d.toJson();
    EXPECT_EQ(j["who"], "alice");
    EXPECT_EQ(j["alternatives"].size(), 3u);
}

} // namespace
} // namespace paddock::policy
