#include "broker/cost/prices.h"

#include <algorithm>
#include <cmath>

namespace paddock::cost {

namespace {

std::string where(const std::filesystem::path &file, const toml::node &node)
{
    return file.string() + ":" + std::to_string(node.source().begin.line);
}

int64_t rounded(double micros)
{
    return micros <= 0 ? 0 : static_cast<int64_t>(std::llround(micros));
}

} // namespace

const ModelPrice &PriceTable::modelPrice(const std::string &name, const std::string &fallbackName) const
{
    static const ModelPrice kFree;
    for (const std::string *key : {&name, &fallbackName}) {
        if (key->empty())
            continue;
        if (auto it = models.find(*key); it != models.end())
            return it->second;
    }
    auto it = models.find("default");
    return it != models.end() ? it->second : kFree;
}

PriceTable defaultPriceTable()
{
    PriceTable table;
    table.models["scripted"] = {3.00, 15.00, 0.30, std::nullopt};
    table.models["anthropic"] = {3.00, 15.00, 0.30, 3.75};
    table.models["default"] = {2.50, 10.00, 1.25, std::nullopt};
    return table;
}

const std::vector<ConfigSection> &priceSections()
{
    static const std::vector<ConfigSection> sections = {
        {"broker.toml", "[prices]", {"storage_per_gib_month", "models"}},
        {"broker.toml", "[prices.models.NAME]", {"input_per_million", "output_per_million", "cached_per_million", "cache_write_per_million"}},
    };
    return sections;
}

PriceTable parsePrices(const toml::table &prices, const std::filesystem::path &file, PriceTable table,
                       ConfigProblems &problems)
{
    const auto &top = priceSections()[0];
    const auto &modelKeys = priceSections()[1];
    auto number = [&](const toml::node &node, const std::string &key, double &into) {
        auto value = node.value<double>();
        if (!value || *value < 0 || !std::isfinite(*value))
            problems.add(ErrorCode::InvalidArgument, where(file, node) + ": prices." + key
                             + " must be a number of US dollars, 0 or more");
        else
            into = *value;
    };
    for (const auto &[key, node] : prices) {
        const std::string name(key.str());
        if (!top.accepts(name)) {
            problems.add(ErrorCode::InvalidArgument, where(file, node) + ": unknown key '" + name
                             + "' in [prices]; use storage_per_gib_month and [prices.models.NAME]");
        } else if (name == "storage_per_gib_month") {
            number(node, name, table.storagePerGibMonth);
        } else if (const auto *models = node.as_table(); !models) {
            problems.add(ErrorCode::InvalidArgument, where(file, node)
                             + ": prices.models must be a table of [prices.models.NAME] tables");
        } else {
            for (const auto &[modelKey, modelNode] : *models) {
                const std::string model(modelKey.str());
                const auto *entry = modelNode.as_table();
                if (!entry) {
                    problems.add(ErrorCode::InvalidArgument, where(file, modelNode) + ": prices.models." + model
                                     + " must be a table with " + modelKeys.keyList());
                    continue;
                }
                ModelPrice price = table.models.count(model) ? table.models[model] : ModelPrice{};
                for (const auto &[fieldKey, fieldNode] : *entry) {
                    const std::string field(fieldKey.str());
                    double cacheWrite = price.cacheWritePrice();
                    double *into = field == "input_per_million" ? &price.inputPerMillion
                        : field == "output_per_million"         ? &price.outputPerMillion
                        : field == "cached_per_million"         ? &price.cachedPerMillion
                        : field == "cache_write_per_million"    ? &cacheWrite
                                                                : nullptr;
                    if (!into || !modelKeys.accepts(field)) {
                        problems.add(ErrorCode::InvalidArgument, where(file, fieldNode) + ": unknown key '" + field
                                         + "' in [prices.models." + model + "]; use " + modelKeys.keyList());
                        continue;
                    }
                    number(fieldNode, "models." + model + "." + field, *into);
                    if (into == &cacheWrite)
                        price.cacheWritePerMillion = cacheWrite;
                }
                table.models[model] = price;
            }
        }
    }
    return table;
}

Result<PriceTable> parsePrices(const toml::table &prices, const std::filesystem::path &file, PriceTable table)
{
    ConfigProblems problems;
    auto parsed = parsePrices(prices, file, std::move(table), problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return parsed;
}

int64_t modelCostMicros(const ModelPrice &price, int64_t inputTokens, int64_t outputTokens, int64_t cachedTokens,
                        int64_t cacheWriteTokens)
{
    const int64_t cached = std::clamp<int64_t>(cachedTokens, 0, std::max<int64_t>(inputTokens, 0));
    const int64_t written = std::clamp<int64_t>(cacheWriteTokens, 0, std::max<int64_t>(inputTokens - cached, 0));
    // Dollars per million tokens are micro-dollars per token.
    return rounded(static_cast<double>(inputTokens - cached - written) * price.inputPerMillion
                   + static_cast<double>(std::max<int64_t>(outputTokens, 0)) * price.outputPerMillion
                   + static_cast<double>(cached) * price.cachedPerMillion
                   + static_cast<double>(written) * price.cacheWritePrice());
}

int64_t sandboxCostMicros(double pricePerHour, int64_t milliseconds)
{
    return rounded(pricePerHour * 1e6 * static_cast<double>(std::max<int64_t>(milliseconds, 0)) / 3'600'000.0);
}

int64_t storageCostMicros(double pricePerGibMonth, int64_t bytes, int64_t milliseconds)
{
    constexpr double kGib = 1024.0 * 1024.0 * 1024.0;
    constexpr double kMonthMs = 30.0 * 86'400'000.0;
    return rounded(pricePerGibMonth * 1e6 * (static_cast<double>(std::max<int64_t>(bytes, 0)) / kGib)
                   * (static_cast<double>(std::max<int64_t>(milliseconds, 0)) / kMonthMs));
}

} // namespace paddock::cost
