// GroupProgress and the helpers around it (group_progress.h), shared by both backends' group commits.

#include "broker/store/group_progress.h"

#include <algorithm>
#include <iterator>

namespace paddock::store {

const core::SessionState *GroupProgress::known(const std::string &sessionId, const LiveSessions &live) const
{
    if (auto it = touched.find(sessionId); it != touched.end())
        return &it->second.state;
    if (auto it = live.find(sessionId); it != live.end())
        return &it->second;
    return nullptr;
}

void GroupProgress::recordAppend(const std::string &sessionId, const core::SessionState *before,
                                 core::SessionState next, std::vector<core::Event> stored, RequestOutcome &outcome)
{
    // Decided before the slot changes: before may be that slot's own state.
    const bool indexedChanged = !before || before->status != next.status || before->needsWork() != next.needsWork();
    auto [slot, inserted] = touched.try_emplace(sessionId);
    if (inserted) {
        touchOrder.push_back(sessionId);
        slot->second.created = !before;
    }
    slot->second.indexedChanged = slot->second.indexedChanged || indexedChanged;
    slot->second.state = next;
    slot->second.events.insert(slot->second.events.end(), stored.begin(), stored.end());
    outcome = AppendResult{std::move(stored), std::move(next)};
}

std::optional<Error> GroupProgress::firstRefusal() const
{
    for (const auto &outcome : outcomes) {
        if (outcome && !outcome->has_value())
            return outcome->error();
    }
    return std::nullopt;
}

std::vector<core::Event> numberEvents(AppendRequest &request, int64_t nowMs, core::SessionState &next,
                                      const std::vector<std::unique_ptr<EventIndex>> &indexes,
                                      std::vector<SqlStatement> &indexRows, bool keepRequest)
{
    // Time never runs backwards within a session, whatever the wall clock does.
    const int64_t timeMs = std::max(nowMs, next.updatedUnixMs);
    std::vector<core::Event> stored;
    stored.reserve(request.events.size());
    for (auto &newEvent : request.events) {
        core::Event event{request.sessionId, next.lastSeq + 1, timeMs,
                          keepRequest ? newEvent.kind : std::move(newEvent.kind),
                          keepRequest ? newEvent.payload : std::move(newEvent.payload), newEvent.costMicros};
        for (const auto &index : indexes) {
            if (index->indexes(event.kind))
                index->statements(event, indexRows);
        }
        core::applyEvent(next, event);
        stored.push_back(std::move(event));
    }
    return stored;
}

std::vector<std::pair<std::string, bool>> settleCommitted(GroupProgress &progress, LiveSessions &live,
                                                          CommitNotice *notice)
{
    std::vector<std::pair<std::string, bool>> work;
    work.reserve(progress.touchOrder.size());
    for (const auto &sessionId : progress.touchOrder) {
        auto &entry = progress.touched.at(sessionId);
        const bool needsWork = entry.state.needsWork();
        work.emplace_back(sessionId, needsWork);
        if (notice) {
            notice->sessions.push_back(entry.state);
            std::move(entry.events.begin(), entry.events.end(), std::back_inserter(notice->events));
        }
        if (core::isTerminal(entry.state.status) && !needsWork)
            live.erase(sessionId);
        else
            live.insert_or_assign(sessionId, std::move(entry.state));
    }
    return work;
}

} // namespace paddock::store
