#pragma once
// The Prometheus text exposition format, version 0.0.4: what GET /metrics answers. A page is a
// list of families; each has one # HELP and one # TYPE line and then its samples, a histogram's as
// cumulative _bucket lines (le="..." ending with "+Inf"), _sum and _count.
//
// Threads: one Exposition is one page being written, by one thread.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paddock::metrics {

enum class Type { Counter, Gauge, Histogram };

// What a histogram held at one moment: per-bucket counts (not cumulative), the last one +Inf.
struct HistogramSnapshot {
    std::vector<double> bounds;     // upper bounds, ascending, without +Inf
    std::vector<uint64_t> counts;   // bounds.size() + 1
    double sum = 0;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

class Exposition {
public:
    // Starts a family: its # HELP and # TYPE lines. A name already written on this page is a
    // mistake: the page says so in a comment and the family's samples are left out (false).
    bool family(std::string_view name, std::string_view help, Type type);
    // A sample of the current counter or gauge family.
    void sample(const Labels &labels, double value);
    void sample(double value) { sample(Labels{}, value); }
    // A child of the current histogram family: its buckets, _sum and _count.
    void histogram(const Labels &labels, const HistogramSnapshot &histogram);

    const std::string &text() const { return m_out; }
    std::string take() { return std::move(m_out); }

    // The number as the format writes it: integers without a fraction, +Inf, -Inf, NaN.
    static std::string number(double value);

private:
    void line(std::string_view suffix, const Labels &labels, const std::pair<std::string, std::string> *extra,
              std::string_view value);

    std::string m_out;
    std::string m_name;      // of the current family
    bool m_skipping = false; // the current family is a duplicate
    std::set<std::string, std::less<>> m_written;
};

// True when name is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or label name (no ':').
bool validMetricName(std::string_view name);
bool validLabelName(std::string_view name);

} // namespace paddock::metrics
