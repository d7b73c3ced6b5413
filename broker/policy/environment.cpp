#include "broker/policy/environment.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace paddock::policy {

namespace {

const agents::Agent &agentOf(const DecisionContext &context, agents::Agent &fallback)
{
    if (context.agent)
        return *context.agent;
    fallback = agents::builtInDefaultAgent(context.brokerDefaultTier);
    return fallback;
}

std::string defaultTierOf(const DecisionContext &context, const agents::Agent &agent)
{
    return agent.defaultTier.empty() ? context.brokerDefaultTier : agent.defaultTier;
}

// Every tier the agent may use, with its estimated cost; notes say what sets one apart.
std::vector<TierAlternative> alternatives(const DecisionContext &context, const agents::Agent &agent,
                                          const std::string &chosen, const std::string &bound)
{
    std::vector<TierAlternative> out;
    const auto ordered = orderedTiers(context.tiers);
    const int boundRank = bound.empty() ? -1 : tierRank(ordered, bound);
    const int64_t duration = context.policy ? context.policy->expectedDurationMs : TierPolicy{}.expectedDurationMs;
    for (int i = 0; i < static_cast<int>(ordered.size()); ++i) {
        const auto &tier = ordered[static_cast<size_t>(i)];
        TierAlternative alternative{tier.name, estimatedCostMicros(tier, duration), ""};
        if (tier.name == chosen)
            alternative.note = "chosen";
        else if (!agent.allows(tier.name))
            alternative.note = "not allowed for this agent";
        else if (boundRank >= 0 && i > boundRank)
            alternative.note = "needs review (above " + bound + ")";
        out.push_back(std::move(alternative));
    }
    return out;
}

TierDecision base(const DecisionContext &context, const agents::Agent &agent, const char *trigger,
                  const std::string &requested)
{
    TierDecision decision;
    decision.trigger = trigger;
    decision.requestedTier = requested;
    decision.agent = agent.name.empty() ? context.facts.agent : agent.name;
    return decision;
}

std::string durationText(const DecisionContext &context)
{
    const int64_t ms = context.policy ? context.policy->expectedDurationMs : TierPolicy{}.expectedDurationMs;
    return std::to_string(ms / 60000) + " min";
}

} // namespace

std::vector<TierInfo> orderedTiers(std::vector<TierInfo> tiers)
{
    std::ranges::sort(tiers, [](const TierInfo &a, const TierInfo &b) {
        return std::tie(a.pricePerHourUsd, a.memoryBytes, a.cpu, a.name)
            < std::tie(b.pricePerHourUsd, b.memoryBytes, b.cpu, b.name);
    });
    return tiers;
}

int tierRank(const std::vector<TierInfo> &ordered, const std::string &tier)
{
    for (size_t i = 0; i < ordered.size(); ++i) {
        if (ordered[i].name == tier)
            return static_cast<int>(i);
    }
    return -1;
}

int64_t estimatedCostMicros(const TierInfo &tier, int64_t expectedDurationMs)
{
    return std::llround(tier.pricePerHourUsd * 1e6 * static_cast<double>(expectedDurationMs) / 3.6e6);
}

nlohmann::json TierDecision::toJson() const
{
    nlohmann::json alts = nlohmann::json::array();
    for (const auto &a : alternatives)
        alts.push_back({{"tier", a.tier}, {"estimated_cost_micros", a.estimatedCostMicros}, {"note", a.note}});
    nlohmann::json j{{"id", id},
                     {"requested_tier", requestedTier},
                     {"chosen_tier", chosenTier},
                     {"chooser", chooser},
                     {"rule", rule},
                     {"reason", reason},
                     {"alternatives", alts},
                     {"trigger", trigger},
                     {"who", who},
                     {"agent", agent},
                     {"verdict", verdict == Verdict::Granted ? "granted" : verdict == Verdict::Refused ? "refused"
                                                                                                     : "needs_review"}};
    if (!maxTierWithoutReview.empty())
        j["max_tier_without_review"] = maxTierWithoutReview;
    return j;
}

TierDecision decideAtStart(const DecisionContext &context, const std::string &requestedTier)
{
    agents::Agent fallback;
    const agents::Agent &agent = agentOf(context, fallback);
    TierDecision decision = base(context, agent, "session_start", requestedTier);
    const std::string defaultTier = defaultTierOf(context, agent);
    const char *mode = agents::selectionModeName(agent.selectionMode);
    const TierRule *rule = nullptr;
    if (agent.selectionMode != agents::SelectionMode::Default && agent.selectionMode != agents::SelectionMode::Human)
        rule = context.policy ? context.policy->match(context.facts) : nullptr;

    if (agent.selectionMode == agents::SelectionMode::Platform && rule) {
        decision.chosenTier = rule->tier;
        decision.chooser = "platform";
        decision.rule = rule->name;
        decision.reason = "policy rule '" + rule->name + "' (" + rule->describe() + ") picks " + rule->tier;
        if (!requestedTier.empty() && requestedTier != rule->tier)
            decision.reason += "; the submitted tier " + requestedTier + " gives way to the platform's rule";
        decision.maxTierWithoutReview = rule->maxTierWithoutReview;
    } else if (!requestedTier.empty()) {
        // A tier named at submit is a human's choice (the submitter's), in every mode but platform
        // with a matching rule.
        decision.chosenTier = requestedTier;
        decision.chooser = "human";
        decision.rule = "submitted tier";
        decision.reason = std::string("the submitter picked ") + requestedTier + " (agent '" + decision.agent
            + "' selection mode " + mode + ")";
    } else {
        decision.chosenTier = defaultTier;
        decision.chooser = "default";
        decision.rule = "default tier";
        switch (agent.selectionMode) {
        case agents::SelectionMode::Default:
            decision.reason = "agent '" + decision.agent + "' runs on its default tier " + defaultTier;
            break;
        case agents::SelectionMode::Human:
            decision.reason = "selection mode human, but the submitter named no tier: the default tier " + defaultTier;
            break;
        case agents::SelectionMode::Platform:
            decision.reason = "selection mode platform, but no [[tier_rule]] matches this session: the default tier "
                + defaultTier;
            break;
        case agents::SelectionMode::Agent:
        case agents::SelectionMode::Hybrid:
            decision.reason = std::string("selection mode ") + mode + ": starts on the default tier " + defaultTier
                + "; the agent may ask for another with request_environment";
            break;
        }
        if (rule) {
            decision.maxTierWithoutReview = rule->maxTierWithoutReview;
            decision.rule = rule->name;
        }
    }
    decision.alternatives = alternatives(context, agent, decision.chosenTier, decision.maxTierWithoutReview);
    decision.reason += " (estimates: " + durationText(context) + " at each tier's price)";
    return decision;
}

TierBound requestBound(const DecisionContext &context)
{
    agents::Agent fallback;
    const agents::Agent &agent = agentOf(context, fallback);
    const bool hybrid = agent.selectionMode == agents::SelectionMode::Hybrid;
    TierBound bound;
    bound.matched = context.policy ? context.policy->match(context.facts) : nullptr;
    bound.tier = bound.matched ? bound.matched->maxTierWithoutReview : hybrid ? defaultTierOf(context, agent) : "";
    bound.rule = bound.matched ? bound.matched->name : hybrid ? "default tier bound" : "allowed tiers";
    return bound;
}

TierDecision decideRequest(const DecisionContext &context, const std::string &currentTier, const std::string &tier,
                           const std::string &reason)
{
    agents::Agent fallback;
    const agents::Agent &agent = agentOf(context, fallback);
    TierDecision decision = base(context, agent, "request_environment", tier);
    decision.chooser = "agent";
    decision.chosenTier = currentTier;
    const std::string why = reason.empty() ? std::string() : " (the agent's reason: " + reason + ")";
    const auto ordered = orderedTiers(context.tiers);
    if (!context.tiers.empty() && tierRank(ordered, tier) < 0) {
        std::string names;
        for (const auto &t : ordered)
            names += (names.empty() ? "" : ", ") + t.name;
        decision.verdict = Verdict::Refused;
        decision.rule = "unknown tier";
        decision.reason = "no pool offers tier '" + tier + "'; the pools offer " + names;
    } else if (agent.selectionMode != agents::SelectionMode::Agent
               && agent.selectionMode != agents::SelectionMode::Hybrid) {
        decision.verdict = Verdict::Refused;
        decision.rule = "selection mode";
        decision.reason = std::string("agent '") + decision.agent + "' has selection mode "
            + agents::selectionModeName(agent.selectionMode) + ", so it cannot choose its tier; a human can override "
            "it (paddockctl override SESSION TIER), or set the agent's selection mode to agent or hybrid";
    } else if (!agent.allows(tier)) {
        std::string allowed;
        for (const auto &t : agent.allowedTiers)
            allowed += (allowed.empty() ? "" : ", ") + t;
        decision.verdict = Verdict::Refused;
        decision.rule = "allowed tiers";
        decision.reason = "tier '" + tier + "' is not among agent '" + decision.agent + "''s allowed tiers (" + allowed
            + ")" + why;
    } else {
        // The bound above which a human decides: a matching tier rule's max_tier_without_review in
        // both modes (the platform said how far a session like this goes on its own); without one,
        // hybrid is bound by the agent's default tier and agent mode only by its allowed tiers.
        const TierBound limit = requestBound(context);
        const TierRule *rule = limit.matched;
        const std::string &bound = limit.tier;
        decision.maxTierWithoutReview = bound;
        decision.rule = limit.rule;
        const int rank = tierRank(ordered, tier);
        const int boundRank = bound.empty() ? -1 : tierRank(ordered, bound);
        if (rank >= 0 && boundRank >= 0 && rank > boundRank) {
            decision.verdict = Verdict::NeedsReview;
            decision.reason = "tier '" + tier + "' is above " + bound + ", the highest tier this agent gets without "
                "review" + (rule ? " (policy rule '" + rule->name + "')" : std::string(" (its default tier)")) + why;
        } else if (!bound.empty()) {
            decision.chosenTier = tier;
            decision.reason = "granted within the platform's bound " + bound + why;
        } else {
            decision.chosenTier = tier;
            decision.reason = "granted: tier '" + tier + "' is among the agent's allowed tiers" + why;
        }
    }
    decision.alternatives = alternatives(context, agent, decision.chosenTier, decision.maxTierWithoutReview);
    return decision;
}

TierDecision decideOverride(const DecisionContext &context, const std::string &currentTier, const std::string &tier,
                            const std::string &reason, const std::string &who)
{
    agents::Agent fallback;
    const agents::Agent &agent = agentOf(context, fallback);
    TierDecision decision = base(context, agent, "override", tier);
    decision.chosenTier = tier;
    decision.chooser = "human";
    decision.who = who;
    decision.rule = "override";
    decision.reason = who + " moved the session from " + (currentTier.empty() ? "(none)" : currentTier) + " to " + tier
        + (reason.empty() ? std::string() : ": " + reason);
    decision.alternatives = alternatives(context, agent, tier, "");
    return decision;
}

} // namespace paddock::policy
