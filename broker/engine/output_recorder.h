#pragma once
// A running command's output into its session's log as it is printed: tool.output events
// (docs/events.md), so `paddockctl events -f` and the console show a long command's output while it
// runs. The final tool.result is unchanged: it still holds the whole (clipped) output.
//
// Each stream's bytes pass through a streaming redactor (a secret's value split across two chunks
// from the pool is still replaced) and are coalesced: one append per command at most every
// flushMs, sooner once flushBytes are waiting. Past limitBytes of a stream nothing more of it is
// recorded live, and the event that reaches the limit says so ("cut"); the final event of a
// stream that was cut counts the bytes left out. An event never ends inside a UTF-8 character.
//
// Each tool.output carries the raw byte offset of its text in the stream and how many raw bytes it
// stands for, so a broker that repeats the command after a crash (the pool replays the run's
// output from its start) records only what comes after (Action::outputRecorded).
//
// Ordering: a command's output appends are compare-and-append after the log's end as this
// recorder knows it; people's events meanwhile (a pause, an override, a review decided) are
// stepped over as the engine's own result append does. Anything else (the session cancelled,
// another broker's output for the call) stops the recording: the step's result is stale anyway.
// close() hands the step the seq its log ends at once the last output is recorded, and the step
// appends its tool.result after it.
//
// The same recorder carries a model's streamed answer (model.delta, docs/events.md): its text and
// tool-call argument fragments, coalesced the same way, ordered and stepped over people's events
// the same way, closed the same way before the step appends its model.response. A model call's
// events say the seq the log was at when the call began (after_seq), the HTTP attempt they belong
// to, and the offset of their text in that attempt's answer; the first event of a retried stream
// names the attempt it supersedes. The text and each tool call's arguments pass through a
// streaming redactor as a command's output does (offsets count raw bytes); they are not cut at
// limitBytes (the model's max_tokens bounds them).
//
// Threads: one flusher thread per recorder does every append and every read; add() and close()
// may be called from any thread (gRPC's callback threads) and only take a mutex. close()'s `then`
// runs on the store's writer thread or the flusher thread and must only enqueue (StepEngine's
// resume does).

#include "broker/llm/model_adapter.h"
#include "broker/secrets/secret_store.h"
#include "broker/store/event_store.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace paddock::engine {

struct OutputRecorderOptions {
    int64_t flushMs = 100;               // at most this long between a byte printed and its append
    size_t flushBytes = 16 * 1024;       // or sooner, once this much is waiting
    size_t limitBytes = 64 * 1024;       // per stream and command: recorded live up to here
    // All commands together: live output goes to the store at most this fast (bytes of text per
    // second), so a fleet printing at full speed cannot take the appends of steps' results with
    // it; output past it waits (coalesced into bigger events), up to each command's limit. The
    // last output of a command that ended waits too, and its step with it: under a flood of
    // output the fleet slows down, not the store. 0: no cap.
    int64_t maxBytesPerSecond = 8 << 20;
};

class OutputRecorder {
public:
    class Command;   // one running command's output (output_recorder.cpp)

    struct Start {
        std::string sessionId;
        std::string callId;
        int64_t lastSeq = 0;                       // the log's end when the command starts
        std::array<int64_t, 2> alreadyRecorded{};  // raw bytes of stdout, stderr recorded before
        std::shared_ptr<const secrets::SecretsSnapshot> secrets;   // nullptr: none to redact
        uint64_t leaseToken = 0;   // the step's lease: output stops being recorded once it is lost
    };

    OutputRecorder(store::EventStore &store, OutputRecorderOptions options);
    ~OutputRecorder();   // ends recording (pending output is dropped, closes answered)
    OutputRecorder(const OutputRecorder &) = delete;
    OutputRecorder &operator=(const OutputRecorder &) = delete;

    std::shared_ptr<Command> open(Start start);
    // A model call's streamed answer (Start::callId and alreadyRecorded unused): addDelta, then close.
    std::shared_ptr<Command> openModelCall(Start start);
    // A chunk of the command's stdout (stream 1) or stderr (2), as pool_client::OutputSink numbers
    // them, in the order the pool sent it.
    void add(Command &command, int stream, std::string_view chunk);
    // The command ended: what is left is recorded, then then(lastSeq) runs with the seq the
    // session's log ends at after the command's output (Start::lastSeq if nothing was recorded).
    void close(const std::shared_ptr<Command> &command, std::function<void(int64_t lastSeq)> then);
    // A piece of a model call's answer, in the order the adapter sent them (its loop thread).
    void addDelta(Command &command, const llm::ModelDelta &delta);

private:
    void flusherLoop();
    void wakeFlusher();
    // Under m_mutex and the command's (`own`, released while the append is handed to the store):
    // the command's next append, when it has something due.
    void sendIfDue(const std::shared_ptr<Command> &command, std::chrono::steady_clock::time_point now,
                   std::unique_lock<std::mutex> &own);
    void rebase(const std::shared_ptr<Command> &command, std::unique_lock<std::mutex> &lock);

    store::EventStore &m_store;
    const OutputRecorderOptions m_options;

    std::mutex m_mutex;   // guards every Command's state and the list
    std::condition_variable m_wake;
    std::list<std::shared_ptr<Command>> m_commands;
    double m_budgetBytes = 0;   // maxBytesPerSecond's bucket: what may be sent now
    std::chrono::steady_clock::time_point m_budgetAt = std::chrono::steady_clock::now();
    bool m_stopping = false;
    std::atomic<bool> m_wakeUp = false;   // set (under m_mutex but by the store's callback) before a notification
    std::thread m_flusher;
};

} // namespace paddock::engine
