#include "broker/engine/output_recorder.h"

#include "broker/engine/step_engine_internal.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace paddock::engine {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const secrets::Redactor &noSecrets()
{
    static const secrets::Redactor none;
    return none;
}

// How many bytes at the end of `text` are the start of a UTF-8 character still missing its rest
// (0 to 3): they wait for the next chunk, so that no event ends inside a character.
size_t incompleteUtf8Tail(std::string_view text)
{
    const size_t lookBack = std::min<size_t>(text.size(), 3);
    for (size_t back = 1; back <= lookBack; ++back) {
        const auto byte = static_cast<unsigned char>(text[text.size() - back]);
        if ((byte & 0xC0) == 0x80)
            continue;   // a continuation byte: look further back for the lead
        size_t length = 1;
        if ((byte & 0xE0) == 0xC0)
            length = 2;
        else if ((byte & 0xF0) == 0xE0)
            length = 3;
        else if ((byte & 0xF8) == 0xF0)
            length = 4;
        return length > back ? back : 0;
    }
    return 0;
}

} // namespace

// One stream of one command: raw offsets count the bytes the pool sent, before redaction.
struct OutputStream {
    explicit OutputStream(const secrets::Redactor &redactor) : redact(redactor) {}

    secrets::Redactor::Stream redact;
    int64_t seen = 0;         // raw bytes the pool has sent
    int64_t fed = 0;          // raw offset fed to the redactor up to (after the skipped, before the limit)
    std::string ready;        // redacted text not yet in an event
    int64_t readyFrom = 0;    // the raw offset the next event starts at
    int64_t dropped = 0;      // raw bytes past the limit, not recorded live
    bool atLimit = false;     // fed reached the limit: the redactor is finished
    bool cutSaid = false;     // the event that reaches the limit is built
    bool finished = false;    // the command ended (or the limit was reached): nothing more to hold back
};

// One piece of a model call's answer (its text, or one tool call's arguments) in one attempt:
// fed through a streaming redactor, so a secret's value split across two deltas is still replaced.
// Offsets count raw bytes of the attempt's piece, before redaction (as tool.output's do).
struct AnswerPiece {
    explicit AnswerPiece(const secrets::Redactor &redactor) : redact(redactor) {}

    secrets::Redactor::Stream redact;
    int64_t seen = 0;        // raw bytes fed
    std::string ready;       // redacted, not yet in an event
    int64_t readyFrom = 0;   // the raw offset of ready's first byte

    // Returns whether something came out for the log.
    bool add(std::string_view raw)
    {
        const int64_t outFrom = seen - static_cast<int64_t>(redact.pendingBytes());
        seen += static_cast<int64_t>(raw.size());
        return take(outFrom, redact.feed(raw));
    }
    bool finish()
    {
        const int64_t outFrom = seen - static_cast<int64_t>(redact.pendingBytes());
        return take(outFrom, redact.finish());
    }

private:
    bool take(int64_t outFrom, std::string out)
    {
        if (out.empty())
            return false;
        if (ready.empty())
            readyFrom = outFrom;
        ready += out;
        return true;
    }
};

// A model call's answer in one attempt, as it streams (openModelCall). A retried stream starts a
// new one from nothing.
struct ModelDeltas {
    struct ToolCall {
        explicit ToolCall(const secrets::Redactor &redactor) : arguments(redactor) {}
        AnswerPiece arguments;
        std::string id;          // not yet in an event
        std::string name;        // not yet in an event
        bool due = true;         // something of it for the next event (the call's first fragment is)
    };

    ModelDeltas(const secrets::Redactor &r, int attemptNumber, int recorded)
        : redactor(r), attempt(attemptNumber), recordedAttempt(recorded), text(r)
    {
    }

    const secrets::Redactor &redactor;
    const int attempt;         // the attempt whose deltas these are
    int recordedAttempt;       // the attempt of the last event built (0: none)
    AnswerPiece text;
    std::map<int, ToolCall> tools;   // this attempt's tool calls, by index

    size_t waiting() const
    {
        size_t bytes = text.ready.size();
        for (const auto &[index, tool] : tools)
            bytes += tool.arguments.ready.size();
        return bytes;
    }
    bool any() const
    {
        return !text.ready.empty() || std::ranges::any_of(tools, [](const auto &entry) { return entry.second.due; });
    }
    // The answer is complete: what the redactors held back (a possible start of a value) goes too.
    void finish()
    {
        text.finish();
        for (auto &[index, tool] : tools)
            tool.due = tool.arguments.finish() || tool.due;
    }
};

class OutputRecorder::Command {
public:
    Command(Start s)
        : start(std::move(s)),
          streams{OutputStream(start.secrets ? start.secrets->redactor : noSecrets()),
                  OutputStream(start.secrets ? start.secrets->redactor : noSecrets())},
          lastSeq(start.lastSeq)
    {
        for (int i = 0; i < 2; ++i) {
            streams[i].fed = start.alreadyRecorded[i];
            streams[i].readyFrom = start.alreadyRecorded[i];
        }
    }

    const Start start;
    std::mutex mutex;   // guards everything below (taken after OutputRecorder::m_mutex)
    std::array<OutputStream, 2> streams;
    int64_t lastSeq;
    std::optional<Clock::time_point> waitingSince;   // the oldest byte not yet sent
    std::vector<core::NewEvent> unsent;             // built, refused as stale: sent again after a rebase
    bool inFlight = false;
    bool needsRebase = false;
    bool closed = false;
    bool stopped = false;   // nothing more is recorded (the log moved past this command, or a store error)
    std::function<void(int64_t)> then;
    std::unique_ptr<ModelDeltas> model;   // set: a model call's answer, not a command's output
};

namespace {

// What one stream has for the log now: text (less a half character held back), and a cut or
// dropped bytes not yet said.
struct Due {
    size_t held = 0;
    size_t textBytes = 0;
    bool sayCut = false;
    bool sayDropped = false;
    bool any() const { return textBytes > 0 || sayCut || sayDropped; }
};

Due dueOf(const OutputRecorder::Command &command, const OutputStream &s)
{
    Due due;
    due.held = s.finished ? 0 : incompleteUtf8Tail(s.ready);
    due.textBytes = s.ready.size() - due.held;
    due.sayCut = s.atLimit && !s.cutSaid;
    due.sayDropped = s.finished && command.closed && s.dropped > 0;
    return due;
}

// The next tool.output of one stream, or nullopt when it has nothing to say yet.
std::optional<core::NewEvent> nextEvent(const OutputRecorder::Command &command, OutputStream &s, int index,
                                        size_t limitBytes)
{
    const Due due = dueOf(command, s);
    if (!due.any())
        return std::nullopt;
    const auto [held, textBytes, sayCut, sayDropped] = due;
    const int64_t rawEnd = (s.finished ? s.fed : s.fed - static_cast<int64_t>(s.redact.pendingBytes()))
        - static_cast<int64_t>(held);
    json payload{{"call_id", command.start.callId},
                 {"stream", index == 0 ? "stdout" : "stderr"},
                 {"offset", s.readyFrom},
                 {"bytes", rawEnd - s.readyFrom},
                 {"text", s.ready.substr(0, textBytes)}};
    if (sayCut) {
        payload["cut"] = true;
        payload["limit_bytes"] = limitBytes;
        s.cutSaid = true;
    }
    if (sayDropped) {
        payload["dropped_bytes"] = s.dropped;
        s.dropped = 0;
    }
    s.ready.erase(0, textBytes);
    s.readyFrom = rawEnd;
    return event(core::kind::ToolOutput, payload);
}

// The next model.delta of a model call, or nullopt when nothing waits.
std::optional<core::NewEvent> nextDelta(const OutputRecorder::Command &command, ModelDeltas &m)
{
    if (!m.any())
        return std::nullopt;
    json payload{{"after_seq", command.start.lastSeq}, {"attempt", m.attempt}};
    if (m.recordedAttempt != 0 && m.recordedAttempt != m.attempt)
        payload["supersedes"] = m.recordedAttempt;   // a reader drops what that attempt sent
    if (!m.text.ready.empty()) {
        payload["text_offset"] = m.text.readyFrom;
        payload["text"] = std::move(m.text.ready);
        m.text.ready.clear();
    }
    json tools = json::array();
    for (auto &[index, tool] : m.tools) {
        if (!tool.due)
            continue;
        AnswerPiece &arguments = tool.arguments;
        const int64_t offset = arguments.ready.empty()
            ? arguments.seen - static_cast<int64_t>(arguments.redact.pendingBytes()) : arguments.readyFrom;
        json one{{"index", index}, {"offset", offset}, {"arguments", std::move(arguments.ready)}};
        arguments.ready.clear();
        if (!tool.id.empty())
            one["id"] = std::exchange(tool.id, {});
        if (!tool.name.empty())
            one["name"] = std::exchange(tool.name, {});
        tool.due = false;
        tools.push_back(std::move(one));
    }
    if (!tools.empty())
        payload["tool_calls"] = std::move(tools);
    m.recordedAttempt = m.attempt;
    return event(core::kind::ModelDelta, payload);
}

// Whether a stream of the command still has something for the log.
bool hasUnsent(const OutputRecorder::Command &c)
{
    if (c.model && c.model->any())
        return true;
    return std::ranges::any_of(c.streams, [&](const OutputStream &s) { return dueOf(c, s).any(); });
}

} // namespace

OutputRecorder::OutputRecorder(store::EventStore &store, OutputRecorderOptions options)
    : m_store(store), m_options(options), m_flusher([this] { flusherLoop(); })
{
}

OutputRecorder::~OutputRecorder()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    m_flusher.join();
}

std::shared_ptr<OutputRecorder::Command> OutputRecorder::open(Start start)
{
    auto command = std::make_shared<Command>(std::move(start));
    std::lock_guard lock(m_mutex);
    m_commands.push_back(command);
    return command;
}

void OutputRecorder::add(Command &command, int stream, std::string_view chunk)
{
    bool wake = false;
    {
        std::lock_guard lock(command.mutex);
        if (command.stopped || command.closed || stream < 1 || stream > 2)
            return;
        OutputStream &s = command.streams[stream - 1];
        const int64_t from = s.seen;
        s.seen += static_cast<int64_t>(chunk.size());
        if (s.seen <= s.fed)
            return;   // an earlier attempt recorded these bytes (the pool replays a run from its start)
        chunk.remove_prefix(static_cast<size_t>(std::max<int64_t>(0, s.fed - from)));
        if (s.atLimit) {
            s.dropped += static_cast<int64_t>(chunk.size());
            return;
        }
        const auto limit = static_cast<int64_t>(m_options.limitBytes);
        const std::string_view part = chunk.substr(0, static_cast<size_t>(std::max<int64_t>(0, limit - s.fed)));
        s.ready += s.redact.feed(part);
        s.fed += static_cast<int64_t>(part.size());
        if (s.fed >= limit) {
            s.atLimit = true;
            s.finished = true;
            s.ready += s.redact.finish();
            s.dropped += static_cast<int64_t>(chunk.size() - part.size());
        }
        // The flusher learns of the first byte waiting (it sets its next wake-up from it) and of
        // a full buffer; the bytes in between need no notification.
        wake = !command.waitingSince
            || command.streams[0].ready.size() + command.streams[1].ready.size() >= m_options.flushBytes;
        if (!command.waitingSince)
            command.waitingSince = Clock::now();
    }
    if (wake)
        wakeFlusher();
}

std::shared_ptr<OutputRecorder::Command> OutputRecorder::openModelCall(Start start)
{
    auto command = std::make_shared<Command>(std::move(start));
    const secrets::Redactor &redactor = command->start.secrets ? command->start.secrets->redactor : noSecrets();
    command->model = std::make_unique<ModelDeltas>(redactor, 0, 0);
    std::lock_guard lock(m_mutex);
    m_commands.push_back(command);
    return command;
}

void OutputRecorder::addDelta(Command &command, const llm::ModelDelta &delta)
{
    bool wake = false;
    {
        std::lock_guard lock(command.mutex);
        if (command.stopped || command.closed || !command.model)
            return;
        if (delta.attempt != command.model->attempt)   // a retried stream starts from nothing
            command.model = std::make_unique<ModelDeltas>(command.model->redactor, delta.attempt,
                                                          command.model->recordedAttempt);
        ModelDeltas &m = *command.model;
        if (!delta.text.empty())
            m.text.add(delta.text);
        if (delta.toolIndex >= 0) {
            ModelDeltas::ToolCall &tool = m.tools.try_emplace(delta.toolIndex, m.redactor).first->second;
            if (!delta.toolId.empty())
                tool.id = delta.toolId;
            if (!delta.toolName.empty())
                tool.name = delta.toolName;
            const bool out = tool.arguments.add(delta.arguments);
            tool.due = tool.due || out || !delta.toolId.empty() || !delta.toolName.empty();
        }
        wake = !command.waitingSince || m.waiting() >= m_options.flushBytes;
        if (!command.waitingSince)
            command.waitingSince = Clock::now();
    }
    if (wake)
        wakeFlusher();
}

void OutputRecorder::wakeFlusher()
{
    // Under the flusher's mutex, so that the flusher is either waiting (and woken) or has not
    // yet looked at the flag (and will see it).
    {
        std::lock_guard lock(m_mutex);
        m_wakeUp = true;
    }
    m_wake.notify_one();
}

void OutputRecorder::close(const std::shared_ptr<Command> &command, std::function<void(int64_t lastSeq)> then)
{
    {
        std::lock_guard lock(command->mutex);
        command->closed = true;
        command->then = std::move(then);
        for (auto &s : command->streams) {
            if (!s.finished) {
                s.ready += s.redact.finish();
                s.finished = true;
            }
        }
        if (command->model)
            command->model->finish();
    }
    wakeFlusher();
}

void OutputRecorder::flusherLoop()
{
    std::unique_lock lock(m_mutex);
    while (true) {
        const auto now = Clock::now();
        auto nextWake = now + std::chrono::hours(1);
        if (m_options.maxBytesPerSecond > 0) {
            // A quarter of a second's worth at most, so that a quiet while does not let a burst through.
            const double rate = static_cast<double>(m_options.maxBytesPerSecond);
            m_budgetBytes = std::min(rate / 4, m_budgetBytes + rate * std::chrono::duration<double>(now - m_budgetAt).count());
            m_budgetAt = now;
        }
        for (auto it = m_commands.begin(); it != m_commands.end();) {
            const std::shared_ptr<Command> command = *it;
            std::unique_lock own(command->mutex);
            if (command->needsRebase && !command->inFlight && !m_stopping) {
                own.unlock();
                rebase(command, lock);
                own.lock();
            }
            if (!command->inFlight && !command->needsRebase && !m_stopping && !command->stopped)
                sendIfDue(command, now, own);
            // Stopping, every command goes once its append in flight has called back (one still
            // running records nothing more; a closed one's step gets the log's end it knows).
            const bool done = !command->inFlight
                && (m_stopping
                    || (command->closed
                        && (command->stopped
                            || (!command->needsRebase && command->unsent.empty() && !hasUnsent(*command)))));
            if (done) {
                auto then = std::move(command->then);
                const int64_t lastSeq = command->lastSeq;
                own.unlock();
                it = m_commands.erase(it);
                if (then)
                    then(lastSeq);
                continue;
            }
            if (!command->inFlight && (command->waitingSince || command->closed)) {
                const bool overBudget = m_options.maxBytesPerSecond > 0 && m_budgetBytes <= 0;
                const auto due = command->closed || !command->waitingSince
                    ? now : *command->waitingSince + std::chrono::milliseconds(m_options.flushMs);
                nextWake = std::min(nextWake, overBudget ? std::max(due, now + std::chrono::milliseconds(10)) : due);
            }
            ++it;
        }
        if (m_stopping && m_commands.empty())
            return;
        if (m_stopping) {
            m_wake.wait_for(lock, std::chrono::milliseconds(10));   // appends in flight call back
            continue;
        }
        m_wake.wait_until(lock, nextWake, [&] { return m_wakeUp || m_stopping; });
        m_wakeUp = false;
    }
}

void OutputRecorder::sendIfDue(const std::shared_ptr<Command> &command, Clock::time_point now,
                               std::unique_lock<std::mutex> &own)
{
    Command &c = *command;
    std::vector<core::NewEvent> events = std::move(c.unsent);
    c.unsent.clear();
    if (events.empty()) {
        const size_t waiting = c.streams[0].ready.size() + c.streams[1].ready.size() + (c.model ? c.model->waiting() : 0);
        const bool due = c.closed || waiting >= m_options.flushBytes
            || (c.waitingSince && now - *c.waitingSince >= std::chrono::milliseconds(m_options.flushMs));
        if (!due)
            return;
        if (m_options.maxBytesPerSecond > 0 && m_budgetBytes <= 0)
            return;   // over the cap: it waits, and more of it goes in one event later
        for (int i = 0; i < 2 && !c.model; ++i) {
            if (auto next = nextEvent(c, c.streams[i], i, m_options.limitBytes))
                events.push_back(std::move(*next));
        }
        if (c.model) {
            if (auto next = nextDelta(c, *c.model))
                events.push_back(std::move(*next));
        }
        c.waitingSince.reset();
        // What is held back (a possible secret's start, half a character) waits for more output.
        if (!c.closed && (!c.streams[0].ready.empty() || !c.streams[1].ready.empty()
                          || c.streams[0].redact.pendingBytes() > 0 || c.streams[1].redact.pendingBytes() > 0))
            c.waitingSince = now;
    }
    if (events.empty())
        return;
    for (const auto &e : events)
        m_budgetBytes -= static_cast<double>(e.payload.size());
    c.inFlight = true;
    store::AppendRequest request;
    request.sessionId = c.start.sessionId;
    request.expectedLastSeq = c.lastSeq;
    request.leaseToken = c.start.leaseToken;
    request.events = events;
    own.unlock();
    m_store.appendThen(std::move(request), [this, command, events = std::move(events)](Result<store::AppendResult> r) mutable {
        {
            std::lock_guard lock(command->mutex);
            command->inFlight = false;
            if (r) {
                command->lastSeq = r->state.lastSeq;
            } else if (r.error().code == ErrorCode::Aborted) {
                command->unsent = std::move(events);   // the log moved: step over people's events, then again
                command->needsRebase = true;
            } else {
                spdlog::warn("session {}: the output of call {} is no longer recorded live: {}", command->start.sessionId,
                             command->start.callId, r.error().message);
                command->stopped = true;
            }
        }
        // Only a notification: this runs on the store's writer thread, or on the flusher's own
        // (holding m_mutex) when the store refuses at once; the flusher looks again within
        // flushMs in any case.
        m_wakeUp = true;
        m_wake.notify_one();
    });
    own.lock();
}

void OutputRecorder::rebase(const std::shared_ptr<Command> &command, std::unique_lock<std::mutex> &lock)
{
    int64_t lastSeq = 0;
    std::string sessionId;
    {
        std::lock_guard own(command->mutex);
        lastSeq = command->lastSeq;
        sessionId = command->start.sessionId;
    }
    lock.unlock();   // a read of the store: add() and close() go on meanwhile
    auto since = m_store.readEvents(sessionId, lastSeq + 1, INT_MAX);
    lock.lock();
    std::lock_guard own(command->mutex);
    command->needsRebase = false;
    if (since && !since->empty() && onlyPeopleActed(*since)) {
        command->lastSeq = since->back().seq;
        return;
    }
    // A cancel, the end of the session, or another broker's step: this command's output is stale.
    command->stopped = true;
    command->unsent.clear();
}

} // namespace paddock::engine
