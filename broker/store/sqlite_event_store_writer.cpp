// SqliteEventStore's writer side: append, appendThen and appendAll check a request and queue it
// (blocking the caller while the queue is full), the writer thread takes the queue in groups (by
// time and count; an all-or-nothing batch alone) and commits each (sqlite_event_store_commit.cpp),
// and the commit listeners hear of every commit before each caller gets its answer (its future, or
// its callback on the writer thread).
//
// Threads: append, appendThen, appendAll and the listener calls from any thread (m_queueMutex
// guards the queue, m_listenerMutex the listeners); writerLoop and notifyListeners on the writer
// thread.

#include "broker/store/sqlite_event_store_internal.h"

#include "common/clock.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

namespace {

constexpr size_t kMaxSessionIdBytes = 256;

bool looksLikeJsonObject(std::string_view text)
{
    auto isSpace = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    while (!text.empty() && isSpace(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && isSpace(text.back()))
        text.remove_suffix(1);
    return text.size() >= 2 && text.front() == '{' && text.back() == '}';
}

Status validate(const AppendRequest &request)
{
    if (request.sessionId.empty() && request.events.empty() && !request.writes.empty())
        return {};   // statements beside the log only
    if (request.sessionId.empty())
        return fail(ErrorCode::InvalidArgument, "append: the session id is empty; give the session's id");
    if (request.sessionId.size() > kMaxSessionIdBytes)
        return fail(ErrorCode::InvalidArgument, "append: the session id is longer than "
                                                    + std::to_string(kMaxSessionIdBytes) + " bytes");
    if (request.events.empty())
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": no events; send at least one");
    if (request.expectedLastSeq < AppendRequest::kAnySeq)
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": expectedLastSeq "
                        + std::to_string(request.expectedLastSeq) + " is negative; use 0 to create, "
                        + "the tail's seq to compare-and-append, or kAnySeq");
    for (size_t i = 0; i < request.events.size(); ++i) {
        const auto &event = request.events[i];
        const std::string where = "append to session " + request.sessionId + ", event " + std::to_string(i + 1);
        if (event.kind.empty())
            return fail(ErrorCode::InvalidArgument, where + ": the kind is empty");
        if (!looksLikeJsonObject(event.payload))
            return fail(ErrorCode::InvalidArgument, where + " (" + event.kind
                                                        + "): the payload is not a JSON object; send \"{}\" for none");
        const bool created = event.kind == core::kind::SessionCreated;
        const bool mustCreate = request.expectedLastSeq == 0 && i == 0;
        if (mustCreate && !created)
            return fail(ErrorCode::InvalidArgument,
                        where + ": a new session's first event must be session.created, not " + event.kind);
        if (created && !mustCreate)
            return fail(ErrorCode::InvalidArgument,
                        where + ": session.created may only open a new session (expectedLastSeq 0, first event)");
    }
    return {};
}

} // namespace

void SqliteEventStore::Pending::answer(Result<AppendResult> result)
{
    if (answered)
        return;
    answered = true;
    if (!done) {
        promise.set_value(std::move(result));
        return;
    }
    try {
        done(std::move(result));
    } catch (const std::exception &e) {
        // A callback must not take the writer down with it; its caller's answer is lost.
        spdlog::error("store: an append callback threw: {}", e.what());
    }
}

void SqliteEventStore::enqueue(Pending pending)
{
    if (auto status = validate(pending.request); !status) {
        pending.answer(std::unexpected(std::move(status.error())));
        return;
    }
    const auto count = static_cast<int64_t>(pending.request.events.size());
    {
        std::unique_lock lock(m_queueMutex);
        // The writer thread never waits for room: a listener that appends would wait for itself.
        if (std::this_thread::get_id() != m_writerId) {
            m_spaceCv.wait(lock, [&] { return m_closing || m_queuedEvents < m_maxQueuedEvents || m_queue.empty(); });
        }
        if (!m_closing) {
            pending.enqueuedAt = std::chrono::steady_clock::now();
            m_queue.push_back(std::move(pending));
            m_queuedEvents += count;
            lock.unlock();
            m_queueCv.notify_one();
            return;
        }
    }
    // Answered outside the lock: a callback may append again.
    pending.answer(std::unexpected(Error{ErrorCode::Unavailable, closingMessage()}));
}

std::future<Result<AppendResult>> SqliteEventStore::append(AppendRequest request)
{
    Pending pending{std::move(request), {}, {}, {}};
    auto future = pending.promise.get_future();
    enqueue(std::move(pending));
    return future;
}

void SqliteEventStore::appendThen(AppendRequest request, AppendCallback done)
{
    enqueue(Pending{std::move(request), {}, std::move(done), {}});
}

Result<std::vector<AppendResult>> SqliteEventStore::appendAll(std::vector<AppendRequest> requests)
{
    if (requests.empty())
        return fail(ErrorCode::InvalidArgument, "appendAll: no requests; send at least one");
    for (const auto &request : requests) {
        if (auto status = validate(request); !status)
            return std::unexpected(status.error());
    }
    std::vector<std::future<Result<AppendResult>>> futures;
    {
        std::unique_lock lock(m_queueMutex);
        if (std::this_thread::get_id() != m_writerId)
            m_spaceCv.wait(lock, [&] { return m_closing || m_queuedEvents < m_maxQueuedEvents || m_queue.empty(); });
        if (m_closing)
            return fail(ErrorCode::Unavailable, closingMessage());
        // Contiguous in the queue, so the writer takes them as one group of their own.
        const size_t count = requests.size();
        for (size_t i = 0; i < count; ++i) {
            m_queuedEvents += static_cast<int64_t>(requests[i].events.size());
            Pending pending{std::move(requests[i]), {}, {}, std::chrono::steady_clock::now(), i == 0 ? count : 0};
            futures.push_back(pending.promise.get_future());
            m_queue.push_back(std::move(pending));
        }
    }
    m_queueCv.notify_one();
    std::vector<AppendResult> results;
    std::optional<Error> error;
    for (auto &future : futures) {
        auto result = future.get();
        if (!result && !error)
            error = result.error();
        else if (result)
            results.push_back(std::move(*result));
    }
    if (error)
        return std::unexpected(*error);
    return results;
}

void SqliteEventStore::writerLoop()
{
    std::vector<Pending> group;
    for (;;) {
        group.clear();
        size_t batch = 0;
        const int64_t waitStartUs = monotonicUs();
        {
            std::unique_lock lock(m_queueMutex);
            m_queueCv.wait(lock, [&] { return m_closing || !m_queue.empty(); });
            if (m_queue.empty())
                break;   // closing and drained
            // Wait a little for more company, measured from the oldest request's arrival: requests
            // that queued while the last commit ran go at once. The wait also ends once as many
            // requests wait as the last group held: the callers that group answered are back, and
            // waiting longer would only add latency.
            if (!m_closing && m_options.maxBatchDelayUs > 0 && m_queuedEvents < m_options.maxBatchEvents) {
                const auto deadline = m_queue.front().enqueuedAt + std::chrono::microseconds(m_options.maxBatchDelayUs);
                m_queueCv.wait_until(lock, deadline, [&] {
                    return m_closing || m_queuedEvents >= m_options.maxBatchEvents
                        || m_queue.size() >= m_lastGroupRequests;
                });
            }
            int64_t taken = 0;
            // An all-or-nothing batch is a group of its own: its requests alone share the transaction.
            batch = m_queue.front().batchSize;
            while (!m_queue.empty()) {
                const auto size = static_cast<int64_t>(m_queue.front().request.events.size());
                if (batch > 0 ? group.size() == batch
                              : !group.empty() && (m_queue.front().batchSize > 0 || taken + size > m_options.maxBatchEvents))
                    break;
                taken += size;
                group.push_back(std::move(m_queue.front()));
                m_queue.pop_front();
            }
            m_queuedEvents -= taken;
            m_lastGroupRequests = std::max<size_t>(group.size(), 2);
            m_stats.events += taken;
        }
        ++m_stats.groups;
        m_stats.waitUs += monotonicUs() - waitStartUs;
        m_spaceCv.notify_all();
        try {
            commitGroup(group, batch > 0);
        } catch (const std::exception &e) {
            // Nothing below throws by design; if something does, fail the group rather than the broker.
            spdlog::error("store: writer failed a group of {} appends: {}", group.size(), e.what());
            if (!sqlite3_get_autocommit(m_writeDb.get())) {
                m_w.rollback.step();
                m_w.rollback.reset();
            }
            for (auto &pending : group)
                pending.answer(fail(ErrorCode::Internal, std::string("the store failed: ") + e.what()));
        }
    }
}

void SqliteEventStore::notifyListeners(const CommitNotice &notice)
{
    std::lock_guard lock(m_listenerMutex);
    for (auto &[id, listener] : m_listeners) {
        try {
            listener(notice);
        } catch (const std::exception &e) {
            spdlog::error("store: commit listener {} threw: {}", id, e.what());
        }
    }
    for (int id : m_removeAfterNotify)
        std::erase_if(m_listeners, [id](const auto &item) { return item.first == id; });
    m_removeAfterNotify.clear();
}

int SqliteEventStore::addCommitListener(std::function<void(const CommitNotice &)> listener)
{
    if (std::this_thread::get_id() == m_writerId) {
        // From inside a listener the mutex is already held by this thread.
        spdlog::error("store: addCommitListener called from a commit listener; ignored");
        return 0;
    }
    std::lock_guard lock(m_listenerMutex);
    const int id = m_nextListenerId++;
    m_listeners.emplace_back(id, std::move(listener));
    return id;
}

void SqliteEventStore::removeCommitListener(int id)
{
    if (std::this_thread::get_id() == m_writerId) {
        m_removeAfterNotify.push_back(id);   // guarded by the lock this thread holds in notifyListeners
        return;
    }
    std::lock_guard lock(m_listenerMutex);
    std::erase_if(m_listeners, [id](const auto &item) { return item.first == id; });
}

} // namespace paddock::store
