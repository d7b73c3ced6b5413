#include "broker/llm/model_registry.h"

#include "broker/llm/scripted_model.h"

#include <fmt/format.h>

namespace paddock::llm {
namespace {

const ConfigSection &modelsSection() { return modelSections()[0]; }
const ConfigSection &openAiSection() { return modelSections()[1]; }

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
            auto needString = [&](std::string &out) {
                if (!node.is_string()) {
                    error(node, name, "is not a string", fmt::format("Write {} = \"...\".", k));
                    return false;
                }
                out = node.as_string()->get();
                return true;
            };
            auto needInteger = [&](int64_t &out, int64_t minimum) {
                if (!node.is_integer() || node.as_integer()->get() < minimum) {
                    error(node, name, fmt::format("must be an integer of at least {}", minimum),
                          fmt::format("Write {} = <number>.", k));
                    return false;
                }
                out = node.as_integer()->get();
                return true;
            };
            int64_t number = 0;
            if (!openAiSection().accepts(k)) {
                error(node, name, "is not a known key",
                      fmt::format("The openai keys are {}; a table [models.openai.<profile>] adds a model named "
                                  "openai:<profile>.", openAiSection().keyList()));
            } else if (k == "base_url") {
                if (needString(config.baseUrl) && !config.baseUrl.starts_with("http://")
                    && !config.baseUrl.starts_with("https://"))
                    error(node, name, fmt::format("is \"{}\", not an http(s) URL", config.baseUrl),
                          "Write e.g. base_url = \"https://api.openai.com/v1\".");
            } else if (k == "model") {
                if (needString(config.model) && config.model.empty())
                    error(node, name, "is empty", "Name the model to request, e.g. model = \"gpt-4o-mini\".");
            } else if (k == "api_key_env") {
                needString(config.apiKeyEnv);
            } else if (k == "timeout_ms") {
                needInteger(config.timeoutMs, 1);
            } else if (k == "max_retries") {
                if (needInteger(number, 0))
                    config.maxRetries = static_cast<int>(std::min<int64_t>(number, 100));
            } else if (k == "initial_backoff_ms") {
                needInteger(config.initialBackoffMs, 0);
            } else if (k == "max_backoff_ms") {
                needInteger(config.maxBackoffMs, 0);
            }
        }
    }

private:
    std::string m_source;
    ConfigProblems &m_problems;
};

} // namespace

const std::vector<ConfigSection> &modelSections()
{
    static const std::vector<ConfigSection> sections = {
        {"broker.toml", "[models]", {"playbook_dir", "openai"}},
        {"broker.toml", "[models.openai]",
         {"base_url", "model", "api_key_env", "timeout_ms", "max_retries", "initial_backoff_ms", "max_backoff_ms"}},
    };
    return sections;
}

ModelsConfig parseModelsConfig(const toml::table &models, std::string_view sourceName,
                               const std::filesystem::path &baseDir, ModelsConfig defaults, ConfigProblems &problems)
{
    ConfigReader reader(sourceName, problems);
    ModelsConfig config = std::move(defaults);
    try {
        OpenAiConfig base = config.openai.contains("openai") ? config.openai["openai"] : OpenAiConfig{};

        for (const auto &[key, node] : models) {
            const std::string_view k = key.str();
            if (!modelsSection().accepts(k)) {
                reader.error(node, fmt::format("models.{}", k), "is not a known key",
                             "[models] accepts playbook_dir and [models.openai] (with optional "
                             "[models.openai.<profile>] tables).");
            } else if (k == "playbook_dir") {
                if (!node.is_string() || node.as_string()->get().empty()) {
                    reader.error(node, "models.playbook_dir", "is not a non-empty string",
                                 "Write playbook_dir = \"/path/to/playbooks\".");
                } else {
                    std::filesystem::path dir(node.as_string()->get());
                    config.playbookDir = dir.is_relative() ? baseDir / dir : dir;
                }
            } else if (k == "openai" && !node.is_table()) {
                reader.error(node, "models.openai", "is not a table", "Write it as a [models.openai] section.");
            }
        }

        const toml::table *openai = models["openai"].as_table();
        if (openai != nullptr)
            reader.readOpenAi(*openai, "models.openai", base);
        config.openai["openai"] = base;
        if (openai != nullptr) {
            for (const auto &[key, node] : *openai) {
                const toml::table *profile = node.as_table();
                if (profile == nullptr)
                    continue;
                OpenAiConfig derived = base;
                const std::string section = fmt::format("models.openai.{}", key.str());
                reader.readOpenAi(*profile, section, derived);
                for (const auto &[innerKey, inner] : *profile) {
                    if (inner.is_table())
                        reader.error(inner, fmt::format("{}.{}", section, innerKey.str()), "is a table nested too deep",
                                     "Profiles are one level: [models.openai.<profile>].");
                }
                config.openai[fmt::format("openai:{}", key.str())] = std::move(derived);
            }
        }
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
