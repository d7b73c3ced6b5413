#pragma once
// Playbooks: the scripted model's script. A playbook is a TOML file with a name, a goal and a list of
// [[step]] tables, each one tool call (any tool of tool_catalogue.h, with the arguments it defines)
// plus the outcome it expects. The format is documented in docs/playbooks.md.
//
// Threads: free functions over values; safe to call from any thread.

#include "common/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::llm {

struct PlaybookStep {
    int number = 0;                     // 1-based, as users count them in messages
    int line = 0;                       // where the [[step]] header is in the source, 0 if unknown
    std::string tool;                   // one of llm::tool
    nlohmann::json arguments;           // the tool call's arguments, shaped as model_adapter.h says

    // Expectations, checked against the recorded tool.result before the next step is emitted.
    std::optional<int64_t> expectExit;        // run_command: defaults to 0
    std::optional<std::string> expectStdout;  // run_command: a substring of stdout
    std::optional<std::string> expectStderr;  // run_command: a substring of stderr
    std::optional<std::string> expectContent; // read_file: a substring of the content; read_records: of the records' JSON
    std::optional<std::string> expectError;   // request_environment, read_records: the call fails with this substring
};

struct Playbook {
    std::string name;
    std::string goal;
    std::vector<PlaybookStep> steps;    // never empty; a finish step, if any, is the last
};

// Parses and validates a playbook. sourceName (a file name, or "<submitted>") starts every error
// message. Errors: InvalidArgument saying where (source, line, step), what is wrong and how to fix it.
Result<Playbook> parsePlaybook(std::string_view toml, std::string_view sourceName);

// Reads dir/<name>.toml. name must be a plain name (no '/', no ".."), with or without ".toml".
// Errors: InvalidArgument for a bad name, NotFound listing the playbooks that exist in dir.
Result<std::string> loadPlaybookText(const std::filesystem::path &dir, std::string_view name);

// The playbook names (file stems of *.toml) in dir, sorted; empty when dir does not exist.
std::vector<std::string> listPlaybooks(const std::filesystem::path &dir);

} // namespace paddock::llm
