#pragma once
// The step engine's memory of the sessions it steps: each live session's log folded so far
// (SessionFold), so that a step reads only the events appended since the last one and costs the
// same at 100 events and at 100,000. The log stays the truth: a fold is brought up to the log's
// tail before every use, and one that cannot be (a gap, a read error) is folded again from the
// start.
//
// Known limits: at most `capacity` sessions are kept; the one used least recently goes first and
// is folded again from its log when it comes back.
//
// Threads: any. One mutex guards the table; take() reads the store outside it. A fold taken is the
// caller's alone until it is put back: a second take of the same session meanwhile folds its log
// from the start (correct, only slower), and the longer of the two folds put back stays.

#include "broker/engine/decide.h"
#include "broker/store/event_store.h"

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace paddock::engine {

class FoldCache {
public:
    explicit FoldCache(size_t capacity = 20000) : m_capacity(capacity) {}

    // The session's fold up to the tail of its log, the caller's until put(). NotFound for an
    // unknown session; the store's error when it cannot be read.
    Result<std::unique_ptr<SessionFold>> take(store::EventStore &store, const std::string &sessionId);
    // Keeps the fold for the session's next step.
    void put(const std::string &sessionId, std::unique_ptr<SessionFold> fold);
    // Drops the session (it has ended and holds nothing).
    void forget(const std::string &sessionId);

    size_t size() const;
    // Loads that folded a whole log (not cached, or a gap), and those that folded only a tail.
    int64_t fullFolds() const;
    int64_t tailFolds() const;

private:
    struct Entry {
        std::unique_ptr<SessionFold> fold;
        std::list<std::string>::iterator recent;   // in m_recent
    };

    const size_t m_capacity;
    mutable std::mutex m_mutex;
    std::unordered_map<std::string, Entry> m_entries;
    std::list<std::string> m_recent;   // most recently used first
    int64_t m_fullFolds = 0;
    int64_t m_tailFolds = 0;
};

} // namespace paddock::engine
