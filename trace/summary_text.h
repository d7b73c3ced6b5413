#pragma once
// The pieces every summary is made of: fields read from a payload without throwing, and numbers
// spelled the way the console and paddockctl spell them. Internal to paddock_trace.
//
// Threads: pure functions; call from anywhere.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::trace::text {

// Longest piece of untrusted text inside a summary (a command line, a reason, a model's words), so
// the fields after it still show.
inline constexpr size_t kFieldChars = 120;

// A string field, made safe for one line and cut at maxChars; a number or bool as JSON text; ""
// when absent or null.
std::string str(const nlohmann::json &payload, std::string_view key, size_t maxChars = kFieldChars);
// The first of keys whose string is not empty.
std::string firstStr(const nlohmann::json &payload, std::initializer_list<std::string_view> keys,
                     size_t maxChars = kFieldChars);
bool has(const nlohmann::json &payload, std::string_view key);
// Bytes of a string field as recorded (0 when absent): a size to report, not text to show.
int64_t rawSize(const nlohmann::json &payload, std::string_view key);
int64_t num(const nlohmann::json &payload, std::string_view key, int64_t fallback = 0);
double real(const nlohmann::json &payload, std::string_view key, double fallback = 0.0);
bool flag(const nlohmann::json &payload, std::string_view key);
const nlohmann::json &object(const nlohmann::json &payload, std::string_view key);   // {} when not an object

std::string dollars(int64_t micros);      // "$0.0008": four decimals, as paddockctl and the console show cost
std::string bytes(int64_t count);         // "512 B", "48 KiB", "1.2 MiB", "3.4 GiB"
std::string millis(double ms);            // "0.4 ms", "35 ms", "1.2 s", "2 min 05 s", "1 h 02 min"
std::string seconds(double s);            // "0.8 s" from 0.1 s up, else as millis(s * 1000)
std::string count(int64_t n, std::string_view one, std::string_view many);   // "1 file", "3 files"
std::string percent(double fraction);     // 0.034 -> "3%"

// Parts joined with ", ", empty ones left out.
std::string join(const std::vector<std::string> &parts, std::string_view separator = ", ");
// "a: b" when b is not empty, else "a".
std::string withDetail(std::string head, const std::string &detail, std::string_view separator = ": ");
// The shortened id of a checkpoint's manifest: its first 12 hex digits.
std::string shortManifest(const std::string &manifest);

} // namespace paddock::trace::text
