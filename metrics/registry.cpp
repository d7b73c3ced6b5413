#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace paddock::metrics {

namespace {

// 0.5 ms to 10 s: an append's acknowledgement (budget 25 ms p99), a warm claim (a few ms), a model
// call (seconds).
constexpr std::array<double, 15> kLatencyBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,   0.5,   1,      2.5,   5,    10,    30};

} // namespace

std::span<const double> latencyBuckets()
{
    return kLatencyBuckets;
}

Histogram::Histogram(std::span<const double> upperBounds)
    : m_bounds(upperBounds.begin(), upperBounds.end()),
      m_counts(std::make_unique<std::atomic<uint64_t>[]>(upperBounds.size() + 1))
{
    if (!std::is_sorted(m_bounds.begin(), m_bounds.end())
        || std::adjacent_find(m_bounds.begin(), m_bounds.end()) != m_bounds.end()
        || std::any_of(m_bounds.begin(), m_bounds.end(), [](double b) { return !std::isfinite(b); }))
        throw std::logic_error("histogram buckets must be finite and strictly ascending");
}

void Histogram::observe(double value) noexcept
{
    // Few buckets: a linear scan beats a binary search on branch prediction and stays in one line.
    size_t i = 0;
    while (i < m_bounds.size() && value > m_bounds[i])
        ++i;
    m_counts[i].fetch_add(1, std::memory_order_relaxed);
    m_sum.fetch_add(value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const
{
    HistogramSnapshot out;
    out.bounds = m_bounds;
    out.counts.reserve(m_bounds.size() + 1);
    for (size_t i = 0; i <= m_bounds.size(); ++i)
        out.counts.push_back(m_counts[i].load(std::memory_order_relaxed));
    out.sum = m_sum.load(std::memory_order_relaxed);
    return out;
}

uint64_t Histogram::count() const noexcept
{
    uint64_t total = 0;
    for (size_t i = 0; i <= m_bounds.size(); ++i)
        total += m_counts[i].load(std::memory_order_relaxed);
    return total;
}

template <typename T>
Family<T> &Registry::family(const std::string &name, const std::string &help, Type type,
                            std::vector<std::string> labels, std::function<std::unique_ptr<T>()> make)
{
    if (!validMetricName(name))
        throw std::logic_error("metric name '" + name + "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
    for (const auto &label : labels)
        if (!validLabelName(label) || label == "le")
            throw std::logic_error("metric '" + name + "': label name '" + label + "' is not allowed");
    std::lock_guard lock(m_mutex);
    auto it = m_families.find(name);
    if (it != m_families.end()) {
        auto *existing = dynamic_cast<Family<T> *>(it->second.get());
        if (!existing || existing->type() != type || m_labels[name] != labels)
            throw std::logic_error("metric '" + name + "' is registered twice with different types or labels");
        return *existing;
    }
    m_labels[name] = labels;
    auto created = std::make_unique<Family<T>>(name, help, type, std::move(labels), std::move(make));
    Family<T> &out = *created;
    m_families.emplace(name, std::move(created));
    return out;
}

Counter &Registry::counter(const std::string &name, const std::string &help)
{
    return counterFamily(name, help, {}).with({});
}

Gauge &Registry::gauge(const std::string &name, const std::string &help)
{
    return gaugeFamily(name, help, {}).with({});
}

Histogram &Registry::histogram(const std::string &name, const std::string &help, std::span<const double> bounds)
{
    return histogramFamily(name, help, {}, bounds).with({});
}

CounterFamily &Registry::counterFamily(const std::string &name, const std::string &help, std::vector<std::string> labels)
{
    return family<Counter>(name, help, Type::Counter, std::move(labels), [] { return std::make_unique<Counter>(); });
}

GaugeFamily &Registry::gaugeFamily(const std::string &name, const std::string &help, std::vector<std::string> labels)
{
    return family<Gauge>(name, help, Type::Gauge, std::move(labels), [] { return std::make_unique<Gauge>(); });
}

HistogramFamily &Registry::histogramFamily(const std::string &name, const std::string &help,
                                           std::vector<std::string> labels, std::span<const double> bounds)
{
    std::vector<double> copy(bounds.begin(), bounds.end());
    Histogram check(copy);   // a bad bucket list throws here, at registration, not at first use
    return family<Histogram>(name, help, Type::Histogram, std::move(labels),
                             [copy] { return std::make_unique<Histogram>(copy); });
}

int Registry::addCollector(Collector collector)
{
    std::lock_guard lock(m_mutex);
    const int id = m_nextCollector++;
    m_collectors.emplace(id, std::move(collector));
    return id;
}

void Registry::removeCollector(int id)
{
    std::lock_guard scrape(m_scrapeMutex);   // no scrape is running it once this is held
    std::lock_guard lock(m_mutex);
    m_collectors.erase(id);
}

std::string Registry::expose() const
{
    std::lock_guard scrape(m_scrapeMutex);
    std::vector<const FamilyBase *> families;
    std::vector<Collector> collectors;
    {
        std::lock_guard lock(m_mutex);
        for (const auto &[name, family] : m_families)
            families.push_back(family.get());   // never removed: safe to use after the lock
        for (const auto &[id, collector] : m_collectors)
            collectors.push_back(collector);
    }
    Exposition out;
    for (const auto *family : families)
        family->write(out);
    for (const auto &collector : collectors)
        collector(out);
    return out.take();
}

Registry &registry()
{
    static Registry *process = new Registry();   // never destroyed: instruments outlive static destructors
    return *process;
}

} // namespace paddock::metrics
