#include "broker/model/model_registry.h"

#include "broker/model/scripted_model.h"

#include <fmt/format.h>

namespace paddock::model {
namespace {

class ConfigReader {
public:
    explicit ConfigReader(std::string_view source) : m_source(source) {}

    std::unexpected<Error> error(const toml::node &node, std::string_view key, std::string_view problem,
                                 std::string_view fix) const
    {
        const auto line = node.source().begin.line;
        const std::string where = line > 0 ? fmt::format("{}:{}", m_source, line) : m_source;
        return fail(ErrorCode::InvalidArgument, fmt::format("config {}: {} {}. {}", where, key, problem, fix));
    }

    // Applies the scalar keys of table (the section named section) onto config.
    Status readOpenAi(const toml::table &table, std::string_view section, OpenAiConfig &config) const
    {
        for (const auto &[key, node] : table) {
            const std::string_view k = key.str();
            const std::string name = fmt::format("{}.{}", section, k);
            if (node.is_table())
                continue;   // a profile, read by the caller
            auto needString = [&](std::string &out) -> Status {
                if (!node.is_string())
                    return error(node, name, "is not a string", fmt::format("Write {} = \"...\".", k));
                out = node.as_string()->get();
                return {};
            };
            auto needInteger = [&](int64_t &out, int64_t minimum) -> Status {
                if (!node.is_integer() || node.as_integer()->get() < minimum)
                    return error(node, name, fmt::format("must be an integer of at least {}", minimum),
                                 fmt::format("Write {} = <number>.", k));
                out = node.as_integer()->get();
                return {};
            };
            Status status;
            int64_t number = 0;
            if (k == "base_url") {
                status = needString(config.baseUrl);
                if (status && !config.baseUrl.starts_with("http://") && !config.baseUrl.starts_with("https://"))
                    return error(node, name, fmt::format("is \"{}\", not an http(s) URL", config.baseUrl),
                                 "Write e.g. base_url = \"https://api.openai.com/v1\".");
            } else if (k == "model") {
                status = needString(config.model);
                if (status && config.model.empty())
                    return error(node, name, "is empty", "Name the model to request, e.g. model = \"gpt-4o-mini\".");
            } else if (k == "api_key_env") {
                status = needString(config.apiKeyEnv);
            } else if (k == "timeout_ms") {
                status = needInteger(config.timeoutMs, 1);
            } else if (k == "max_retries") {
                status = needInteger(number, 0);
                config.maxRetries = static_cast<int>(std::min<int64_t>(number, 100));
            } else if (k == "initial_backoff_ms") {
                status = needInteger(config.initialBackoffMs, 0);
            } else if (k == "max_backoff_ms") {
                status = needInteger(config.maxBackoffMs, 0);
            } else {
                return error(node, name, "is not a known key",
                             "The openai keys are base_url, model, api_key_env, timeout_ms, max_retries, "
                             "initial_backoff_ms and max_backoff_ms; a table [models.openai.<profile>] adds "
                             "a model named openai:<profile>.");
            }
            if (!status)
                return status;
        }
        return {};
    }

private:
    std::string m_source;
};

} // namespace

Result<ModelsConfig> parseModelsConfig(const toml::table &models, std::string_view sourceName,
                                       const std::filesystem::path &baseDir, ModelsConfig defaults)
{
    try {
        ConfigReader reader(sourceName);
        ModelsConfig config = std::move(defaults);
        OpenAiConfig base = config.openai.contains("openai") ? config.openai["openai"] : OpenAiConfig{};

        for (const auto &[key, node] : models) {
            const std::string_view k = key.str();
            if (k == "playbook_dir") {
                if (!node.is_string() || node.as_string()->get().empty())
                    return reader.error(node, "models.playbook_dir", "is not a non-empty string",
                                        "Write playbook_dir = \"/path/to/playbooks\".");
                std::filesystem::path dir(node.as_string()->get());
                config.playbookDir = dir.is_relative() ? baseDir / dir : dir;
            } else if (k == "openai") {
                if (!node.is_table())
                    return reader.error(node, "models.openai", "is not a table",
                                        "Write it as a [models.openai] section.");
            } else {
                return reader.error(node, fmt::format("models.{}", k), "is not a known key",
                                    "[models] accepts playbook_dir and [models.openai] (with optional "
                                    "[models.openai.<profile>] tables).");
            }
        }

        const toml::table *openai = models["openai"].as_table();
        if (openai != nullptr) {
            if (auto status = reader.readOpenAi(*openai, "models.openai", base); !status)
                return std::unexpected(status.error());
        }
        config.openai["openai"] = base;
        if (openai != nullptr) {
            for (const auto &[key, node] : *openai) {
                const toml::table *profile = node.as_table();
                if (profile == nullptr)
                    continue;
                OpenAiConfig derived = base;
                const std::string section = fmt::format("models.openai.{}", key.str());
                if (auto status = reader.readOpenAi(*profile, section, derived); !status)
                    return std::unexpected(status.error());
                for (const auto &[innerKey, inner] : *profile) {
                    if (inner.is_table())
                        return reader.error(inner, fmt::format("{}.{}", section, innerKey.str()),
                                            "is a table nested too deep",
                                            "Profiles are one level: [models.openai.<profile>].");
                }
                config.openai[fmt::format("openai:{}", key.str())] = std::move(derived);
            }
        }
        return config;
    } catch (const std::exception &e) {
        return fail(ErrorCode::Internal,
                    fmt::format("config {}: unexpected error reading [models]: {}", sourceName, e.what()));
    }
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

} // namespace paddock::model
