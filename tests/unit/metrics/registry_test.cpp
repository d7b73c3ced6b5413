// The instruments, their families and collectors, and the text they are exposed as: values exact
// under concurrent increments, label values escaped, histograms cumulative with +Inf equal to
// _count, a family past its child limit folded into "other", and mistakes caught at registration.

#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

namespace paddock::metrics {
namespace {

bool contains(const std::string &text, const std::string &part)
{
    return text.find(part) != std::string::npos;
}

TEST(MetricsRegistry, CountersAndGaugesWriteTheirValuesWithHelpAndType)
{
    Registry registry;
    Counter &steps = registry.counter("test_steps_total", "Steps taken");
    Gauge &depth = registry.gauge("test_queue_depth", "Items waiting");
    steps.inc();
    steps.inc(41);
    depth.set(7);
    depth.add(-2.5);
    const std::string text = registry.expose();
    EXPECT_TRUE(contains(text, "# HELP test_steps_total Steps taken\n# TYPE test_steps_total counter\ntest_steps_total 42\n"))
        << text;
    EXPECT_TRUE(contains(text, "# TYPE test_queue_depth gauge\ntest_queue_depth 4.5\n")) << text;
    // Asking again returns the same instrument.
    EXPECT_EQ(&registry.counter("test_steps_total", "Steps taken"), &steps);
}

TEST(MetricsRegistry, ConcurrentIncrementsAreAllCounted)
{
    Registry registry;
    Counter &counter = registry.counter("test_hits_total", "Hits");
    Histogram &histogram = registry.histogram("test_wait_seconds", "Waits", latencyBuckets());
    CounterFamily &byKind = registry.counterFamily("test_kinds_total", "By kind", {"kind"});
    constexpr int kThreads = 4;
    constexpr int kPerThread = 100000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            const std::string kind = t % 2 ? "odd" : "even";
            for (int i = 0; i < kPerThread; ++i) {
                counter.inc();
                histogram.observe(0.002);
                byKind.with({kind}).inc();
            }
        });
    for (auto &thread : threads)
        thread.join();
    EXPECT_EQ(counter.value(), uint64_t{kThreads} * kPerThread);
    EXPECT_EQ(histogram.count(), uint64_t{kThreads} * kPerThread);
    EXPECT_NEAR(histogram.snapshot().sum, 0.002 * kThreads * kPerThread, 1e-6);
    EXPECT_EQ(byKind.with({"odd"}).value(), uint64_t{kThreads / 2} * kPerThread);
    EXPECT_EQ(byKind.with({"even"}).value(), uint64_t{kThreads / 2} * kPerThread);
}

TEST(MetricsRegistry, HistogramsAreCumulativeWithInfEqualToCount)
{
    Registry registry;
    const std::array<double, 3> bounds{0.01, 0.1, 1};
    HistogramFamily &latency = registry.histogramFamily("test_call_duration_seconds", "Calls", {"model"}, bounds);
    Histogram &h = latency.with({"a"});
    for (double v : {0.005, 0.01, 0.05, 0.5, 5.0})
        h.observe(v);
    const std::string text = registry.expose();
    EXPECT_TRUE(contains(text, "# TYPE test_call_duration_seconds histogram\n")) << text;
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_bucket{model=\"a\",le=\"0.01\"} 2\n")) << text;   // 0.01 is in
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_bucket{model=\"a\",le=\"0.1\"} 3\n")) << text;
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_bucket{model=\"a\",le=\"1\"} 4\n")) << text;
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_bucket{model=\"a\",le=\"+Inf\"} 5\n")) << text;
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_sum{model=\"a\"} " + Exposition::number(h.snapshot().sum) + "\n"))
        << text;
    EXPECT_NEAR(h.snapshot().sum, 5.565, 1e-12);
    EXPECT_TRUE(contains(text, "test_call_duration_seconds_count{model=\"a\"} 5\n")) << text;
}

TEST(MetricsRegistry, LabelValuesAndHelpAreEscaped)
{
    Registry registry;
    registry.counterFamily("test_odd_total", "Help with \\ and\nnewline", {"value"})
        .with({"quote \" backslash \\ newline \n end"})
        .inc();
    const std::string text = registry.expose();
    EXPECT_TRUE(contains(text, "# HELP test_odd_total Help with \\\\ and\\nnewline\n")) << text;
    EXPECT_TRUE(contains(text, "test_odd_total{value=\"quote \\\" backslash \\\\ newline \\n end\"} 1\n")) << text;
}

TEST(MetricsRegistry, AFamilyPastItsChildLimitCountsTheRestAsOther)
{
    Registry registry;
    CounterFamily &family = registry.counterFamily("test_many_total", "Many", {"id"});
    for (size_t i = 0; i < CounterFamily::kMaxChildren + 10; ++i)
        family.with({"id-" + std::to_string(i)}).inc();
    const std::string text = registry.expose();
    EXPECT_TRUE(contains(text, "test_many_total{id=\"id-0\"} 1\n")) << text;
    EXPECT_TRUE(contains(text, "test_many_total{id=\"other\"} 11\n")) << text;   // the last slot and the 10 after it
    EXPECT_FALSE(contains(text, "\"id-" + std::to_string(CounterFamily::kMaxChildren - 1) + "\"")) << text;
}

TEST(MetricsRegistry, CollectorsWriteAtEveryScrapeUntilRemoved)
{
    Registry registry;
    int scrapes = 0;
    const int id = registry.addCollector([&](Exposition &out) {
        ++scrapes;
        out.family("test_pool_warm_sandboxes", "Warm", Type::Gauge);
        out.sample({{"tier", "lite"}}, scrapes);
    });
    EXPECT_TRUE(contains(registry.expose(), "test_pool_warm_sandboxes{tier=\"lite\"} 1\n"));
    EXPECT_TRUE(contains(registry.expose(), "test_pool_warm_sandboxes{tier=\"lite\"} 2\n"));
    registry.removeCollector(id);
    EXPECT_FALSE(contains(registry.expose(), "test_pool_warm_sandboxes"));
    EXPECT_EQ(scrapes, 2);
}

TEST(MetricsRegistry, ASecondFamilyOfTheSameNameIsLeftOutAndSaidSo)
{
    Registry registry;
    registry.gauge("test_twice", "First").set(1);
    registry.addCollector([](Exposition &out) {
        out.family("test_twice", "Second", Type::Gauge);
        out.sample(2);
    });
    const std::string text = registry.expose();
    EXPECT_TRUE(contains(text, "test_twice 1\n")) << text;
    EXPECT_FALSE(contains(text, "test_twice 2\n")) << text;
    EXPECT_TRUE(contains(text, "# a second family named test_twice was left out\n")) << text;
}

TEST(MetricsRegistry, MistakesAreRefusedAtRegistration)
{
    Registry registry;
    registry.counter("test_a_total", "A");
    EXPECT_THROW(registry.gauge("test_a_total", "A as a gauge"), std::logic_error);
    EXPECT_THROW(registry.counterFamily("test_a_total", "A with labels", {"x"}), std::logic_error);
    EXPECT_THROW(registry.counter("test-dash", "bad name"), std::logic_error);
    EXPECT_THROW(registry.counterFamily("test_b_total", "reserved label", {"le"}), std::logic_error);
    const std::array<double, 2> unsorted{1, 0.5};
    EXPECT_THROW(registry.histogram("test_c_seconds", "unsorted", unsorted), std::logic_error);
}

TEST(MetricsExposition, NumbersAreWrittenAsTheFormatReadsThem)
{
    EXPECT_EQ(Exposition::number(42), "42");
    EXPECT_EQ(Exposition::number(0.25), "0.25");
    EXPECT_EQ(Exposition::number(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(Exposition::number(-std::numeric_limits<double>::infinity()), "-Inf");
    EXPECT_EQ(Exposition::number(std::numeric_limits<double>::quiet_NaN()), "NaN");
    EXPECT_EQ(Exposition::number(1e21), "1e+21");
}

} // namespace
} // namespace paddock::metrics
