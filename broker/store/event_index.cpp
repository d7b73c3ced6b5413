#include "broker/store/event_index.h"

#include "broker/store/decision_index.h"

namespace paddock::store {

Result<std::vector<std::unique_ptr<EventIndex>>> makeEventIndexes(sqlite::Database &writer)
{
    std::vector<std::unique_ptr<EventIndex>> out;
    auto decisions = makeDecisionIndex(writer);
    if (!decisions)
        return std::unexpected(decisions.error());
    out.push_back(std::move(*decisions));
    return out;
}

} // namespace paddock::store
