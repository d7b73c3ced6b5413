#include "broker/llm/tool_catalogue.h"

#include <fmt/format.h>

#include <algorithm>

namespace paddock::llm {

namespace {

using nlohmann::json;

ToolArgument string(std::string name, bool required, std::string description, json example)
{
    ToolArgument argument;
    argument.name = std::move(name);
    argument.type = ArgumentType::String;
    argument.required = required;
    argument.description = std::move(description);
    argument.example = std::move(example);
    return argument;
}

ToolArgument nonEmptyString(std::string name, bool required, std::string description, json example)
{
    ToolArgument argument = string(std::move(name), required, std::move(description), std::move(example));
    argument.nonEmpty = true;
    return argument;
}

ToolArgument choice(std::string name, bool required, std::string description, std::vector<std::string> choices)
{
    ToolArgument argument = string(std::move(name), required, std::move(description), json(choices.front()));
    argument.choices = std::move(choices);
    return argument;
}

ToolArgument integer(std::string name, bool required, std::string description, int64_t minimum, json example)
{
    ToolArgument argument;
    argument.name = std::move(name);
    argument.type = ArgumentType::Integer;
    argument.required = required;
    argument.description = std::move(description);
    argument.minimum = minimum;
    argument.example = std::move(example);
    return argument;
}

ToolArgument strings(std::string name, bool required, std::string description, json example)
{
    ToolArgument argument;
    argument.name = std::move(name);
    argument.type = ArgumentType::StringArray;
    argument.required = required;
    argument.description = std::move(description);
    argument.example = std::move(example);
    return argument;
}

std::vector<ToolDefinition> buildCatalogue()
{
    std::vector<ToolDefinition> tools;
    tools.push_back(
        {tool::RunCommand,
         "Run a shell command line with sh -c in /workspace, the sandbox's writable working directory. The result "
         "has exit_code, stdout, stderr (long output keeps its head and tail), duration_ms and timed_out.",
         {nonEmptyString("command", true, "the shell command line", "make test"),
          integer("timeout_ms", false, "time limit in milliseconds (default: the broker's, usually 5 minutes)", 1,
                  60000)}});
    tools.push_back({tool::WriteFile,
                     "Write a whole file, created or replaced, at a path relative to /workspace. The result has the "
                     "path and the bytes written.",
                     {nonEmptyString("path", true, "the file's path, relative to /workspace", "hello.c"),
                      string("content", true, "the file's whole new content", "int main(void) { return 0; }\n")}});
    tools.push_back({tool::ReadFile,
                     "Read a file at a path relative to /workspace. The result has its content (a long file keeps "
                     "its head and tail; content_clipped says so).",
                     {nonEmptyString("path", true, "the file's path, relative to /workspace", "hello.c")}});
    tools.push_back({tool::ReadRecords,
                     "Read your agent's durable records: notes that outlive this session and its sandbox (key -> "
                     "JSON document). Give keys, or a prefix, or neither for all of them. The result has records "
                     "(key -> value), count, and missing for keys that have none.",
                     {strings("keys", false, "the record keys to read", json::array({"repos/paddock"})),
                      string("prefix", false, "read every record whose key starts with this", "repos/")}});
    tools.push_back(
        {tool::RequestEnvironment,
         "Ask to move this session to another sandbox tier (more or less CPU and memory, another price per "
         "hour). /workspace moves with it, before your next tool call. Within your bound it is granted at "
         "once; above it the session waits until a human approves or rejects the request; a tier you may not "
         "use is refused. The result says granted, the tier you are on, and the reason.",
         {nonEmptyString("tier", true, "the tier's name, as the system prompt lists them", "standard"),
          string("reason", false, "why this tier: what failed or what the work needs (a reviewer reads it)",
                 "the build needs 4 GiB")}});
    tools.push_back({tool::Finish,
                     "End the session, saying whether the goal was met. Nothing runs after it.",
                     {string("summary", true, "what was done and why the session ends", "built and ran hello"),
                      choice("status", false, "whether the goal was met (default succeeded)",
                             {"succeeded", "failed"})}});
    tools.push_back(
        {tool::ProposeChange,
         "Propose a change that policy may send to a human for review: a unified diff over files (applied with "
         "patch -p1 in /workspace), durable records to write, a host to reach, or a secret to use. Beyond "
         "policy's limits the session waits for the decision; the result says whether it was approved and "
         "applied.",
         {choice("kind", false, "what the change is (default bulk_change)",
                 {"bulk_change", "egress_exception", "secret_access"}),
          strings("targets", true, "the files, record keys, host or secret name the change touches",
                  json::array({"src/a.c", "src/b.c"})),
          string("change", true, "a unified diff, or a JSON array of {\"key\", \"value\"} records",
                 "--- a/src/a.c\n+++ b/src/a.c\n@@ -1 +1 @@\n-old\n+new\n"),
          choice("change_format", false, "how change is written (default: records when it starts with [, else diff)",
                 {"diff", "records", "text"}),
          string("justification", true, "why the change is needed (the reviewer reads it)",
                 "old() is deprecated")}});
    return tools;
}

const char *jsonTypeName(const json &value)
{
    switch (value.type()) {
    case json::value_t::string: return "a string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::null: return "null";
    default: return "not a JSON value";
    }
}

const char *typeName(ArgumentType type)
{
    switch (type) {
    case ArgumentType::String: return "a string";
    case ArgumentType::Integer: return "an integer";
    case ArgumentType::StringArray: return "an array of strings";
    }
    return "a value";
}

bool hasType(const json &value, ArgumentType type)
{
    switch (type) {
    case ArgumentType::String: return value.is_string();
    case ArgumentType::Integer: return value.is_number_integer();
    case ArgumentType::StringArray:
        return value.is_array() && std::ranges::all_of(value, [](const json &item) { return item.is_string(); });
    }
    return false;
}

} // namespace

std::optional<std::string> ToolArgument::valueProblem(const json &value) const
{
    if (type == ArgumentType::String && value.is_string()) {
        const std::string &text = value.get_ref<const std::string &>();
        if (nonEmpty && text.empty())
            return fmt::format("'{}' is empty", name);
        if (!choices.empty() && std::ranges::find(choices, text) == choices.end())
            return fmt::format("{} is '{}'", name, text);
    }
    if (type == ArgumentType::Integer && value.is_number_integer() && minimum) {
        const int64_t number = value.get<int64_t>();
        if (number < *minimum)
            return *minimum == 1 ? fmt::format("{} is {}, it must be positive", name, number)
                                 : fmt::format("{} is {}, it must be at least {}", name, number, *minimum);
    }
    return std::nullopt;
}

std::string ToolArgument::choiceList() const
{
    std::string out;
    for (size_t i = 0; i < choices.size(); ++i) {
        if (i > 0)
            out += i + 1 == choices.size() ? " or " : ", ";
        out += "\"" + choices[i] + "\"";
    }
    return out;
}

const ToolArgument *ToolDefinition::argument(std::string_view argumentName) const
{
    const auto it = std::ranges::find(arguments, argumentName, &ToolArgument::name);
    return it == arguments.end() ? nullptr : &*it;
}

json ToolDefinition::inputSchema() const
{
    json properties = json::object();
    json required = json::array();
    for (const ToolArgument &argument : arguments) {
        json property;
        switch (argument.type) {
        case ArgumentType::String:
            property["type"] = "string";
            if (!argument.choices.empty())
                property["enum"] = argument.choices;
            if (argument.nonEmpty)
                property["minLength"] = 1;
            break;
        case ArgumentType::Integer:
            property["type"] = "integer";
            if (argument.minimum)
                property["minimum"] = *argument.minimum;
            break;
        case ArgumentType::StringArray:
            property["type"] = "array";
            property["items"] = {{"type", "string"}};
            break;
        }
        property["description"] = argument.description;
        properties[argument.name] = std::move(property);
        if (argument.required)
            required.push_back(argument.name);
    }
    return {{"type", "object"},
            {"properties", std::move(properties)},
            {"required", std::move(required)},
            {"additionalProperties", false}};
}

json ToolDefinition::exampleArguments() const
{
    json out = json::object();
    for (const ToolArgument &argument : arguments) {
        if (argument.required)
            out[argument.name] = argument.example;
    }
    return out;
}

const std::vector<ToolDefinition> &toolCatalogue()
{
    static const std::vector<ToolDefinition> catalogue = buildCatalogue();
    return catalogue;
}

const ToolDefinition *findTool(std::string_view name)
{
    const auto &catalogue = toolCatalogue();
    const auto it = std::ranges::find(catalogue, name, &ToolDefinition::name);
    return it == catalogue.end() ? nullptr : &*it;
}

std::string toolNameList()
{
    std::string out;
    for (const ToolDefinition &definition : toolCatalogue())
        out += (out.empty() ? "" : ", ") + definition.name;
    return out;
}

Status checkToolCall(const ToolCall &call)
{
    const ToolDefinition *definition = findTool(call.name);
    if (definition == nullptr)
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("there is no tool '{}'. The tools are {}.", call.name, toolNameList()));
    auto invalid = [&](const std::string &problem) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: {}. Call it again with arguments like {}.", call.name, problem,
                                definition->exampleArguments().dump()));
    };
    if (!call.arguments.is_object())
        return invalid(fmt::format("its arguments are {}, not a JSON object", jsonTypeName(call.arguments)));
    for (const auto &[key, value] : call.arguments.items()) {
        const ToolArgument *argument = definition->argument(key);
        if (argument == nullptr) {
            std::string accepted;
            for (const ToolArgument &a : definition->arguments)
                accepted += (accepted.empty() ? "" : ", ") + a.name;
            return invalid(fmt::format("it takes no argument '{}' (its arguments are {})", key, accepted));
        }
        if (!hasType(value, argument->type))
            return invalid(fmt::format("'{}' is {}, not {}", key, jsonTypeName(value), typeName(argument->type)));
        if (auto problem = argument->valueProblem(value)) {
            if (!argument->choices.empty())
                *problem += fmt::format(" (it is one of {})", argument->choiceList());
            return invalid(*problem);
        }
    }
    for (const ToolArgument &argument : definition->arguments) {
        if (argument.required && !call.arguments.contains(argument.name))
            return invalid(fmt::format("'{}' is missing", argument.name));
    }
    return {};
}

} // namespace paddock::llm
