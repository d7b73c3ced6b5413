#pragma once
// Reading the cells of EventStore::query's rows, the same on both backends: a cell of another type
// (or NULL) reads as 0 or "". Thread-agnostic.

#include "broker/store/event_store.h"

#include <cstdint>
#include <string>

namespace paddock::store {

inline int64_t intAt(const SqlRow &row, size_t column)
{
    if (column >= row.size())
        return 0;
    if (const auto *value = std::get_if<int64_t>(&row[column]))
        return *value;
    if (const auto *real = std::get_if<double>(&row[column]))
        return static_cast<int64_t>(*real);
    return 0;
}

inline double realAt(const SqlRow &row, size_t column)
{
    if (column >= row.size())
        return 0;
    if (const auto *real = std::get_if<double>(&row[column]))
        return *real;
    if (const auto *value = std::get_if<int64_t>(&row[column]))
        return static_cast<double>(*value);
    return 0;
}

inline std::string textAt(const SqlRow &row, size_t column)
{
    const auto *value = column < row.size() ? std::get_if<std::string>(&row[column]) : nullptr;
    return value ? *value : std::string();
}

} // namespace paddock::store
