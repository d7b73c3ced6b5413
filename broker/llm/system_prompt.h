#pragma once
// The system prompt every LLM adapter sends: where the agent works, how to use its tools, and the
// sandbox tiers it may run on (each one's cpu, memory and price per hour, which one it is on, and
// its bound: the highest tier it gets without a human's review), so that a model chooses a tier for
// a reason and knows what asking above its bound costs in waiting.
//
// Threads: pure functions; any thread.

#include "broker/llm/model_adapter.h"

#include <string>

namespace paddock::llm {

std::string systemPrompt(const ModelContext &context);

// The tiers part alone ("" without an environment): what the prompt says about tiers.
std::string tierSection(const EnvironmentBrief &environment);

} // namespace paddock::llm
