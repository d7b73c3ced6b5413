#pragma once
// What things cost: a price table for model tokens (per model name, per million input, output and
// cached tokens), snapshot storage (per GiB-month) and the arithmetic that turns usage into
// micro-dollars. Tier prices per hour come from the pools (Status/ListPools), not from here.
// docs/governance.md ("Cost and budgets") documents the [prices] table and its defaults.
//
// Threads: plain values and pure functions; safe anywhere.

#include "common/config_problems.h"
#include "common/result.h"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace paddock::cost {

struct ModelPrice {
    double inputPerMillion = 0;    // US dollars per million input tokens (cached ones excluded)
    double outputPerMillion = 0;
    double cachedPerMillion = 0;   // input tokens served from the provider's prompt cache
    // Input tokens written to the provider's prompt cache (Anthropic bills them above the input
    // price); unset: the input price.
    std::optional<double> cacheWritePerMillion = std::nullopt;

    double cacheWritePrice() const { return cacheWritePerMillion.value_or(inputPerMillion); }
};

struct PriceTable {
    // By model name as the response names it (e.g. "gpt-4o-mini") or as the session names it
    // (e.g. "scripted", "openai:local"); "default" for any other.
    std::map<std::string, ModelPrice> models;
    double storagePerGibMonth = 0.023;

    // The price of `name`, else of `fallbackName`, else "default", else free.
    const ModelPrice &modelPrice(const std::string &name, const std::string &fallbackName = {}) const;
};

// The built-in table: scripted 3.00/15.00/0.30, anthropic 3.00/15.00/0.30 with cache writes at 3.75
// (Claude Sonnet's list prices), default 2.50/10.00/1.25, storage 0.023.
PriceTable defaultPriceTable();

// Reads a [prices] table over `base`. Errors name file:line, the key and the fix; the first form
// adds every problem to `problems` and returns what it could read, the second joins them.
PriceTable parsePrices(const toml::table &prices, const std::filesystem::path &file, PriceTable base,
                       ConfigProblems &problems);
Result<PriceTable> parsePrices(const toml::table &prices, const std::filesystem::path &file, PriceTable base);

// The [prices] keys the loader accepts (docs/configuration.md documents each).
const std::vector<ConfigSection> &priceSections();

// Micro-dollars, rounded to the nearest. inputTokens counts the cached and cache-write tokens too
// (as the OpenAI API reports prompt_tokens; llm::Usage adds Anthropic's counts up the same way):
// cached ones are billed at the cached price, cache writes at the cache-write price, the rest at
// the input price.
int64_t modelCostMicros(const ModelPrice &price, int64_t inputTokens, int64_t outputTokens, int64_t cachedTokens,
                        int64_t cacheWriteTokens = 0);
int64_t sandboxCostMicros(double pricePerHour, int64_t milliseconds);
// A month is 30 days; a GiB is 2^30 bytes.
int64_t storageCostMicros(double pricePerGibMonth, int64_t bytes, int64_t milliseconds);

} // namespace paddock::cost
