#include "trace/summary_text.h"

#include "trace/safe_text.h"

#include <cmath>
#include <cstdio>

namespace paddock::trace::text {
namespace {

std::string printf1(const char *format, double value)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, value);
    return buffer;
}

} // namespace

std::string str(const nlohmann::json &payload, std::string_view key, size_t maxChars)
{
    if (!payload.is_object())
        return {};
    const auto it = payload.find(key);
    if (it == payload.end() || it->is_null())
        return {};
    if (it->is_string())
        return safeLine(it->get_ref<const std::string &>(), maxChars);
    // Replace, never throw, on bytes that are not UTF-8 (the payload's own bytes decide that).
    return safeLine(it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), maxChars);
}

std::string firstStr(const nlohmann::json &payload, std::initializer_list<std::string_view> keys, size_t maxChars)
{
    for (const auto key : keys) {
        if (std::string value = str(payload, key, maxChars); !value.empty())
            return value;
    }
    return {};
}

bool has(const nlohmann::json &payload, std::string_view key)
{
    if (!payload.is_object())
        return false;
    const auto it = payload.find(key);
    return it != payload.end() && !it->is_null();
}

int64_t rawSize(const nlohmann::json &payload, std::string_view key)
{
    if (!payload.is_object())
        return 0;
    const auto it = payload.find(key);
    return it != payload.end() && it->is_string() ? static_cast<int64_t>(it->get_ref<const std::string &>().size()) : 0;
}

int64_t num(const nlohmann::json &payload, std::string_view key, int64_t fallback)
{
    if (!payload.is_object())
        return fallback;
    const auto it = payload.find(key);
    if (it == payload.end() || !it->is_number())
        return fallback;
    return it->is_number_float() ? static_cast<int64_t>(std::llround(it->get<double>())) : it->get<int64_t>();
}

double real(const nlohmann::json &payload, std::string_view key, double fallback)
{
    if (!payload.is_object())
        return fallback;
    const auto it = payload.find(key);
    return it != payload.end() && it->is_number() ? it->get<double>() : fallback;
}

bool flag(const nlohmann::json &payload, std::string_view key)
{
    if (!payload.is_object())
        return false;
    const auto it = payload.find(key);
    return it != payload.end() && it->is_boolean() && it->get<bool>();
}

const nlohmann::json &object(const nlohmann::json &payload, std::string_view key)
{
    static const nlohmann::json empty = nlohmann::json::object();
    if (!payload.is_object())
        return empty;
    const auto it = payload.find(key);
    return it != payload.end() && it->is_object() ? *it : empty;
}

std::string dollars(int64_t micros)
{
    const double value = static_cast<double>(micros) / 1e6;
    return (micros < 0 ? "-$" : "$") + printf1("%.4f", std::fabs(value));
}

std::string bytes(int64_t n)
{
    if (n < 1024)
        return std::to_string(n) + " B";
    const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(n);
    size_t unit = 0;
    for (value /= 1024; value >= 1024 && unit + 1 < std::size(units); value /= 1024)
        ++unit;
    return (value < 10 ? printf1("%.1f", value) : printf1("%.0f", value)) + " " + units[unit];
}

std::string millis(double ms)
{
    if (ms < 0)
        return {};
    if (ms < 10 && std::fmod(ms, 1.0) != 0.0)
        return printf1("%.1f", ms) + " ms";
    if (ms < 1000)
        return printf1("%.0f", ms) + " ms";
    const double s = ms / 1000;
    if (s < 60)
        return printf1(s < 10 ? "%.1f" : "%.0f", s) + " s";
    const auto whole = static_cast<int64_t>(s);
    char buffer[64];
    if (whole < 3600)
        std::snprintf(buffer, sizeof buffer, "%lld min %02lld s", static_cast<long long>(whole / 60),
                      static_cast<long long>(whole % 60));
    else
        std::snprintf(buffer, sizeof buffer, "%lld h %02lld min", static_cast<long long>(whole / 3600),
                      static_cast<long long>(whole % 3600 / 60));
    return buffer;
}

std::string seconds(double s)
{
    // A bill reads in seconds ("0.8 s"); only a sliver of one in milliseconds.
    if (s >= 0.1 && s < 10)
        return printf1("%.1f", s) + " s";
    return millis(s * 1000);
}

std::string count(int64_t n, std::string_view one, std::string_view many)
{
    return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string percent(double fraction) { return printf1("%.0f", fraction * 100) + "%"; }

std::string join(const std::vector<std::string> &parts, std::string_view separator)
{
    std::string out;
    for (const auto &part : parts) {
        if (part.empty())
            continue;
        if (!out.empty())
            out += separator;
        out += part;
    }
    return out;
}

std::string withDetail(std::string head, const std::string &detail, std::string_view separator)
{
    if (detail.empty())
        return head;
    if (head.empty())
        return detail;
    head += separator;
    head += detail;
    return head;
}

std::string shortManifest(const std::string &manifest) { return manifest.substr(0, 12); }

} // namespace paddock::trace::text
