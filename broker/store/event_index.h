#pragma once
// Indexes derived from events (the decisions table, review items, ...): the store's writer calls
// each for every event it appends, inside the same transaction and savepoint as the event, so an
// index row exists exactly when its event does. Private to broker/store.
//
// Threads: created and called on the store's writer thread only, with the writer's connection.

#include "broker/core/event.h"
#include "broker/store/sqlite_handle.h"

#include <memory>
#include <string_view>
#include <vector>

namespace paddock::store {

class EventIndex {
public:
    virtual ~EventIndex() = default;
    virtual bool indexes(std::string_view kind) const = 0;
    // SQLITE_DONE on success, else the SQLite error code (the append then fails like an insert).
    virtual int write(const core::Event &event) = 0;
};

// Every index the store keeps, with its statements prepared on the writer's connection.
Result<std::vector<std::unique_ptr<EventIndex>>> makeEventIndexes(sqlite::Database &writer);

} // namespace paddock::store
