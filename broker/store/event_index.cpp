#include "broker/store/event_index.h"

namespace paddock::store {

std::vector<std::unique_ptr<EventIndex>> makeEventIndexes()
{
    std::vector<std::unique_ptr<EventIndex>> out;
    out.push_back(makeCostIndex());
    out.push_back(makeReviewIndex());
    out.push_back(makeDecisionIndex());
    return out;
}

} // namespace paddock::store
