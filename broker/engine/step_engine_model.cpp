// StepEngine's model step: asks the session's model for its next turn, and records the response,
// its cost and the tool calls it makes (or the end of the session when it makes none).
//
// Threads: the step workers run it for the session they hold the lease on. The model's call parks
// the step (ModelAdapter::nextAsync); modelEffect runs on a worker once the model answered.

#include "broker/engine/step_engine_internal.h"

namespace paddock::engine {

namespace {

using nlohmann::json;

} // namespace

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
    using Turn = Result<llm::ModelTurn>;
    return awaitCall<Turn>(
        run,
        [adapter, context = std::move(context)](std::function<void(Turn)> done) {
            adapter->nextAsync(context, std::move(done));
        },
        [this, action](Turn turn) { return record(action, modelEffect(action, std::move(turn))); });
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
    out.push_back(event(core::kind::ModelResponse, response));
    {
        const std::string modelName = turn->model.empty() ? action.state.model : turn->model;
        const cost::ModelPrice &price = m_options.prices.modelPrice(modelName, action.state.model);
        core::NewEvent cost = event(core::kind::Cost, {{"kind", "model"},
                                                        {"model", modelName},
                                                        {"agent", action.state.agent},
                                                        {"tier", action.state.tier},
                                                        {"input_tokens", turn->usage.inputTokens},
                                                        {"output_tokens", turn->usage.outputTokens},
                                                        {"cached_tokens", turn->usage.cachedTokens},
                                                        {"input_per_million", price.inputPerMillion},
                                                        {"output_per_million", price.outputPerMillion},
                                                        {"cached_per_million", price.cachedPerMillion}});
        cost.costMicros = cost::modelCostMicros(price, turn->usage.inputTokens, turn->usage.outputTokens,
                                                turn->usage.cachedTokens);
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
