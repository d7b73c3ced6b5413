#pragma once
// Indexes derived from events (the decisions table, review items, cost entries): the store's writer
// asks each for the statements that index every event it appends, and runs them inside the same
// transaction and savepoint as the event, so an index row exists exactly when its event does. The
// statements are portable SQL (SqlStatement): both backends, SQLite and PostgreSQL, run the same
// ones. Private to broker/store.
//
// Threads: created and called on a store's writer thread only; an index keeps no state.

#include "broker/core/event.h"
#include "broker/store/event_store.h"

#include <memory>
#include <string_view>
#include <vector>

namespace paddock::store {

class EventIndex {
public:
    virtual ~EventIndex() = default;
    virtual bool indexes(std::string_view kind) const = 0;
    // Appends to out the statements that index event (none for a payload it cannot read: the fold
    // skips those too).
    virtual void statements(const core::Event &event, std::vector<SqlStatement> &out) const = 0;
};

// Every index the store keeps.
std::vector<std::unique_ptr<EventIndex>> makeEventIndexes();

std::unique_ptr<EventIndex> makeCostIndex();
std::unique_ptr<EventIndex> makeReviewIndex();
std::unique_ptr<EventIndex> makeDecisionIndex();

// Built one value at a time: GCC 12 warns (maybe-uninitialized) about variants in an initializer list.
template <typename... Values>
SqlStatement sqlStatement(std::string sql, Values &&...values)
{
    SqlStatement out{std::move(sql), {}};
    out.params.reserve(sizeof...(Values));
    (out.params.emplace_back(std::forward<Values>(values)), ...);
    return out;
}

} // namespace paddock::store
