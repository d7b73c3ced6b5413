// metrics_bench: what a hook costs on a hot path, against the raw mechanism it is built on, in the
// same run: Counter::inc against a plain relaxed std::atomic fetch_add, on one thread and on two
// threads sharing it; a labelled child found with Family::with() on every call (a step's
// countStep) against the same raw add; Histogram::observe (a bucket scan, a bucket add and a sum
// add) against the raw add. Figures are ns per operation, best of several runs, and the ratio to
// raw.

#include "metrics/registry.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using paddock::metrics::registry;

constexpr int kOps = 20'000'000;
constexpr int kRuns = 5;

// Best ns per operation of `threads` threads each running body(kOps / threads).
template <typename F>
double bestNsPerOp(int threads, F &&body)
{
    double best = 1e30;
    for (int run = 0; run < kRuns; ++run) {
        std::vector<std::thread> workers;
        std::atomic<int> ready{0};
        const auto t0 = Clock::now();
        for (int t = 0; t < threads; ++t)
            workers.emplace_back([&] {
                ready.fetch_add(1);
                while (ready.load() < threads) {
                }
                body(kOps / threads);
            });
        for (auto &worker : workers)
            worker.join();
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kOps;
        best = std::min(best, ns);
    }
    return best;
}

void row(const char *what, int threads, double raw, double hook)
{
    std::printf("%-44s %7d %10.2f %10.2f %8.2fx\n", what, threads, raw, hook, hook / raw);
}

} // namespace

int main()
{
    std::atomic<uint64_t> raw{0};
    auto rawAdd = [&](int n) {
        for (int i = 0; i < n; ++i)
            raw.fetch_add(1, std::memory_order_relaxed);
    };
    auto &counter = registry().counter("bench_counter_total", "bench");
    auto &family = registry().counterFamily("bench_steps_total", "bench", {"action"});
    for (const char *action : {"none", "claim_sandbox", "call_model", "run_tool", "finish"})
        family.with({action}).inc(0);   // the labels a broker has after its first steps
    auto &histogram = registry().histogram("bench_append_duration_seconds", "bench", paddock::metrics::latencyBuckets());

    std::printf("%d operations per run, best of %d runs, ns per operation\n", kOps, kRuns);
    std::printf("%-44s %7s %10s %10s %9s\n", "hook", "threads", "raw ns", "hook ns", "x raw");
    for (int threads : {1, 2}) {
        const double rawNs = bestNsPerOp(threads, rawAdd);
        row("Counter::inc vs relaxed fetch_add", threads, rawNs, bestNsPerOp(threads, [&](int n) {
                for (int i = 0; i < n; ++i)
                    counter.inc();
            }));
        row("Family::with(\"run_tool\").inc vs fetch_add", threads, rawNs, bestNsPerOp(threads, [&](int n) {
                for (int i = 0; i < n; ++i)
                    family.with({"run_tool"}).inc();
            }));
        row("Histogram::observe(3 ms) vs fetch_add", threads, rawNs, bestNsPerOp(threads, [&](int n) {
                for (int i = 0; i < n; ++i)
                    histogram.observe(0.003);
            }));
    }
    std::printf("(checks: raw %llu, counter %llu, histogram %llu)\n", static_cast<unsigned long long>(raw.load()),
                static_cast<unsigned long long>(counter.value()), static_cast<unsigned long long>(histogram.count()));
    return 0;
}
