#include "broker/store/event_index.h"

#include "broker/store/cost_index.h"
#include "broker/store/review_index.h"

namespace paddock::store {

Result<std::vector<std::unique_ptr<EventIndex>>> makeEventIndexes(sqlite::Database &writer)
{
    std::vector<std::unique_ptr<EventIndex>> out;
    auto costs = makeCostIndex(writer);
    if (!costs)
        return std::unexpected(costs.error());
    out.push_back(std::move(*costs));
    auto reviews = makeReviewIndex(writer);
    if (!reviews)
        return std::unexpected(reviews.error());
    out.push_back(std::move(*reviews));
    return out;
}

} // namespace paddock::store
