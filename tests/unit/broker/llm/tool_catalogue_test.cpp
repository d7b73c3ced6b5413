// The one definition of every tool (tool_catalogue.h) and its users: each model adapter offers
// every tool with the catalogue's schema, the playbook loader takes a step of every tool, calls
// are checked against the definitions, and the system prompt tells the tiers and the bound. (That
// the engine carries out exactly these tools is tests/unit/broker/engine/tool_routes_test.cpp.)

#include "broker/llm/anthropic_model.h"
#include "broker/llm/openai_model.h"
#include "broker/llm/playbook.h"
#include "broker/llm/system_prompt.h"
#include "broker/llm/tool_catalogue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

std::vector<std::string> catalogueNames()
{
    std::vector<std::string> names;
    for (const ToolDefinition &definition : toolCatalogue())
        names.push_back(definition.name);
    return names;
}

TEST(ToolCatalogueTest, EveryToolIsDefinedCompletely)
{
    std::set<std::string> names;
    for (const ToolDefinition &definition : toolCatalogue()) {
        EXPECT_TRUE(names.insert(definition.name).second) << definition.name << " is defined twice";
        EXPECT_FALSE(definition.description.empty()) << definition.name;
        const json schema = definition.inputSchema();
        EXPECT_EQ(schema["type"], "object") << definition.name;
        EXPECT_EQ(schema["additionalProperties"], false) << definition.name;
        for (const json &required : schema["required"])
            EXPECT_TRUE(schema["properties"].contains(required.get<std::string>())) << definition.name;
        for (const ToolArgument &argument : definition.arguments) {
            EXPECT_FALSE(argument.description.empty()) << definition.name << "." << argument.name;
            EXPECT_FALSE(argument.example.is_null()) << definition.name << "." << argument.name;
        }
        // Its example call is one the engine accepts.
        EXPECT_TRUE(checkToolCall({"c1", definition.name, definition.exampleArguments()})) << definition.name;
        EXPECT_EQ(findTool(definition.name), &definition);
    }
    EXPECT_EQ(findTool("list_files"), nullptr);
    for (const char *name : {tool::RunCommand, tool::WriteFile, tool::ReadFile, tool::ReadRecords,
                             tool::RequestEnvironment, tool::Finish, tool::ProposeChange})
        EXPECT_NE(findTool(name), nullptr) << name << " has a name in model_adapter.h but no definition";
}

TEST(ToolCatalogueTest, BothAdaptersOfferEveryToolWithTheSameSchema)
{
    ModelContext context;
    context.goal = "g";
    const json openai = OpenAiModel::buildRequest(OpenAiConfig{}, context);
    const json anthropic = AnthropicModel::buildRequest(AnthropicConfig{}, context);
    ASSERT_EQ(openai["tools"].size(), toolCatalogue().size());
    ASSERT_EQ(anthropic["tools"].size(), toolCatalogue().size());
    for (size_t i = 0; i < toolCatalogue().size(); ++i) {
        const ToolDefinition &definition = toolCatalogue()[i];
        EXPECT_EQ(openai["tools"][i]["type"], "function");
        EXPECT_EQ(openai["tools"][i]["function"]["name"], definition.name);
        EXPECT_EQ(openai["tools"][i]["function"]["description"], definition.description);
        EXPECT_EQ(openai["tools"][i]["function"]["parameters"], definition.inputSchema());
        EXPECT_EQ(anthropic["tools"][i]["name"], definition.name);
        EXPECT_EQ(anthropic["tools"][i]["description"], definition.description);
        EXPECT_EQ(anthropic["tools"][i]["input_schema"], definition.inputSchema());
    }
}

TEST(ToolCatalogueTest, ThePlaybookLoaderTakesEveryToolAndItsRequiredArguments)
{
    for (const ToolDefinition &definition : toolCatalogue()) {
        const json example = definition.exampleArguments();
        std::string step = "[[step]]\ntool = \"" + definition.name + "\"\n";
        for (const auto &[key, value] : example.items())
            step += key + " = " + value.dump() + "\n";   // JSON strings, integers and string arrays are TOML too
        auto playbook = parsePlaybook("goal = \"g\"\n" + step, "every.toml");
        ASSERT_TRUE(playbook) << definition.name << ": " << playbook.error().message;
        EXPECT_EQ(playbook->steps.at(0).tool, definition.name);
        for (const auto &[key, value] : example.items())
            EXPECT_EQ(playbook->steps.at(0).arguments[key], value) << definition.name << "." << key;

        const auto required = std::ranges::find_if(definition.arguments, &ToolArgument::required);
        if (required != definition.arguments.end()) {
            auto missing = parsePlaybook("goal = \"g\"\n[[step]]\ntool = \"" + definition.name + "\"\n", "every.toml");
            ASSERT_FALSE(missing) << definition.name;
            EXPECT_THAT(missing.error().message, HasSubstr("'" + required->name + "' is missing"));
        }
    }
    // The list in messages is the catalogue's.
    auto unknown = parsePlaybook("goal = \"g\"\n[[step]]\ntool = \"list_files\"\n", "every.toml");
    ASSERT_FALSE(unknown);
    EXPECT_THAT(unknown.error().message, HasSubstr(toolNameList()));
}

TEST(ToolCatalogueTest, ThePlaybookLoaderChecksValuesAsTheEngineDoes)
{
    auto refused = [](const std::string &step) {
        auto playbook = parsePlaybook("goal = \"g\"\n[[step]]\n" + step, "v.toml");
        return playbook ? std::string("(accepted)") : playbook.error().message;
    };
    EXPECT_THAT(refused("tool = \"request_environment\"\ntier = \"\"\n"), HasSubstr("'tier' is empty"));
    EXPECT_THAT(refused("tool = \"propose_change\"\nkind = \"rename\"\ntargets = [\"a\"]\nchange = \"x\"\n"
                        "justification = \"j\"\n"),
                AllOf(HasSubstr("kind is 'rename'"), HasSubstr(R"(kind = "egress_exception")")));
    EXPECT_THAT(refused("tool = \"read_records\"\nkeys = [\"a\", 3]\n"), HasSubstr("not an array of strings"));
    // The read_records shorthand key = "..." and keys = [...] make one list.
    auto both = parsePlaybook("goal = \"g\"\n[[step]]\ntool = \"read_records\"\nkey = \"a\"\nkeys = [\"b\"]\n", "v.toml");
    ASSERT_TRUE(both) << both.error().message;
    EXPECT_EQ(both->steps[0].arguments["keys"], (json{"a", "b"}));
}

TEST(ToolCatalogueTest, CallsAreCheckedAgainstTheirDefinition)
{
    auto problem = [](const std::string &name, const json &arguments) {
        auto checked = checkToolCall({"c1", name, arguments});
        return checked ? std::string("(accepted)") : checked.error().message;
    };
    EXPECT_EQ(problem("run_command", {{"command", "ls"}, {"timeout_ms", 1000}}), "(accepted)");
    EXPECT_EQ(problem("finish", {{"summary", "done"}}), "(accepted)");   // status defaults to succeeded
    EXPECT_THAT(problem("run_comand", {{"command", "ls"}}),
                AllOf(HasSubstr("there is no tool 'run_comand'"), HasSubstr(toolNameList())));
    EXPECT_THAT(problem("run_command", json::object()),
                AllOf(HasSubstr("run_command: 'command' is missing"), HasSubstr(R"({"command":"make test"})")));
    EXPECT_THAT(problem("run_command", {{"command", 5}}), HasSubstr("'command' is an integer, not a string"));
    EXPECT_THAT(problem("run_command", {{"command", ""}}), HasSubstr("'command' is empty"));
    EXPECT_THAT(problem("run_command", {{"command", "ls"}, {"timeout_ms", 0}}), HasSubstr("timeout_ms is 0"));
    EXPECT_THAT(problem("run_command", {{"command", "ls"}, {"cwd", "/"}}),
                AllOf(HasSubstr("it takes no argument 'cwd'"), HasSubstr("command, timeout_ms")));
    EXPECT_THAT(problem("finish", {{"summary", "s"}, {"status", "done"}}),
                AllOf(HasSubstr("status is 'done'"), HasSubstr(R"("succeeded" or "failed")")));
    EXPECT_THAT(problem("request_environment", json::array({"big"})), HasSubstr("not a JSON object"));
    EXPECT_THAT(problem("read_records", {{"keys", "a"}}), HasSubstr("'keys' is a string, not an array of strings"));
}

TEST(SystemPromptTest, TellsTheTiersTheirPricesAndTheBound)
{
    EnvironmentBrief environment;
    environment.currentTier = "lite";
    environment.selectionMode = "hybrid";
    environment.mayRequest = true;
    environment.bound = "standard";
    environment.tiers = {{"lite", 0.5, 512ll << 20, 0.02, true, false},
                         {"standard", 2, 4ll << 30, 0.1, true, false},
                         {"heavy", 8, 16ll << 30, 0.4, true, true},
                         {"gpu", 8, 64ll << 30, 2.5, false, true}};
    ModelContext context;
    context.environment = environment;
    const std::string prompt = systemPrompt(context);
    EXPECT_THAT(prompt, AllOf(HasSubstr("you are on lite"), HasSubstr("- lite: 0.5 cpu, 512 MiB memory, $0.02 per hour (current)"),
                              HasSubstr("- standard: 2 cpu, 4 GiB memory, $0.10 per hour\n"),
                              HasSubstr("- heavy: 8 cpu, 16 GiB memory, $0.40 per hour; above your bound: needs a human's review"),
                              HasSubstr("- gpu: 8 cpu, 64 GiB memory, $2.50 per hour; not allowed for your agent"),
                              HasSubstr("Your bound is standard"), HasSubstr("tier_escalation review"),
                              HasSubstr("the session waits")));

    environment.bound.clear();
    environment.selectionMode = "agent";
    EXPECT_THAT(tierSection(environment), AllOf(HasSubstr("no bound below them"), Not(HasSubstr("Your bound is"))));

    environment.mayRequest = false;
    environment.selectionMode = "default";
    EXPECT_THAT(tierSection(environment), AllOf(HasSubstr("selection mode is default"),
                                                HasSubstr("request_environment is refused")));

    environment.tiers.clear();
    EXPECT_THAT(tierSection(environment), HasSubstr("which other tiers exist is not known"));

    // Without an environment: no tier talk, but the tools are still explained.
    EXPECT_THAT(systemPrompt(ModelContext{}), AllOf(HasSubstr("request_environment"), Not(HasSubstr("Sandbox tiers"))));
}

TEST(ToolCatalogueTest, NamesListInCatalogueOrder)
{
    EXPECT_EQ(catalogueNames(), (std::vector<std::string>{"run_command", "write_file", "read_file", "read_records",
                                                          "request_environment", "finish", "propose_change"}));
    EXPECT_EQ(toolNameList(),
              "run_command, write_file, read_file, read_records, request_environment, finish, propose_change");
}

} // namespace
} // namespace paddock::llm
