#pragma once
// What the pieces of StepEngine share: step_engine.cpp (leases, the worker loops, dispatch of one
// step) and step_engine_*.cpp (one file per kind of effect: sandbox, model, tools, changes, tiers,
// billing, broker-side tools). Not for use outside broker/engine.
//
// Threads: every function here is either pure or works on the pool client it is given; they are
// called by the step workers and the idle releaser, never while m_leasesMutex is held.

#include "broker/engine/step_engine.h"

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <vector>

namespace paddock::engine {

// Failover events (docs/events.md): the pool holding the session's sandbox was lost; the session
// then claims elsewhere and says so. sandbox.waiting: no pool can take the claim now.
inline constexpr const char *kSandboxLost = core::kind::SandboxLost;
inline constexpr const char *kSandboxMoved = core::kind::SandboxMoved;
inline constexpr const char *kSandboxWaiting = core::kind::SandboxWaiting;

// StepOutcome::note of a replayOnly RunTool the pool had no run for: the command never started.
inline constexpr const char *kNothingRan = "the command never started in this sandbox";

// An event to append, its payload dumped as JSON (invalid UTF-8 replaced). step_engine.cpp.
core::NewEvent event(const char *kind, const nlohmann::json &payload);

// Whether events appended during a step are only what people do to a live session from outside
// the engine: pause or resume it, override its tier (with its decision), fetch or decide a review.
// Anything else (a terminal state, another worker's step) means the step's result is stale.
// step_engine.cpp.
bool onlyPeopleActed(const std::vector<core::Event> &events);

// A tool call's string argument; empty when missing or not a string. step_engine.cpp.
std::string stringArg(const llm::ToolCall &call, const char *key);

// The fields every tool.result starts with: call_id and name. step_engine.cpp.
nlohmann::json toolResultBase(const llm::ToolCall &call);

// Wall clock, milliseconds (microseconds) since the epoch. step_engine.cpp.
int64_t nowUnixMs();
int64_t nowUnixUs();

// Keeps the head and the tail of a long output, which is where compilers and test runners put what
// matters, and says how much was left out. step_engine_tools.cpp.
std::string clipOutput(const std::string &data, bool *clipped);

// Every command the broker runs for a session carries the hosts approved for it; the pool's proxy
// allows them while that command runs (docs/egress.md, "Approved hosts"). step_engine_tools.cpp.
std::vector<pool_client::EgressGrant> egressGrants(const core::SessionState &state);

// The sandbox.claimed event of a claim on the named pool. step_engine_sandbox.cpp.
core::NewEvent sandboxClaimed(const std::string &pool, const pool_client::ClaimedSandbox &claimed, double pricePerHour);

// What the model is told of the session's tiers (llm::EnvironmentBrief): each tier the pools offer
// with its size and price, the one held, the agent's selection mode and its request_environment
// bound. nullopt without a decider, or when the agent cannot be read now (the prompt then says
// nothing of tiers; the next call tells). step_engine_model.cpp.
std::optional<llm::EnvironmentBrief> environmentBrief(const EnvironmentDecider *decider,
                                                      const core::SessionState &state);

// A thread waiting for a call's answer (a step that does not park: runOneStep, the idle releaser).
// Meanwhile it runs the work the call hands back to it (storeWork), so that a checkpoint's store
// writes run here and not on gRPC's callback threads. step_engine.cpp.
class WaitingThread {
public:
    WaitingThread();
    ~WaitingThread();
    WaitingThread(const WaitingThread &) = delete;
    WaitingThread &operator=(const WaitingThread &) = delete;

    // The innermost WaitingThread of the calling thread, or nullptr.
    static WaitingThread *current();
    // Any thread: work for the waiting thread.
    void post(std::function<void()> work);
    // Any thread: the call answered; wait() returns once the work posted before is done.
    void answered();
    // Runs the work posted until the call answered.
    void wait();

private:
    WaitingThread *const m_outer;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<std::function<void()>> m_work;
    bool m_answered = false;
};

template <typename T>
StepOutcome StepEngine::awaitCall(const StepRun &run, const std::function<void(std::function<void(T)>)> &start,
                                  std::function<StepOutcome(T)> then)
{
    if (!run.park) {
        std::optional<T> answer;
        {
            WaitingThread here;
            start([&](T value) {
                answer.emplace(std::move(value));
                here.answered();
            });
            here.wait();
        }
        return then(std::move(*answer));
    }
    {
        std::lock_guard lock(m_leasesMutex);
        if (m_cancelling)
            return {ActionKind::None, false, m_options.retryAfterUnavailableMs, "the broker is stopping"};
        ++m_callsInFlight;
    }
    start([this, lease = run.lease, then = std::move(then)](T value) {
        auto shared = std::make_shared<T>(std::move(value));
        resume(lease, [then, shared] { return then(std::move(*shared)); });
        std::lock_guard lock(m_leasesMutex);
        if (--m_callsInFlight == 0)
            m_idle.notify_all();
    });
    StepOutcome parked;
    parked.parked = true;
    return parked;
}

template <typename A, typename B, typename StartA, typename StartB>
std::function<void(std::function<void(std::pair<A, B>)>)> StepEngine::bothCalls(StartA startA, StartB startB)
{
    return [startA, startB](std::function<void(std::pair<A, B>)> done) {
        struct Pending {
            std::mutex mutex;
            std::optional<A> a;
            std::optional<B> b;
            std::function<void(std::pair<A, B>)> done;
        };
        auto pending = std::make_shared<Pending>();
        pending->done = std::move(done);
        // Whichever answers second hands the pair on.
        auto finish = [pending](std::unique_lock<std::mutex> &lock) {
            if (!pending->a || !pending->b)
                return;
            std::pair<A, B> both{std::move(*pending->a), std::move(*pending->b)};
            lock.unlock();
            pending->done(std::move(both));
        };
        startA([pending, finish](A a) {
            std::unique_lock lock(pending->mutex);
            pending->a.emplace(std::move(a));
            finish(lock);
        });
        startB([pending, finish](B b) {
            std::unique_lock lock(pending->mutex);
            pending->b.emplace(std::move(b));
            finish(lock);
        });
    };
}

} // namespace paddock::engine
