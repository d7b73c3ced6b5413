#pragma once
// The scripted model: plays a playbook back one step per turn. It is deterministic: the next turn is
// a pure function of the ModelContext (the playbook text and how many turns the history holds), so a
// step repeated after a crash produces the same tool call with the same id.
//
// Threads: stateless; next() may be called from any number of threads at once.

#include "broker/llm/model_adapter.h"
#include "broker/llm/playbook.h"

namespace paddock::llm {

class ScriptedModel final : public ModelAdapter {
public:
    static constexpr const char *kName = "scripted";

    std::string name() const override { return kName; }
    bool readsEnvironment() const override { return false; }   // a playbook names its own tiers

    // Turn k (0-based, k = history.size()) is playbook step k+1 as one tool call with id "call-<k+1>".
    // Before emitting it, the result recorded for step k is checked against that step's expectations;
    // a mismatch (or a tool error) ends the session: finish {"status": "failed"} with a summary naming
    // the step, the expectation and what happened. After the last step of a playbook without an
    // explicit finish, the turn is finish {"status": "succeeded"}.
    // Errors: InvalidArgument for a playbook that does not parse, FailedPrecondition when the history
    // already holds the final finish (nothing left to play).
    Result<ModelTurn> next(const ModelContext &context) override;

    // The same decision on an already parsed playbook, for callers that keep one.
    static Result<ModelTurn> nextTurn(const Playbook &playbook, const std::vector<Exchange> &history);
};

} // namespace paddock::llm
