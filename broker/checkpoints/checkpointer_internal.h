#pragma once
// What checkpointer.cpp (take) and checkpointer_restore.cpp (restore) share. Not for use outside
// broker/checkpoints.

#include "broker/checkpoints/checkpointer.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

namespace paddock::checkpoints::detail {

inline constexpr int64_t kBatchBytes = 3 << 20;   // chunk content per ReadCheckpointChunks / PutRestoreChunks

double msSince(int64_t startUs);

inline std::unexpected<Failure> atPool(Error error)
{
    return std::unexpected(Failure{FailedAt::Pool, std::move(error)});
}

inline std::unexpected<Failure> atPool(ErrorCode code, std::string message)
{
    return atPool(Error{code, std::move(message)});
}

inline std::unexpected<Failure> atStore(Error error)
{
    return std::unexpected(Failure{FailedAt::Store, std::move(error)});
}

// What a take or a restore (TakeOp, RestoreOp) is made of: stages, each pool call's answer handed
// to the next stage on the executor, and one outcome for `done`.
template <typename Op, typename R>
struct Stages : std::enable_shared_from_this<Op> {
    Stages(Executor executor, OutcomeDone<R> then) : run(std::move(executor)), done(std::move(then)) {}

    const Executor run;
    OutcomeDone<R> done;

    // A pool call's completion that continues with `stage` on the executor.
    template <typename T>
    pool_client::Done<T> onStoreThread(void (Op::*stage)(Result<T>))
    {
        return [self = this->shared_from_this(), stage](Result<T> answer) {
            auto shared = std::make_shared<Result<T>>(std::move(answer));
            self->runStage([self, stage, shared] { ((*self).*stage)(std::move(*shared)); });
        };
    }

    // Runs a stage on the executor. A stage that throws (what a pool sent broke a parser, say)
    // still ends the take or restore with an answer: without one, its caller would wait forever
    // (a parked step, or stop() counting the calls in flight).
    void runStage(std::function<void()> stage)
    {
        run([self = this->shared_from_this(), stage = std::move(stage)] {
            try {
                stage();
            } catch (const std::exception &e) {
                self->fail({FailedAt::Pool, {ErrorCode::Internal, std::string("a checkpoint step failed: ") + e.what()}});
            }
        });
    }

    void fail(Failure failure) { done(std::unexpected(std::move(failure))); }
};

// take() and restore(): starts the asynchronous call with an executor that hands the store's work
// to this thread, runs that work here as it comes, and returns the outcome.
template <typename T, typename Start>
Outcome<T> runHere(Start start)
{
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::function<void()>> work;
    std::optional<Outcome<T>> outcome;
    start(
        [&](std::function<void()> piece) {
            std::lock_guard lock(mutex);
            work.push_back(std::move(piece));
            wake.notify_one();
        },
        [&](Outcome<T> result) {
            std::lock_guard lock(mutex);
            outcome.emplace(std::move(result));
            wake.notify_one();
        });
    for (;;) {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return outcome || !work.empty(); });
        if (work.empty())
            return std::move(*outcome);
        auto piece = std::move(work.front());
        work.pop_front();
        lock.unlock();
        piece();
    }
}

} // namespace paddock::checkpoints::detail
