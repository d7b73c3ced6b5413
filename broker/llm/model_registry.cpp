#include "broker/llm/model_registry.h"

#include "broker/llm/anthropic_model.h"
#include "broker/llm/scripted_model.h"

#include <fmt/format.h>

#include <type_traits>

namespace paddock::llm {
namespace {

const ConfigSection &modelsSection() { return modelSections()[0]; }
const ConfigSection &openAiSection() { return modelSections()[1]; }
const ConfigSection &anthropicSection() { return modelSections()[2]; }

constexpr const char *kNoKeyInTheFile = "The key never goes in broker.toml";

class ConfigReader {
public:
    ConfigReader(std::string_view source, ConfigProblems &problems) : m_source(source), m_problems(problems) {}

    void error(const toml::node &node, std::string_view key, std::string_view problem, std::string_view fix) const
    {
        const auto line = node.source().begin.line;
        const std::string where = line > 0 ? fmt::format("{}:{}", m_source, line) : m_source;
        m_problems.add(ErrorCode::InvalidArgument, fmt::format("config {}: {} {}. {}", where, key, problem, fix));
    }

    // Applies the scalar keys of table (the section named section) onto config.
    void readOpenAi(const toml::table &table, std::string_view section, OpenAiConfig &config) const
    {
        for (const auto &[key, node] : table) {
            const std::string_view k = key.str();
            const std::string name = fmt::format("{}.{}", section, k);
            if (node.is_table())
                continue;   // a profile, read by the caller
            if (!openAiSection().accepts(k)) {
                unknownKey(node, name, k, openAiSection(), "openai");
            } else if (k == "base_url") {
                readUrl(node, name, k, config.baseUrl, "https://api.openai.com/v1");
            } else if (k == "model") {
                if (needString(node, name, k, config.model) && config.model.empty())
                    error(node, name, "is empty", "Name the model to request, e.g. model = \"gpt-4o-mini\".");
            } else if (k == "api_key_env") {
                needString(node, name, k, config.apiKeyEnv);
            } else if (k == "stream") {
                readStream(node, name, config.stream);
            } else {
                readRetryKey(node, name, k, config.timeoutMs, config.maxRetries, config.initialBackoffMs,
                             config.maxBackoffMs);
            }
        }
    }

    void readStream(const toml::node &node, const std::string &name, bool &stream) const
    {
        if (!node.is_boolean())
            error(node, name, "is not a boolean",
                  "Write stream = true (the answer is recorded as it comes) or stream = false.");
        else
            stream = node.as_boolean()->get();
    }

    void readAnthropic(const toml::table &table, std::string_view section, const std::filesystem::path &baseDir,
                       AnthropicConfig &config) const
    {
        for (const auto &[key, node] : table) {
            const std::string_view k = key.str();
            const std::string name = fmt::format("{}.{}", section, k);
            if (node.is_table())
                continue;   // a profile, read by the caller
            std::string text;
            int64_t number = 0;
            if (!anthropicSection().accepts(k)) {
                unknownKey(node, name, k, anthropicSection(), "anthropic");
            } else if (k == "base_url") {
                readUrl(node, name, k, config.baseUrl, "https://api.anthropic.com");
            } else if (k == "model") {
                if (needString(node, name, k, config.model) && config.model.empty())
                    error(node, name, "is empty", "Name the model to request, e.g. model = \"claude-sonnet-4-5\".");
            } else if (k == "api_key_env") {
                needString(node, name, k, config.apiKeyEnv);
            } else if (k == "api_key_file") {
                if (needString(node, name, k, text)) {
                    if (text.empty()) {
                        error(node, name, "is empty", "Name the file that holds the key, or leave api_key_file out.");
                    } else {
                        const std::filesystem::path file(text);
                        config.apiKeyFile = file.is_relative() ? baseDir / file : file;
                    }
                }
            } else if (k == "anthropic_version") {
                if (needString(node, name, k, config.anthropicVersion) && config.anthropicVersion.empty())
                    error(node, name, "is empty", "Write anthropic_version = \"2023-06-01\", or leave it out.");
            } else if (k == "max_tokens") {
                if (needInteger(node, name, k, number, 1))
                    config.maxTokens = number;
            } else if (k == "prompt_caching") {
                if (!node.is_boolean())
                    error(node, name, "is not a boolean", "Write prompt_caching = true or prompt_caching = false.");
                else
                    config.promptCaching = node.as_boolean()->get();
            } else if (k == "stream") {
                readStream(node, name, config.stream);
            } else {
                readRetryKey(node, name, k, config.timeoutMs, config.maxRetries, config.initialBackoffMs,
                             config.maxBackoffMs);
            }
        }
    }

private:
    bool needString(const toml::node &node, const std::string &name, std::string_view k, std::string &out) const
    {
        if (!node.is_string()) {
            error(node, name, "is not a string", fmt::format("Write {} = \"...\".", k));
            return false;
        }
        out = node.as_string()->get();
        return true;
    }

    bool needInteger(const toml::node &node, const std::string &name, std::string_view k, int64_t &out,
                     int64_t minimum) const
    {
        if (!node.is_integer() || node.as_integer()->get() < minimum) {
            error(node, name, fmt::format("must be an integer of at least {}", minimum),
                  fmt::format("Write {} = <number>.", k));
            return false;
        }
        out = node.as_integer()->get();
        return true;
    }

    void readUrl(const toml::node &node, const std::string &name, std::string_view k, std::string &url,
                 std::string_view example) const
    {
        if (needString(node, name, k, url) && !url.starts_with("http://") && !url.starts_with("https://"))
            error(node, name, fmt::format("is \"{}\", not an http(s) URL", url),
                  fmt::format("Write e.g. base_url = \"{}\".", example));
    }

    // timeout_ms, max_retries, initial_backoff_ms and max_backoff_ms, which every HTTP model has.
    void readRetryKey(const toml::node &node, const std::string &name, std::string_view k, int64_t &timeoutMs,
                      int &maxRetries, int64_t &initialBackoffMs, int64_t &maxBackoffMs) const
    {
        int64_t number = 0;
        if (k == "timeout_ms") {
            needInteger(node, name, k, timeoutMs, 1);
        } else if (k == "max_retries") {
            if (needInteger(node, name, k, number, 0))
                maxRetries = static_cast<int>(std::min<int64_t>(number, 100));
        } else if (k == "initial_backoff_ms") {
            needInteger(node, name, k, initialBackoffMs, 0);
        } else if (k == "max_backoff_ms") {
            needInteger(node, name, k, maxBackoffMs, 0);
        }
    }

    void unknownKey(const toml::node &node, const std::string &name, std::string_view k, const ConfigSection &section,
                    std::string_view model) const
    {
        if (k == "api_key" || k == "key")
            error(node, name, "would put the API key in the config file",
                  fmt::format("{}: name the variable that holds it (api_key_env){}.", kNoKeyInTheFile,
                              section.accepts("api_key_file") ? ", or a file of mode 0600 (api_key_file)" : ""));
        else
            error(node, name, "is not a known key",
                  fmt::format("The {} keys are {}; a table [models.{}.<profile>] adds a model named {}:<profile>.",
                              model, section.keyList(), model, model));
    }

    std::string m_source;
    ConfigProblems &m_problems;
};

} // namespace

const std::vector<ConfigSection> &modelSections()
{
    static const std::vector<ConfigSection> sections = {
        {"broker.toml", "[models]", {"playbook_dir", "openai", "anthropic"}},
        {"broker.toml", "[models.openai]",
         {"base_url", "model", "api_key_env", "stream", "timeout_ms", "max_retries", "initial_backoff_ms",
          "max_backoff_ms"}},
        {"broker.toml", "[models.anthropic]",
         {"base_url", "model", "api_key_env", "api_key_file", "anthropic_version", "max_tokens", "prompt_caching",
          "stream", "timeout_ms", "max_retries", "initial_backoff_ms", "max_backoff_ms"}},
    };
    return sections;
}

ModelsConfig parseModelsConfig(const toml::table &models, std::string_view sourceName,
                               const std::filesystem::path &baseDir, ModelsConfig defaults, ConfigProblems &problems)
{
    ConfigReader reader(sourceName, problems);
    ModelsConfig config = std::move(defaults);
    try {
        for (const auto &[key, node] : models) {
            const std::string_view k = key.str();
            if (!modelsSection().accepts(k)) {
                reader.error(node, fmt::format("models.{}", k), "is not a known key",
                             "[models] accepts playbook_dir, [models.openai] and [models.anthropic] (each with "
                             "optional [models.<name>.<profile>] tables).");
            } else if (k == "playbook_dir") {
                if (!node.is_string() || node.as_string()->get().empty()) {
                    reader.error(node, "models.playbook_dir", "is not a non-empty string",
                                 "Write playbook_dir = \"/path/to/playbooks\".");
                } else {
                    std::filesystem::path dir(node.as_string()->get());
                    config.playbookDir = dir.is_relative() ? baseDir / dir : dir;
                }
            } else if (!node.is_table()) {
                reader.error(node, fmt::format("models.{}", k), "is not a table",
                             fmt::format("Write it as a [models.{}] section.", k));
            }
        }

        // "<kind>" from [models.<kind>], and "<kind>:<profile>" from each [models.<kind>.<profile>],
        // which inherits the keys it does not set.
        auto readFamily = [&](std::string_view kind, auto &configs, auto read) {
            auto base = configs.contains(std::string(kind)) ? configs[std::string(kind)]
                                                            : typename std::decay_t<decltype(configs)>::mapped_type{};
            const toml::table *table = models[kind].as_table();
            if (table != nullptr)
                read(*table, fmt::format("models.{}", kind), base);
            configs[std::string(kind)] = base;
            if (table == nullptr)
                return;
            for (const auto &[key, node] : *table) {
                const toml::table *profile = node.as_table();
                if (profile == nullptr)
                    continue;
                auto derived = base;
                const std::string section = fmt::format("models.{}.{}", kind, key.str());
                read(*profile, section, derived);
                for (const auto &[innerKey, inner] : *profile) {
                    if (inner.is_table())
                        reader.error(inner, fmt::format("{}.{}", section, innerKey.str()), "is a table nested too deep",
                                     fmt::format("Profiles are one level: [models.{}.<profile>].", kind));
                }
                configs[fmt::format("{}:{}", kind, key.str())] = std::move(derived);
            }
        };
        readFamily("openai", config.openai, [&](const toml::table &table, const std::string &section, OpenAiConfig &out) {
            reader.readOpenAi(table, section, out);
        });
        readFamily("anthropic", config.anthropic,
                   [&](const toml::table &table, const std::string &section, AnthropicConfig &out) {
                       reader.readAnthropic(table, section, baseDir, out);
                   });
    } catch (const std::exception &e) {
        problems.add(ErrorCode::Internal,
                     fmt::format("config {}: unexpected error reading [models]: {}", sourceName, e.what()));
    }
    return config;
}

Result<ModelsConfig> parseModelsConfig(const toml::table &models, std::string_view sourceName,
                                       const std::filesystem::path &baseDir, ModelsConfig defaults)
{
    ConfigProblems problems;
    auto config = parseModelsConfig(models, sourceName, baseDir, std::move(defaults), problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return config;
}

ModelRegistry::ModelRegistry(ModelsConfig config) : m_config(std::move(config))
{
    add(std::make_unique<ScriptedModel>());
    for (const auto &[name, openai] : m_config.openai)
        add(std::make_unique<OpenAiModel>(name, openai));
    for (const auto &[name, anthropic] : m_config.anthropic)
        add(std::make_unique<AnthropicModel>(name, anthropic));
}

ModelRegistry::~ModelRegistry() = default;

void ModelRegistry::add(std::unique_ptr<ModelAdapter> adapter)
{
    std::string name = adapter->name();
    m_adapters[std::move(name)] = std::move(adapter);
}

ModelAdapter *ModelRegistry::find(std::string_view name) const
{
    const auto it = m_adapters.find(name);
    return it == m_adapters.end() ? nullptr : it->second.get();
}

std::vector<std::string> ModelRegistry::names() const
{
    std::vector<std::string> out;
    for (const auto &[name, adapter] : m_adapters)
        out.push_back(name);
    return out;
}

} // namespace paddock::llm
