// StepEngine's broker-side tools: read_records and request_environment, answered by the broker
// from the agent's records and the tier policy (EnvironmentDecider), with no sandbox involved.
// A request beyond the policy's bound opens a tier_escalation review (step_engine_tiers.cpp carries
// out its decision).
//
// Threads: the step workers run these for the session they hold the lease on.

#include "broker/engine/step_engine_internal.h"

#include "broker/review/open_review.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

namespace paddock::engine {

namespace {

using nlohmann::json;

// read_records: the agent's records under the keys or the prefix the call names into the result
// (a value that is JSON as JSON, any other as text), and the keys it asked for that have none.
// The agent store's error when it could not be read.
Status readRecords(const llm::ToolCall &call, const EnvironmentDecider &decider, const agents::Agent &agent,
                   json &result)
{
    std::vector<std::string> keys;
    if (auto it = call.arguments.find("keys"); it != call.arguments.end() && it->is_array()) {
        for (const auto &key : *it) {
            if (key.is_string())
                keys.push_back(key.get<std::string>());
        }
    }
    const std::string prefix = stringArg(call, "prefix");
    std::map<std::string, std::string> found;
    if (store::AgentStore *agentStore = decider.agentStore(); agentStore && agent.name != agents::kDefaultAgentName) {
        auto records = agentStore->records(agent.name, keys, prefix);
        if (!records)
            return std::unexpected(records.error());
        found = std::move(*records);
    }
    json records = json::object();
    for (const auto &[key, text] : found) {
        auto value = json::parse(text, nullptr, false);
        records[key] = value.is_discarded() ? json(text) : value;
    }
    json missing = json::array();
    for (const auto &key : keys) {
        if (!found.contains(key))
            missing.push_back(key);
    }
    result["agent"] = agent.name;
    result["records"] = records;
    result["count"] = found.size();
    if (!missing.empty())
        result["missing"] = missing;
    return {};
}

// The tier_escalation review of a request_environment beyond the policy's bound, priced from the
// tiers in the decision's context.
review::ReviewRequest tierEscalationRequest(const core::SessionState &state, const llm::ToolCall &call,
                                            const policy::DecisionContext &context, const std::string &tier,
                                            const std::string &reason, const policy::TierDecision &decision)
{
    double fromPrice = 0, toPrice = 0;
    for (const auto &info : context.tiers) {
        if (info.name == state.tier)
            fromPrice = info.pricePerHourUsd;
        if (info.name == tier)
            toPrice = info.pricePerHourUsd;
    }
    review::ReviewRequest request;
    request.kind = review::kind::TierEscalation;
    request.summary = "move session " + state.id + " from tier " + state.tier + " to tier " + tier;
    request.change = "session " + state.id + ": tier " + state.tier + " -> " + tier;
    request.changeFormat = "text";
    request.impact = fmt::format("{}${:.4f}/h ({} ${:.4f}/h -> {} ${:.4f}/h)", toPrice >= fromPrice ? "+" : "-",
                                 std::abs(toPrice - fromPrice), state.tier, fromPrice, tier, toPrice);
    request.costMicros = std::llround((toPrice - fromPrice) * 1e6);   // per hour on the new tier
    request.justification = reason;
    request.policyVerdict = decision.reason;
    request.requester = state.submittedBy;
    request.agent = state.agent;
    request.toolCallId = call.id;
    request.targetCount = 1;
    request.payload = {{"tier", tier}, {"from_tier", state.tier}, {"decision_id", decision.id},
                       {"reason", reason}, {"max_tier_without_review", decision.maxTierWithoutReview}};
    return request;
}

} // namespace

StepOutcome StepEngine::runBrokerTool(const Action &action)
{
    const llm::ToolCall &call = action.call;
    const core::SessionState &state = action.state;
    json result = toolResultBase(call);
    std::vector<core::NewEvent> events;
    auto answer = [&]() {
        events.push_back(event(core::kind::ToolResult, result));
        return appendResult(action, std::move(events));
    };
    const EnvironmentDecider *decider = m_options.decider;
    if (!decider) {
        result["error"] = call.name + " is not available: this broker was started without agents and tier policy";
        return answer();
    }
    auto agent = decider->agent(state.agent);
    if (!agent) {
        if (agent.error().code == ErrorCode::Unavailable)
            return {action.kind, false, m_options.retryAfterUnavailableMs, agent.error().message};
        result["error"] = agent.error().message;
        return answer();
    }

    if (call.name == llm::tool::ReadRecords) {
        if (auto read = readRecords(call, *decider, *agent, result); !read)
            return {action.kind, false, m_options.retryAfterUnavailableMs, read.error().message};
        return answer();
    }

    // request_environment {tier, reason}
    if (!action.review.is_null())
        return tierEscalationDecided(action, *decider, *agent);
    const std::string tier = stringArg(call, "tier");
    if (tier.empty()) {
        result["error"] = "request_environment needs a tier, e.g. {\"tier\": \"standard\", \"reason\": \"the build needs "
                          "4 GiB\"}";
        return answer();
    }
    const std::string reason = stringArg(call, "reason");
    const auto context = decider->context(*agent, {state.agent, state.tags, state.goal, state.playbook});
    policy::TierDecision decision = policy::decideRequest(context, state.tier, tier, reason);
    decision.id = EnvironmentDecider::decisionId(state.id, state.lastSeq + 1);
    events.push_back(event(core::kind::EnvDecision, decision.toJson()));
    result["decision_id"] = decision.id;
    result["requested_tier"] = tier;
    result["tier"] = decision.chosenTier;
    result["reason"] = decision.reason;
    switch (decision.verdict) {
    case policy::Verdict::Granted:
        result["granted"] = true;
        result["note"] = tier == state.tier ? "the session already runs on tier " + tier
                                            : "the session moves to tier " + tier + " before its next step; /workspace goes with it";
        break;
    case policy::Verdict::Refused:
        result["granted"] = false;
        result["error"] = "refused: " + decision.reason;
        break;
    case policy::Verdict::NeedsReview: {
        // Beyond the bound a human decides: the call waits for a tier_escalation review, and its
        // result is written once the review is decided (tierEscalationDecided).
        const review::ReviewRequest request = tierEscalationRequest(state, call, context, tier, reason, decision);
        events.push_back(review::openReview(request, m_options.reviewPolicy, nowUnixMs()));
        return appendResult(action, std::move(events));
    }
    }
    return answer();
}

} // namespace paddock::engine
