#pragma once
// Prometheus-style instruments for paddockd and paddock-pool (docs/metrics.md): counters, gauges
// and histograms with fixed buckets, in families with labels, kept in one registry per process,
// plus collectors that read what a daemon already knows (its store, its pools) when /metrics is
// scraped instead of keeping a copy of it.
//
// The hot path is one relaxed atomic add: Counter::inc, Gauge::add and Histogram::observe take no
// lock (a histogram adds to its bucket and to its sum, two atomics). A family finds the child of
// known label values without a lock too (a scan of the children published so far); only the first
// use of new label values takes the family's mutex. Keep label values few (a tier, a model, a
// reason): a family holds at most kMaxChildren of them, and values past that share one child whose
// labels all read "other".
//
// Known limits: the instruments of a process are process-wide (two brokers in one test process
// count into the same counters; each daemon is one process). A scrape reads each atomic on its own,
// so a histogram's _sum may be a moment ahead or behind its buckets; _count is always the +Inf
// bucket.
//
// Threads: everything may be called from any thread. registry() lives for the whole process;
// references it hands out never dangle. Collectors run on the scraping thread, one scrape at a
// time, and may be removed from any thread (removeCollector returns once none of its runs is
// under way).

#include "metrics/exposition.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace paddock::metrics {

class Counter {
public:
    void inc(uint64_t n = 1) noexcept { m_value.fetch_add(n, std::memory_order_relaxed); }
    uint64_t value() const noexcept { return m_value.load(std::memory_order_relaxed); }

private:
    std::atomic<uint64_t> m_value{0};
};

class Gauge {
public:
    void set(double value) noexcept { m_value.store(value, std::memory_order_relaxed); }
    void add(double delta) noexcept { m_value.fetch_add(delta, std::memory_order_relaxed); }
    double value() const noexcept { return m_value.load(std::memory_order_relaxed); }

private:
    std::atomic<double> m_value{0};
};

class Histogram {
public:
    // upperBounds: ascending and finite; +Inf is added.
    explicit Histogram(std::span<const double> upperBounds);

    void observe(double value) noexcept;
    // Seconds since start (a steady clock): the usual way to time something.
    void observeSince(std::chrono::steady_clock::time_point start) noexcept
    {
        observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    HistogramSnapshot snapshot() const;
    uint64_t count() const noexcept;

private:
    std::vector<double> m_bounds;
    std::unique_ptr<std::atomic<uint64_t>[]> m_counts;   // m_bounds.size() + 1
    std::atomic<double> m_sum{0};
};

// Buckets for latencies in seconds, from 0.5 ms to 10 s (appends, claims, model calls).
std::span<const double> latencyBuckets();

// The common part of a family: its name, help and label names, and how it writes itself.
class FamilyBase {
public:
    FamilyBase(std::string name, std::string help, Type type, std::vector<std::string> labelNames)
        : m_name(std::move(name)), m_help(std::move(help)), m_type(type), m_labelNames(std::move(labelNames))
    {
    }
    virtual ~FamilyBase() = default;
    FamilyBase(const FamilyBase &) = delete;
    FamilyBase &operator=(const FamilyBase &) = delete;

    const std::string &name() const { return m_name; }
    Type type() const { return m_type; }
    virtual void write(Exposition &out) const = 0;

protected:
    const std::string m_name;
    const std::string m_help;
    const Type m_type;
    const std::vector<std::string> m_labelNames;
};

// A family of one kind of instrument with its label names; with() finds or makes the child of
// some label values (in the order of the label names).
template <typename T>
class Family final : public FamilyBase {
public:
    static constexpr size_t kMaxChildren = 128;

    Family(std::string name, std::string help, Type type, std::vector<std::string> labelNames,
           std::function<std::unique_ptr<T>()> make)
        : FamilyBase(std::move(name), std::move(help), type, std::move(labelNames)), m_make(std::move(make))
    {
    }

    T &with(std::initializer_list<std::string_view> values) { return with(std::span(values.begin(), values.size())); }
    T &with(std::span<const std::string_view> values)
    {
        if (T *found = find(values, m_published.load(std::memory_order_acquire)))
            return *found;
        return add(values);
    }

    void write(Exposition &out) const override;

private:
    struct Child {
        std::vector<std::string> values;
        std::unique_ptr<T> metric;
    };

    T *find(std::span<const std::string_view> values, size_t published) const
    {
        for (size_t i = 0; i < published; ++i) {
            const auto &have = m_children[i].values;
            bool same = have.size() == values.size();
            for (size_t j = 0; same && j < have.size(); ++j)
                same = have[j] == values[j];
            if (same)
                return m_children[i].metric.get();
        }
        return nullptr;
    }

    T &add(std::span<const std::string_view> values)
    {
        std::lock_guard lock(m_addMutex);
        const size_t published = m_published.load(std::memory_order_relaxed);
        if (T *found = find(values, published))
            return *found;
        std::vector<std::string> copy;
        // The last slot is the overflow child: every label "other".
        const bool overflow = published == kMaxChildren - 1;
        for (size_t i = 0; i < m_labelNames.size(); ++i)
            copy.emplace_back(overflow ? std::string_view("other") : i < values.size() ? values[i] : std::string_view());
        if (published == kMaxChildren)
            return *m_children[kMaxChildren - 1].metric;
        m_children[published] = Child{std::move(copy), m_make()};
        m_published.store(published + 1, std::memory_order_release);
        return *m_children[published].metric;
    }

    std::function<std::unique_ptr<T>()> m_make;
    std::array<Child, kMaxChildren> m_children;   // [0, m_published) are complete and never change
    std::atomic<size_t> m_published{0};
    std::mutex m_addMutex;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Writes families that are not instruments: what a daemon reads from its own state at scrape time.
using Collector = std::function<void(Exposition &)>;

class Registry {
public:
    Registry() = default;
    Registry(const Registry &) = delete;
    Registry &operator=(const Registry &) = delete;

    // Each name once: asking again for a family of the same name, type and labels returns the same
    // one (so a function-local static and a test may both ask); a clash of type or labels throws
    // std::logic_error, a programming mistake caught by the first test that runs the code.
    Counter &counter(const std::string &name, const std::string &help);
    Gauge &gauge(const std::string &name, const std::string &help);
    Histogram &histogram(const std::string &name, const std::string &help, std::span<const double> bounds);
    CounterFamily &counterFamily(const std::string &name, const std::string &help, std::vector<std::string> labels);
    GaugeFamily &gaugeFamily(const std::string &name, const std::string &help, std::vector<std::string> labels);
    HistogramFamily &histogramFamily(const std::string &name, const std::string &help, std::vector<std::string> labels,
                                     std::span<const double> bounds);

    // Runs at every scrape, after the instruments; returns an id for removeCollector.
    int addCollector(Collector collector);
    void removeCollector(int id);

    // The text exposition format 0.0.4 of every family and collector.
    std::string expose() const;

private:
    template <typename T>
    Family<T> &family(const std::string &name, const std::string &help, Type type, std::vector<std::string> labels,
                      std::function<std::unique_ptr<T>()> make);

    mutable std::mutex m_mutex;   // the maps below; never taken by an instrument's hot path
    std::map<std::string, std::unique_ptr<FamilyBase>> m_families;
    std::map<std::string, std::vector<std::string>> m_labels;   // by family name, to check a second ask
    std::map<int, Collector> m_collectors;
    int m_nextCollector = 1;
    mutable std::mutex m_scrapeMutex;   // one scrape at a time; held while collectors run
};

// The process's registry.
Registry &registry();

template <typename T>
void Family<T>::write(Exposition &out) const
{
    if (!out.family(m_name, m_help, m_type))
        return;
    const size_t published = m_published.load(std::memory_order_acquire);
    for (size_t i = 0; i < published; ++i) {
        Labels labels;
        for (size_t j = 0; j < m_labelNames.size(); ++j)
            labels.emplace_back(m_labelNames[j], m_children[i].values[j]);
        if constexpr (std::is_same_v<T, Histogram>)
            out.histogram(labels, m_children[i].metric->snapshot());
        else
            out.sample(labels, static_cast<double>(m_children[i].metric->value()));
    }
}

// The content type of the text exposition format.
inline constexpr const char *kContentType = "text/plain; version=0.0.4; charset=utf-8";

} // namespace paddock::metrics
