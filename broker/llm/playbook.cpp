// Known limits: a playbook is read whole into memory (they are small, hand-written files); the
// "did you mean" suggestions only cover keys, not tool names longer than a typo away. The tools and
// their arguments are the tool catalogue's (tool_catalogue.h); only the expectations and the
// read_records shorthand `key` are the playbook's own.

#include "broker/llm/playbook.h"

#include "broker/llm/model_adapter.h"
#include "broker/llm/tool_catalogue.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace paddock::llm {
namespace {

using Kind = ArgumentType;

// A key a [[step]] accepts: an argument of the tool's call (from the tool catalogue, which the
// models are offered too), or one of the playbook's own keys below.
struct FieldSpec {
    std::string key;
    Kind kind = Kind::String;
    bool required = false;
    std::string example;                      // shown in the fix when the field is missing or has the wrong type
    const ToolArgument *argument = nullptr;   // null for the playbook's own keys
};

// The playbook's own keys: what a step expects of its result (checked by the scripted model before
// the next step), and shorthands. They never reach the tool.
struct ExtraKey {
    std::string_view tool;
    std::string_view key;
    Kind kind;
    std::string_view example;
};

constexpr std::array kExtraKeys{
    ExtraKey{tool::RunCommand, "expect_exit", Kind::Integer, "expect_exit = 0"},
    ExtraKey{tool::RunCommand, "expect_stdout", Kind::String, R"(expect_stdout = "Hello")"},
    ExtraKey{tool::RunCommand, "expect_stderr", Kind::String, R"(expect_stderr = "warning")"},
    ExtraKey{tool::ReadFile, "expect_content", Kind::String, R"(expect_content = "main")"},
    ExtraKey{tool::ReadRecords, "key", Kind::String, R"(key = "repos/paddock")"},   // one of keys
    ExtraKey{tool::ReadRecords, "expect_content", Kind::String, R"(expect_content = "main")"},
    ExtraKey{tool::ReadRecords, "expect_error", Kind::String, R"(expect_error = "unknown agent")"},
    ExtraKey{tool::RequestEnvironment, "expect_error", Kind::String, R"(expect_error = "not among")"},
};

// A value as a TOML line: key = "text", key = 5, key = ["a", "b"].
std::string tomlLine(std::string_view key, const nlohmann::json &value)
{
    auto quoted = [](const std::string &text) {
        std::string out = "\"";
        for (char c : text) {
            if (c == '"' || c == '\\')
                out += '\\';
            if (c == '\n')
                out += "\\n";
            else
                out += c;
        }
        return out + "\"";
    };
    std::string text;
    if (value.is_string()) {
        text = quoted(value.get<std::string>());
    } else if (value.is_array()) {
        for (const auto &item : value)
            text += (text.empty() ? "[" : ", ") + quoted(item.is_string() ? item.get<std::string>() : item.dump());
        text += text.empty() ? "[]" : "]";
    } else {
        text = value.dump();
    }
    return fmt::format("{} = {}", key, text);
}

// Every key a step of `definition` accepts: its arguments first, then the playbook's own keys.
std::vector<FieldSpec> fieldsOf(const ToolDefinition &definition)
{
    std::vector<FieldSpec> fields;
    for (const ToolArgument &argument : definition.arguments)
        fields.push_back({argument.name, argument.type, argument.required, tomlLine(argument.name, argument.example),
                          &argument});
    for (const ExtraKey &extra : kExtraKeys) {
        if (extra.tool == definition.name)
            fields.push_back({std::string(extra.key), extra.kind, false, std::string(extra.example), nullptr});
    }
    return fields;
}

std::string_view kindName(Kind kind)
{
    return kind == Kind::String ? "a string" : kind == Kind::Integer ? "an integer" : "an array of strings";
}

std::string_view nodeTypeName(const toml::node &node)
{
    switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
    }
    return "nothing";
}

int lineOf(const toml::node &node)
{
    return static_cast<int>(node.source().begin.line);
}

// Edit distance, for "did you mean" on misspelt keys: a typo is the likeliest cause of an unknown key.
size_t editDistance(std::string_view a, std::string_view b)
{
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

template <typename Names>
std::string suggestion(std::string_view key, const Names &candidates)
{
    std::string_view best;
    size_t bestDistance = 3;   // more than two edits away is not a typo
    for (std::string_view candidate : candidates) {
        const size_t d = editDistance(key, candidate);
        if (d < bestDistance) {
            bestDistance = d;
            best = candidate;
        }
    }
    return best.empty() ? std::string() : fmt::format("Did you mean '{}'? ", best);
}

class Parser {
public:
    explicit Parser(std::string_view sourceName) : m_source(sourceName) {}

    Result<Playbook> parse(std::string_view text)
    {
        toml::table root;
        try {
            root = toml::parse(text, m_source);
        } catch (const toml::parse_error &e) {
            return error(static_cast<int>(e.source().begin.line),
                         fmt::format("this is not valid TOML: {} (column {})", e.description(),
                                     e.source().begin.column),
                         "Fix the syntax; docs/playbooks.md shows a complete example.");
        }
        return parseRoot(root);
    }

private:
    std::unexpected<Error> error(int line, std::string_view problem, std::string_view fix) const
    {
        std::string where = line > 0 ? fmt::format("{}:{}", m_source, line) : std::string(m_source);
        return fail(ErrorCode::InvalidArgument, fmt::format("playbook {}: {}. {}", where, problem, fix));
    }

    std::unexpected<Error> stepError(const PlaybookStep &step, int line, std::string_view problem,
                                     std::string_view fix) const
    {
        const std::string what = step.tool.empty()
            ? fmt::format("step {}: {}", step.number, problem)
            : fmt::format("step {} ({}): {}", step.number, step.tool, problem);
        return error(line, what, fix);
    }

    Result<Playbook> parseRoot(const toml::table &root)
    {
        Playbook playbook;
        for (const auto &[key, node] : root) {
            const std::string_view k = key.str();
            if (k == "name" || k == "goal") {
                if (!node.is_string())
                    return error(lineOf(node), fmt::format("'{}' is {}, not a string", k, nodeTypeName(node)),
                                 fmt::format("Write {} = \"...\".", k));
                (k == "name" ? playbook.name : playbook.goal) = node.as_string()->get();
            } else if (k == "step") {
                // handled below, in order
            } else {
                constexpr std::array kTopKeys{std::string_view("name"), std::string_view("goal"),
                                              std::string_view("step")};
                return error(lineOf(node), fmt::format("unknown top-level key '{}'", k),
                             suggestion(k, kTopKeys)
                                 + "A playbook has name, goal and [[step]] tables; step fields go "
                                   "below a [[step]] header.");
            }
        }
        if (playbook.name.empty())
            playbook.name = std::filesystem::path(m_source).stem().string();
        if (playbook.goal.empty())
            return error(0, "'goal' is missing or empty",
                         "Add goal = \"what the session should achieve\" at the top of the file.");

        const toml::node *steps = root.get("step");
        if (steps == nullptr)
            return error(0, "there are no steps",
                         "Add at least one [[step]] table, e.g. [[step]] tool = \"run_command\" "
                         "command = \"true\".");
        if (steps->is_table())
            return error(lineOf(*steps), "'step' is a single table",
                         "Write each step as [[step]] (two brackets), not [step].");
        const toml::array *array = steps->as_array();
        if (array != nullptr && array->empty())
            return error(lineOf(*steps), "there are no steps", "Add at least one [[step]] table.");
        if (array == nullptr || !array->is_array_of_tables())
            return error(lineOf(*steps), fmt::format("'step' is {}, not a list of tables", nodeTypeName(*steps)),
                         "Write each step as a [[step]] table.");

        int number = 0;
        for (const toml::node &node : *array) {
            PlaybookStep step;
            step.number = ++number;
            auto status = parseStep(*node.as_table(), step);
            if (!status)
                return std::unexpected(status.error());
            playbook.steps.push_back(std::move(step));
        }

        for (const PlaybookStep &step : playbook.steps) {
            if (step.tool == tool::Finish && step.number != static_cast<int>(playbook.steps.size())) {
                return stepError(step, step.line,
                                 fmt::format("finish must be the last step, but {} more step(s) follow it",
                                             playbook.steps.size() - static_cast<size_t>(step.number)),
                                 "Move the finish step to the end or delete the steps after it.");
            }
        }
        return playbook;
    }

    Status parseStep(const toml::table &table, PlaybookStep &step)
    {
        step.line = lineOf(table);
        const std::string toolList = toolNameList();
        const toml::node *toolNode = table.get("tool");
        if (toolNode == nullptr)
            return stepError(step, step.line, "'tool' is missing",
                             fmt::format("Add tool = \"run_command\" (one of: {}).", toolList));
        if (!toolNode->is_string())
            return stepError(step, lineOf(*toolNode),
                             fmt::format("'tool' is {}, not a string", nodeTypeName(*toolNode)),
                             fmt::format("Write tool = \"run_command\" (one of: {}).", toolList));
        const std::string &toolName = toolNode->as_string()->get();
        const ToolDefinition *definition = findTool(toolName);
        if (definition == nullptr) {
            std::vector<std::string_view> names;
            for (const ToolDefinition &t : toolCatalogue())
                names.push_back(t.name);
            return stepError(step, lineOf(*toolNode), fmt::format("unknown tool '{}'", toolName),
                             suggestion(toolName, names) + fmt::format("Use one of: {}.", toolList));
        }
        step.tool = toolName;
        step.arguments = nlohmann::json::object();
        const std::vector<FieldSpec> fields = fieldsOf(*definition);

        for (const auto &[key, node] : table) {
            const std::string_view k = key.str();
            if (k == "tool")
                continue;
            const auto field = std::ranges::find(fields, k, &FieldSpec::key);
            if (field == fields.end()) {
                std::string accepted = "tool";
                std::vector<std::string_view> names;
                for (const FieldSpec &f : fields) {
                    accepted += ", " + f.key;
                    names.push_back(f.key);
                }
                return stepError(step, lineOf(node), fmt::format("unknown key '{}'", k),
                                 suggestion(k, names) + fmt::format("A {} step accepts: {}.", toolName, accepted));
            }
            const bool typeOk = field->kind == Kind::String ? node.is_string()
                : field->kind == Kind::Integer                ? node.is_integer()
                                                              : node.is_array() && node.as_array()->is_homogeneous(toml::node_type::string);
            if (!typeOk)
                return stepError(step, lineOf(node),
                                 fmt::format("'{}' is {}, not {}", k, nodeTypeName(node), kindName(field->kind)),
                                 fmt::format("Write it like {}.", field->example));
            auto stored = field->argument != nullptr ? storeArgument(step, *field, node) : storeExtra(step, *field, node);
            if (!stored)
                return stored;
        }
        for (const FieldSpec &f : fields) {
            if (f.required && !table.contains(f.key))
                return stepError(step, step.line, fmt::format("'{}' is missing", f.key),
                                 fmt::format("Add {} to this [[step]].", f.example));
        }
        if (step.tool == tool::RunCommand && !step.expectExit)
            step.expectExit = 0;   // a command that fails should fail the script unless it says otherwise
        if (step.tool == tool::Finish && !step.arguments.contains("status"))
            step.arguments["status"] = "succeeded";
        return {};
    }

    // An argument of the tool call, checked as the engine checks a model's (tool_catalogue.h).
    Status storeArgument(PlaybookStep &step, const FieldSpec &field, const toml::node &node)
    {
        nlohmann::json value;
        if (field.kind == Kind::StringArray) {
            value = nlohmann::json::array();
            for (const auto &item : *node.as_array())
                value.push_back(item.as_string()->get());
        } else if (field.kind == Kind::Integer) {
            value = node.as_integer()->get();
        } else {
            value = node.as_string()->get();
        }
        if (auto problem = field.argument->valueProblem(value)) {
            std::string fix = fmt::format("Write it like {}.", field.example);
            const auto &choices = field.argument->choices;
            for (size_t i = 0; i < choices.size(); ++i) {
                fix = (i == 0 ? "Write " : fix + (i + 1 == choices.size() ? " or " : ", "))
                    + tomlLine(field.key, choices[i]) + (i + 1 == choices.size() ? "." : "");
            }
            return stepError(step, lineOf(node), *problem, fix);
        }
        if (field.key == "keys" && step.arguments.contains("keys")) {   // after a key = "..." shorthand
            for (auto &item : value)
                step.arguments["keys"].push_back(std::move(item));
            return {};
        }
        step.arguments[field.key] = std::move(value);
        return {};
    }

    Status storeExtra(PlaybookStep &step, const FieldSpec &field, const toml::node &node)
    {
        if (field.key == "expect_exit") {
            const int64_t value = node.as_integer()->get();
            if (value < 0 || value > 255)
                return stepError(step, lineOf(node), fmt::format("expect_exit is {}, outside 0..255", value),
                                 "An exit code is between 0 and 255; a signal shows as 128 + its number.");
            step.expectExit = value;
            return {};
        }
        const std::string &value = node.as_string()->get();
        if (field.key == "key") {
            if (!step.arguments.contains("keys"))
                step.arguments["keys"] = nlohmann::json::array();
            step.arguments["keys"].push_back(value);
        } else if (field.key == "expect_error") {
            step.expectError = value;
        } else if (field.key == "expect_stdout") {
            step.expectStdout = value;
        } else if (field.key == "expect_stderr") {
            step.expectStderr = value;
        } else if (field.key == "expect_content") {
            step.expectContent = value;
        }
        return {};
    }

    std::string m_source;
};

} // namespace

Result<Playbook> parsePlaybook(std::string_view toml, std::string_view sourceName)
{
    try {
        return Parser(sourceName).parse(toml);
    } catch (const std::exception &e) {
        // toml++ and nlohmann only throw on bugs or allocation failure; keep them inside.
        return fail(ErrorCode::Internal, fmt::format("playbook {}: unexpected error while parsing: {}",
                                                     sourceName, e.what()));
    }
}

std::vector<std::string> listPlaybooks(const std::filesystem::path &dir)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().extension() == ".toml" && it->is_regular_file(ec))
            names.push_back(it->path().stem().string());
    }
    std::ranges::sort(names);
    return names;
}

Result<std::string> loadPlaybookText(const std::filesystem::path &dir, std::string_view name)
{
    std::string stem(name);
    if (stem.ends_with(".toml"))
        stem.resize(stem.size() - 5);
    if (stem.empty() || stem.starts_with('.') || stem.find_first_of("/\\") != std::string::npos)
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("'{}' is not a playbook name. Give the name of a file in {} without "
                                "directories, e.g. hello-c.",
                                name, dir.string()));

    const std::filesystem::path file = dir / (stem + ".toml");
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        std::error_code ec;
        if (std::filesystem::exists(file, ec))
            return fail(ErrorCode::FailedPrecondition,
                        fmt::format("cannot read playbook {}. Check its permissions.", file.string()));
        const std::vector<std::string> available = listPlaybooks(dir);
        std::string list;
        for (const std::string &n : available)
            list += (list.empty() ? "" : ", ") + n;
        return fail(ErrorCode::NotFound,
                    available.empty()
                        ? fmt::format("no playbook '{}': {} has no playbooks. Check the models.playbook_dir "
                                      "setting.",
                                      stem, dir.string())
                        : fmt::format("no playbook '{}' in {}. Available: {}.", stem, dir.string(), list));
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("cannot read playbook {}. Check the file.", file.string()));
    return std::move(text).str();
}

} // namespace paddock::llm
