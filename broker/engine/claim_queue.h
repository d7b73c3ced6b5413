#pragma once
// The line for sandboxes when the pools are full. A session that finds no room joins its tier's
// line; while anyone is in the line, newcomers join it too instead of jumping ahead, and only the
// sessions at the front (as many as the pools have room for, at least one) may claim. The front is
// a fair share between agents: sandboxes go to the agents with sessions waiting in turn, the agent
// served longest ago first, and within an agent in the order its sessions joined. So one agent's
// thousand waiting sessions cannot starve another agent's one: it is at most one grant away.
//
// Known limits: the line lives in this broker's memory (a restart forms it again within a retry
// interval, in arrival order). A session that stops asking (cancelled, paused while waiting)
// leaves the line after `staleMs` without asking again.
//
// Threads: any; one mutex.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::engine {

class ClaimQueue {
public:
    explicit ClaimQueue(int64_t staleMs = 10000) : m_staleMs(staleMs) {}

    struct Place {
        bool mayClaim = false;   // at the front: claim now
        int ahead = 0;           // sessions before this one in the fair order
        int waiting = 0;         // sessions in the tier's line, this one included
    };

    // The session asks for a sandbox of `tier` while the pools have `freeSlots` free (their
    // latest counts): it joins the line if it is not in it, and learns its place.
    Place ask(const std::string &tier, const std::string &sessionId, const std::string &agent, int freeSlots,
              int64_t nowMs);
    // Sessions waiting for `tier` (those that asked within staleMs).
    int waiting(const std::string &tier, int64_t nowMs);
    // The session got a sandbox of `tier`: it leaves the line, and its agent's turn is taken.
    void claimed(const std::string &tier, const std::string &sessionId, const std::string &agent, int64_t nowMs);
    // The session no longer waits for anything (it ended).
    void leave(const std::string &sessionId);

private:
    struct Waiter {
        std::string sessionId;
        std::string agent;
        uint64_t arrival = 0;
        int64_t lastAskMs = 0;
    };
    struct Line {
        std::vector<Waiter> waiters;                   // in arrival order
        std::map<std::string, uint64_t> servedTurn;    // agent -> the grant counter at its last sandbox
        uint64_t grants = 0;
    };

    void dropStaleLocked(Line &line, int64_t nowMs);
    // The line's sessions in the fair order: agents in turn, each agent's in arrival order.
    std::vector<const Waiter *> fairOrderLocked(const Line &line) const;

    const int64_t m_staleMs;
    std::mutex m_mutex;
    std::map<std::string, Line> m_lines;   // by tier
    uint64_t m_nextArrival = 1;
};

} // namespace paddock::engine
