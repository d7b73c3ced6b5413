#pragma once
// The models a broker offers, by the name users pass at submit time:
//   "scripted"            plays the session's playbook (playbooks live in ModelsConfig::playbookDir)
//   "openai"              chat completions as configured in [models.openai]
//   "openai:<profile>"    a profile table [models.openai.<profile>], inheriting unset keys from
//                         [models.openai] (e.g. "openai:local" for a llama.cpp server)
//   "anthropic"           the Messages API as configured in [models.anthropic]
//   "anthropic:<profile>" a profile table [models.anthropic.<profile>], inheriting likewise
// The config format is documented in docs/playbooks.md and docs/configuration.md.
//
// Threads: built once at start-up on the main thread, then read-only: find() and names() may be
// called from any thread; the adapters themselves are thread-safe.

#include "broker/llm/anthropic_model.h"
#include "broker/llm/model_adapter.h"
#include "broker/llm/openai_model.h"
#include "common/config_problems.h"

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::llm {

struct ModelsConfig {
    std::filesystem::path playbookDir;                  // where "scripted" finds playbooks by name
    std::map<std::string, OpenAiConfig> openai;         // keyed by the full model name ("openai", "openai:local")
    std::map<std::string, AnthropicConfig> anthropic;   // keyed likewise ("anthropic", "anthropic:fast")
};

// Reads the [models] table of the broker's config (pass an empty table when the section is absent;
// pass the table inside the parsed document, not a copy: copies lose the lines error messages quote).
// defaults supplies what the file does not say (the broker sets playbookDir to the installed or
// source-tree playbooks); a relative playbook_dir is resolved against baseDir (the config file's
// directory; so is an api_key_file). "openai" and "anthropic" are always registered, with built-in
// defaults unless configured.
// Errors: InvalidArgument naming sourceName, the key and the fix. The first form adds every
// problem to `problems` and returns what it could read; the second joins them.
ModelsConfig parseModelsConfig(const toml::table &models, std::string_view sourceName,
                               const std::filesystem::path &baseDir, ModelsConfig defaults, ConfigProblems &problems);
Result<ModelsConfig> parseModelsConfig(const toml::table &models, std::string_view sourceName,
                                       const std::filesystem::path &baseDir, ModelsConfig defaults = {});

// The [models] keys the loader accepts (docs/configuration.md documents each).
const std::vector<ConfigSection> &modelSections();

class ModelRegistry {
public:
    // Creates "scripted", one OpenAiModel per config.openai entry and one AnthropicModel per
    // config.anthropic entry.
    explicit ModelRegistry(ModelsConfig config);
    ~ModelRegistry();
    ModelRegistry(const ModelRegistry &) = delete;
    ModelRegistry &operator=(const ModelRegistry &) = delete;

    // Adds or replaces an adapter under adapter->name() (tests add fakes; later adapters plug in here).
    // Call before the registry is shared with other threads.
    void add(std::unique_ptr<ModelAdapter> adapter);

    // nullptr for an unknown name; the caller reports NotFound listing names().
    ModelAdapter *find(std::string_view name) const;
    std::vector<std::string> names() const;             // sorted
    const ModelsConfig &config() const { return m_config; }

private:
    ModelsConfig m_config;
    std::map<std::string, std::unique_ptr<ModelAdapter>, std::less<>> m_adapters;
};

} // namespace paddock::llm
