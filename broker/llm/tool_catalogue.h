#pragma once
// The tools: one definition of every tool the engine carries out (name, description, arguments with
// their types, constraints and an example). The model adapters offer models these tools, with each
// one's JSON schema generated from here; the playbook loader validates a playbook's steps against
// them; the engine checks every call against them before it runs one. A tool that is not here
// does not exist for any of them (tests/unit/broker/llm/tool_catalogue_test.cpp compares this list
// with the engine's dispatch table, broker/engine/tool_routes.h).
//
// Threads: the catalogue is built once, on first use, and read-only after that; everything here
// may be called from any thread.

#include "broker/llm/model_adapter.h"
#include "common/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::llm {

enum class ArgumentType { String, Integer, StringArray };

struct ToolArgument {
    std::string name;
    ArgumentType type = ArgumentType::String;
    bool required = false;
    std::string description;            // for models: what to put here
    std::vector<std::string> choices;   // a string's allowed values; empty: any
    bool nonEmpty = false;              // a string that may not be ""
    std::optional<int64_t> minimum;     // an integer's least value
    nlohmann::json example;             // a valid value, shown in the fix of an error

    // The problem with a value of the right type ("'command' is empty", "timeout_ms is 0, it must
    // be positive", "status is 'ok'"), or nullopt when it is fine. The type is the caller's check:
    // a playbook words TOML types, the engine JSON types.
    std::optional<std::string> valueProblem(const nlohmann::json &value) const;
    // The values a choice may take, as "\"a\", \"b\" or \"c\"".
    std::string choiceList() const;
};

struct ToolDefinition {
    std::string name;
    std::string description;            // for models: what the tool does and what its result holds
    std::vector<ToolArgument> arguments;

    const ToolArgument *argument(std::string_view argumentName) const;
    // The JSON schema of the arguments object: {"type": "object", "properties", "required",
    // "additionalProperties": false}. The same for every adapter.
    nlohmann::json inputSchema() const;
    // The required arguments with their examples: what a valid call looks like.
    nlohmann::json exampleArguments() const;
};

// Every tool, in the order models are offered them and messages list them.
const std::vector<ToolDefinition> &toolCatalogue();
// nullptr for a name that is not a tool.
const ToolDefinition *findTool(std::string_view name);
// "run_command, write_file, ..." in catalogue order.
std::string toolNameList();

// A model's call checked against its definition: InvalidArgument saying what is wrong (an unknown
// tool, a missing or unknown argument, a wrong type or value) and what a valid call looks like,
// worded for the model that made it (the engine records it as the call's result).
Status checkToolCall(const ToolCall &call);

} // namespace paddock::llm
