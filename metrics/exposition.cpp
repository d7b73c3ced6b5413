#include "metrics/exposition.h"

#include <charconv>
#include <cmath>

namespace paddock::metrics {

namespace {

const char *typeName(Type type)
{
    switch (type) {
    case Type::Counter: return "counter";
    case Type::Gauge: return "gauge";
    case Type::Histogram: return "histogram";
    }
    return "untyped";
}

// HELP text: backslash and newline escaped.
void appendHelp(std::string &out, std::string_view text)
{
    for (char c : text) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
}

// A label value: backslash, double quote and newline escaped.
void appendLabelValue(std::string &out, std::string_view text)
{
    for (char c : text) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
}

void appendLabel(std::string &out, bool &first, const std::pair<std::string, std::string> &label)
{
    out += first ? "{" : ",";
    first = false;
    out += label.first;
    out += "=\"";
    appendLabelValue(out, label.second);
    out += '"';
}

} // namespace

bool validMetricName(std::string_view name)
{
    if (name.empty())
        return false;
    for (size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!letter && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

bool validLabelName(std::string_view name)
{
    return validMetricName(name) && name.find(':') == std::string_view::npos && !name.starts_with("__");
}

std::string Exposition::number(double value)
{
    if (std::isnan(value))
        return "NaN";
    if (std::isinf(value))
        return value > 0 ? "+Inf" : "-Inf";
    char buffer[64];
    // Shortest form that reads back as the same double: 0.005, 1e-05, 42.
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    if (ec != std::errc())
        return "NaN";
    return std::string(buffer, end);
}

bool Exposition::family(std::string_view name, std::string_view help, Type type)
{
    m_name = std::string(name);
    m_skipping = !m_written.emplace(m_name).second;
    if (m_skipping) {
        m_out += "# a second family named " + m_name + " was left out\n";
        return false;
    }
    m_out += "# HELP ";
    m_out += name;
    m_out += ' ';
    appendHelp(m_out, help);
    m_out += "\n# TYPE ";
    m_out += name;
    m_out += ' ';
    m_out += typeName(type);
    m_out += '\n';
    return true;
}

void Exposition::line(std::string_view suffix, const Labels &labels, const std::pair<std::string, std::string> *extra,
                      std::string_view value)
{
    m_out += m_name;
    m_out += suffix;
    bool first = true;
    for (const auto &label : labels)
        appendLabel(m_out, first, label);
    if (extra)
        appendLabel(m_out, first, *extra);
    if (!first)
        m_out += '}';
    m_out += ' ';
    m_out += value;
    m_out += '\n';
}

void Exposition::sample(const Labels &labels, double value)
{
    if (!m_skipping)
        line("", labels, nullptr, number(value));
}

void Exposition::histogram(const Labels &labels, const HistogramSnapshot &histogram)
{
    if (m_skipping)
        return;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < histogram.counts.size(); ++i) {
        cumulative += histogram.counts[i];
        const std::pair<std::string, std::string> le{"le", i < histogram.bounds.size() ? number(histogram.bounds[i]) : "+Inf"};
        line("_bucket", labels, &le, std::to_string(cumulative));
    }
    line("_sum", labels, nullptr, number(histogram.sum));
    line("_count", labels, nullptr, std::to_string(cumulative));
}

} // namespace paddock::metrics
