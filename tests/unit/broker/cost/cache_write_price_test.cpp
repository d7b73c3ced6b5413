// Prompt-cache writes priced apart from input and cache reads (Anthropic bills them at 1.25 times
// the input price): the price table's cache_write_per_million, its fallback to the input price,
// and the arithmetic over a usage whose input counts reads and writes too.

#include "broker/cost/prices.h"

#include <gtest/gtest.h>

namespace paddock::cost {
namespace {

TEST(CacheWritePrices, WritesReadsAndTheRestArePricedApart)
{
    const ModelPrice price{3.00, 15.00, 0.30, 3.75};
    // 10,000 input tokens: 6,000 cache reads, 3,000 cache writes, 1,000 neither; 200 output.
    EXPECT_EQ(modelCostMicros(price, 10'000, 200, 6'000, 3'000), 3'000 + 1'800 + 11'250 + 3'000);
    // Without writes, the sum is the one it always was.
    EXPECT_EQ(modelCostMicros(price, 10'000, 200, 6'000, 0), modelCostMicros(price, 10'000, 200, 6'000));
    // Counts that do not add up are clamped: never a negative number of plain input tokens.
    EXPECT_EQ(modelCostMicros(price, 100, 0, 80, 500), 24 + 75);   // 80 reads, the other 20 as writes
    // No cache-write price: writes cost what input does (OpenAI bills no writes).
    const ModelPrice openai{2.50, 10.00, 1.25};
    EXPECT_EQ(openai.cacheWritePrice(), 2.50);
    EXPECT_EQ(modelCostMicros(openai, 1'000, 0, 0, 400), 2'500);
}

TEST(CacheWritePrices, TheTableReadsThemAndHasAnthropicBuiltIn)
{
    PriceTable table = defaultPriceTable();
    EXPECT_EQ(table.modelPrice("claude-unknown", "anthropic").cacheWritePrice(), 3.75);
    EXPECT_EQ(table.modelPrice("claude-unknown", "anthropic").cachedPerMillion, 0.30);
    EXPECT_EQ(table.modelPrice("gpt-unknown").cacheWritePrice(), 2.50);   // default: its input price

    auto loaded = parsePrices(toml::parse(R"(
[models.claude-haiku-4-5]
input_per_million = 1.00
output_per_million = 5.00
cached_per_million = 0.10
cache_write_per_million = 1.25
[models.other]
input_per_million = 0.50
)"),
                              "broker.toml", table);
    ASSERT_TRUE(loaded) << loaded.error().message;
    EXPECT_EQ(loaded->modelPrice("claude-haiku-4-5").cacheWritePrice(), 1.25);
    EXPECT_EQ(loaded->modelPrice("other").cacheWritePrice(), 0.50);

    auto negative = parsePrices(toml::parse("[models.x]\ncache_write_per_million = -1\n"), "broker.toml", table);
    ASSERT_FALSE(negative);
    EXPECT_NE(negative.error().message.find("cache_write_per_million"), std::string::npos) << negative.error().message;
}

} // namespace
} // namespace paddock::cost
