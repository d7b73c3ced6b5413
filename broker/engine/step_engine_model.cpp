// StepEngine's model step: asks the session's model for its next turn, and records the response,
// its cost and the tool calls it makes (or the end of the session when it makes none).
//
// Threads: the step workers run it for the session they hold the lease on. The model's call parks
// the step (ModelAdapter::nextAsync); modelEffect runs on a worker once the model answered.

#include "broker/engine/step_engine_internal.h"
#include "broker/metrics/broker_metrics.h"

namespace paddock::engine {

namespace {

using nlohmann::json;

void countModelCall(const std::string &model, std::chrono::steady_clock::time_point since,
                    const Result<llm::ModelTurn> &turn)
{
    const bool answered = turn || turn.error().code != ErrorCode::Cancelled;   // a stopping broker's calls are not calls
    if (answered)
        broker_metrics::countModelCall(model, since, turn.has_value(), turn ? turn->usage.inputTokens : 0,
                                       turn ? turn->usage.outputTokens : 0, turn ? turn->usage.cachedTokens : 0);
}

} // namespace

std::optional<llm::EnvironmentBrief> environmentBrief(const EnvironmentDecider *decider,
                                                      const core::SessionState &state)
{
    if (!decider)
        return std::nullopt;
    auto agent = decider->agent(state.agent);
    if (!agent)
        return std::nullopt;
    const policy::DecisionContext context = decider->context(*agent, {state.agent, state.tags, state.goal, state.playbook});
    llm::EnvironmentBrief brief;
    brief.currentTier = state.tier;
    brief.selectionMode = agents::selectionModeName(agent->selectionMode);
    brief.mayRequest = agent->selectionMode == agents::SelectionMode::Agent
        || agent->selectionMode == agents::SelectionMode::Hybrid;
    if (brief.mayRequest)
        brief.bound = policy::requestBound(context).tier;
    const auto ordered = policy::orderedTiers(context.tiers);
    const int boundRank = brief.bound.empty() ? -1 : policy::tierRank(ordered, brief.bound);
    for (size_t i = 0; i < ordered.size(); ++i) {
        llm::TierChoice tier;
        tier.name = ordered[i].name;
        tier.cpu = ordered[i].cpu;
        tier.memoryBytes = ordered[i].memoryBytes;
        tier.pricePerHourUsd = ordered[i].pricePerHourUsd;
        tier.allowed = agent->allows(tier.name);
        tier.needsReview = boundRank >= 0 && static_cast<int>(i) > boundRank;
        brief.tiers.push_back(std::move(tier));
    }
    return brief;
}

llm::ModelAdapter *StepEngine::adapterFor(const Action &action)
{
    llm::ModelAdapter *adapter = m_models(action.state.model);
    if (adapter) {
        std::lock_guard lock(m_leasesMutex);
        m_adapters.insert(adapter);   // stop() cancels its calls
    }
    return adapter;
}

StepOutcome StepEngine::noSuchModel(const Action &action)
{
    return appendResult(action, {event(core::kind::StateChanged,
                                       {{"status", "failed"},
                                        {"reason", "no model named '" + action.state.model
                                                       + "' is configured on this broker"}})});
}

StepOutcome StepEngine::callModel(const StepRun &run, const Action &action, llm::ModelContext context)
{
    llm::ModelAdapter *adapter = adapterFor(action);
    if (!adapter)
        return noSuchModel(action);
    return awaitCall<AskedTurn>(
        run, askModel(action, adapter, std::move(context)),
        [this, action, since = std::chrono::steady_clock::now()](AskedTurn asked) {
            countModelCall(action.state.model, since, asked.first);
            Action after = action;
            after.state.lastSeq = asked.second;   // after the answer's model.delta events
            return record(after, modelEffect(after, std::move(asked.first)));
        });
}

std::function<void(std::function<void(StepEngine::AskedTurn)>)>
StepEngine::askModel(const Action &action, llm::ModelAdapter *adapter, llm::ModelContext context)
{
    // The answer is redacted as it streams, for every value the store holds (its model.response
    // is too, in appendResult).
    OutputRecorder::Start start{action.state.id, {}, action.state.lastSeq, {},
                                m_options.secrets ? m_options.secrets->snapshot() : nullptr, action.leaseToken};
    return [this, adapter, context = std::move(context), start](std::function<void(AskedTurn)> done) {
        auto deltas = m_output.openModelCall(start);
        llm::ModelContext asked = context;
        asked.onDelta = [this, deltas](const llm::ModelDelta &delta) { m_output.addDelta(*deltas, delta); };
        adapter->nextAsync(std::move(asked), [this, deltas, done = std::move(done)](Result<llm::ModelTurn> turn) {
            // The model.response goes after the last delta: the recorder says where the log ends.
            m_output.close(deltas, [done, turn = std::move(turn)](int64_t lastSeq) { done(AskedTurn{turn, lastSeq}); });
        });
    };
}

StepEngine::Effect StepEngine::modelEffect(const Action &action, Result<llm::ModelTurn> turn)
{
    Effect effect;
    if (!turn) {
        const auto &error = turn.error();
        if (error.code == ErrorCode::Cancelled) {   // the broker is stopping: the next one asks again
            effect.instead = StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, error.message};
        } else if (error.code == ErrorCode::FailedPrecondition) {
            // Configuration problems do not heal by retrying.
            effect.events.push_back(event(core::kind::StateChanged, {{"status", "failed"}, {"reason", error.message}}));
        } else {
            effect.events.push_back(event(core::kind::ModelError,
                                          {{"error", error.message}, {"code", errorCodeName(error.code)}}));
            effect.retryAfterMs = m_options.retryAfterUnavailableMs;
        }
        return effect;
    }

    json calls = json::array();
    std::vector<core::NewEvent> &out = effect.events;
    for (const auto &call : turn->toolCalls)
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    json response{{"model", turn->model},
                  {"text", turn->text},
                  {"tool_calls", calls},
                  {"usage", {{"input_tokens", turn->usage.inputTokens},
                             {"output_tokens", turn->usage.outputTokens},
                             {"cached_tokens", turn->usage.cachedTokens}}},
                  {"latency_ms", turn->latencyMs},
                  {"attempts", turn->attempts}};
    if (turn->usage.cacheWriteTokens > 0)
        response["usage"]["cache_write_tokens"] = turn->usage.cacheWriteTokens;
    if (!turn->stopReason.empty())
        response["stop_reason"] = turn->stopReason;
    out.push_back(event(core::kind::ModelResponse, response));
    {
        const std::string modelName = turn->model.empty() ? action.state.model : turn->model;
        const cost::ModelPrice &price = m_options.prices.modelPrice(modelName, action.state.model);
        json payload{{"kind", "model"},
                     {"model", modelName},
                     {"agent", action.state.agent},
                     {"tier", action.state.tier},
                     {"input_tokens", turn->usage.inputTokens},
                     {"output_tokens", turn->usage.outputTokens},
                     {"cached_tokens", turn->usage.cachedTokens},
                     {"input_per_million", price.inputPerMillion},
                     {"output_per_million", price.outputPerMillion},
                     {"cached_per_million", price.cachedPerMillion}};
        if (turn->usage.cacheWriteTokens > 0) {   // written to the provider's prompt cache, priced apart
            payload["cache_write_tokens"] = turn->usage.cacheWriteTokens;
            payload["cache_write_per_million"] = price.cacheWritePrice();
        }
        core::NewEvent cost = event(core::kind::Cost, payload);
        cost.costMicros = cost::modelCostMicros(price, turn->usage.inputTokens, turn->usage.outputTokens,
                                                turn->usage.cachedTokens, turn->usage.cacheWriteTokens);
        out.push_back(std::move(cost));
    }
    for (const auto &call : turn->toolCalls)
        out.push_back(event(core::kind::ToolCall, {{"call_id", call.id}, {"name", call.name}, {"arguments", call.arguments}}));
    if (turn->toolCalls.empty()) {
        // Without a tool call there is no next step to take: the model has said its last word.
        out.push_back(event(core::kind::StateChanged,
                            {{"status", "succeeded"}, {"reason", "the model answered without calling a tool"}}));
    }
    return effect;
}

} // namespace paddock::engine
