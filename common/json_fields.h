#pragma once
// Reading numbers from JSON another process wrote (a pool's manifest, a sandbox init's frames).
// nlohmann's get<uint32_t>() casts a float such as 1e47 to the integer type, which is undefined
// behaviour, and silently truncates 420.5; these refuse both. Header-only: the callers already
// link nlohmann_json, paddock_common does not need to.
//
// Threads: pure functions.

#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace paddock {

// j[key] as a whole number within T's range; `fallback` when the key is missing. Throws
// std::invalid_argument naming the key when it is missing without a fallback, not a whole number,
// or out of range.
template <typename T>
T integerField(const nlohmann::json &j, const char *key, std::optional<T> fallback = std::nullopt)
{
    const auto it = j.find(key);
    if (it == j.end()) {
        if (fallback)
            return *fallback;
        throw std::invalid_argument(std::string("'") + key + "' is missing");
    }
    bool fits = false;
    if (it->is_number_unsigned())
        fits = std::in_range<T>(it->template get<uint64_t>());
    else if (it->is_number_integer())
        fits = std::in_range<T>(it->template get<int64_t>());
    if (!fits)
        throw std::invalid_argument(std::string("'") + key + "' is not a whole number in range");
    return it->template get<T>();
}

} // namespace paddock
