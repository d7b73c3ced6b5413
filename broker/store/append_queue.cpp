// AppendQueue (append_queue.h): the queue both backends' appends wait in, the writer thread that
// takes it in groups, and the answers and commit listeners around each group's commit.

#include "broker/store/append_queue.h"

#include "broker/metrics/broker_metrics.h"
#include "broker/store/append_checks.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace paddock::store {

void PendingAppend::answer(Result<AppendResult> result)
{
    if (answered)
        return;
    answered = true;
    if (result)
        broker_metrics::countAppend(enqueuedAt, result->events.size());
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

AppendQueue::AppendQueue(int maxBatchEvents, int maxBatchDelayUs, std::string closingMessage)
    : m_maxBatchEvents(std::max(maxBatchEvents, 1))
    , m_maxBatchDelayUs(std::max(maxBatchDelayUs, 0))
    , m_maxQueuedEvents(int64_t{m_maxBatchEvents} * kMaxQueuedEventsFactor)
    , m_closingMessage(std::move(closingMessage))
{
}

void AppendQueue::start(GroupCommitter &committer)
{
    m_started = true;
    m_writer = std::thread([this, &committer] {
        m_writerId = std::this_thread::get_id();
        writerLoop(committer);
    });
}

void AppendQueue::close()
{
    {
        std::lock_guard lock(m_queueMutex);
        m_closing = true;
    }
    m_queueCv.notify_all();
    m_spaceCv.notify_all();
    if (m_writer.joinable())
        m_writer.join();   // it commits everything queued before it returns
}

void AppendQueue::waitForRoom(std::unique_lock<std::mutex> &lock)
{
    // The writer thread never waits for room: a listener that appends would wait for itself.
    if (!onWriterThread())
        m_spaceCv.wait(lock, [&] { return m_closing || m_queuedEvents < m_maxQueuedEvents || m_queue.empty(); });
}

void AppendQueue::enqueue(PendingAppend pending)
{
    if (auto status = validateAppend(pending.request); !status) {
        pending.answer(std::unexpected(std::move(status.error())));
        return;
    }
    const auto count = static_cast<int64_t>(pending.request.events.size());
    {
        std::unique_lock lock(m_queueMutex);
        waitForRoom(lock);
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
    pending.answer(std::unexpected(Error{ErrorCode::Unavailable, m_closingMessage}));
}

std::future<Result<AppendResult>> AppendQueue::append(AppendRequest request)
{
    PendingAppend pending{std::move(request), {}, {}, {}};
    auto future = pending.promise.get_future();
    enqueue(std::move(pending));
    return future;
}

void AppendQueue::appendThen(AppendRequest request, EventStore::AppendCallback done)
{
    enqueue(PendingAppend{std::move(request), {}, std::move(done), {}});
}

Result<std::vector<AppendResult>> AppendQueue::appendAll(std::vector<AppendRequest> requests)
{
    if (requests.empty())
        return fail(ErrorCode::InvalidArgument, "appendAll: no requests; send at least one");
    for (const auto &request : requests) {
        if (auto status = validateAppend(request); !status)
            return std::unexpected(status.error());
    }
    std::vector<std::future<Result<AppendResult>>> futures;
    {
        std::unique_lock lock(m_queueMutex);
        waitForRoom(lock);
        if (m_closing)
            return fail(ErrorCode::Unavailable, m_closingMessage);
        // Contiguous in the queue, so the writer takes them as one group of their own.
        const size_t count = requests.size();
        for (size_t i = 0; i < count; ++i) {
            m_queuedEvents += static_cast<int64_t>(requests[i].events.size());
            PendingAppend pending{std::move(requests[i]), {}, {}, std::chrono::steady_clock::now(), i == 0 ? count : 0};
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

std::vector<PendingAppend> AppendQueue::takeGroup(size_t &batch)
{
    std::vector<PendingAppend> group;
    std::unique_lock lock(m_queueMutex);
    m_queueCv.wait(lock, [&] { return m_closing || !m_queue.empty(); });
    if (m_queue.empty())
        return group;   // closing and drained
    // Wait a little for more company, measured from the oldest request's arrival: requests that
    // queued while the last commit ran go at once. The wait also ends once as many requests wait
    // as the last group held: the callers that group answered are back, and waiting longer would
    // only add latency.
    if (!m_closing && m_maxBatchDelayUs > 0 && m_queuedEvents < m_maxBatchEvents) {
        const auto deadline = m_queue.front().enqueuedAt + std::chrono::microseconds(m_maxBatchDelayUs);
        m_queueCv.wait_until(lock, deadline, [&] {
            return m_closing || m_queuedEvents >= m_maxBatchEvents || m_queue.size() >= m_lastGroupRequests;
        });
    }
    int64_t taken = 0;
    // An all-or-nothing batch is a group of its own: its requests alone share the transaction.
    batch = m_queue.front().batchSize;
    while (!m_queue.empty()) {
        const auto size = static_cast<int64_t>(m_queue.front().request.events.size());
        if (batch > 0 ? group.size() == batch
                      : !group.empty() && (m_queue.front().batchSize > 0 || taken + size > m_maxBatchEvents))
            break;
        taken += size;
        group.push_back(std::move(m_queue.front()));
        m_queue.pop_front();
    }
    m_queuedEvents -= taken;
    m_lastGroupRequests = std::max<size_t>(group.size(), 2);
    m_stats.events += taken;
    return group;
}

void AppendQueue::writerLoop(GroupCommitter &committer)
{
    for (;;) {
        size_t batch = 0;
        const int64_t waitStartUs = monotonicUs();
        std::vector<PendingAppend> group = takeGroup(batch);
        if (group.empty())
            break;
        ++m_stats.groups;
        m_stats.waitUs += monotonicUs() - waitStartUs;
        m_spaceCv.notify_all();
        try {
            committer.commitGroup(group, batch > 0);
        } catch (const std::exception &e) {
            // Nothing below throws by design; if something does, fail the group rather than the broker.
            spdlog::error("store: writer failed a group of {} appends: {}", group.size(), e.what());
            committer.abandonGroup();
            for (auto &pending : group)
                pending.answer(fail(ErrorCode::Internal, std::string("the store failed: ") + e.what()));
        }
    }
}

bool AppendQueue::hasListeners()
{
    std::lock_guard lock(m_listenerMutex);
    return !m_listeners.empty();
}

void AppendQueue::publish(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes,
                          const CommitNotice &notice)
{
    if (!notice.events.empty())
        notifyListeners(notice);
    for (size_t i = 0; i < group.size(); ++i)
        group[i].answer(std::move(*outcomes[i]));
}

void AppendQueue::notifyElsewhere(const CommitNotice &notice)
{
    if (!notice.events.empty() || !notice.sessions.empty())
        notifyListeners(notice);
}

void AppendQueue::failGroup(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes,
                            const Error &error)
{
    for (size_t i = 0; i < group.size(); ++i) {
        // A request refused on its own merits keeps its answer; the rest learn the group failed.
        if (i >= outcomes.size() || !outcomes[i] || outcomes[i]->has_value())
            group[i].answer(std::unexpected(error));
        else
            group[i].answer(std::move(*outcomes[i]));
    }
}

void AppendQueue::failRolledBack(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes,
                                 const Error &error)
{
    spdlog::error("store: a group of {} appends failed and was rolled back: {}", group.size(), error.message);
    failGroup(group, outcomes, Error{error.code, error.message + "; nothing of this append was written, retry it"});
}

namespace {
// Whether this thread is running commit listeners (and holds the listeners' mutex): the writer,
// or a store's thread that hears commits made elsewhere.
thread_local bool t_notifying = false;
} // namespace

void AppendQueue::notifyListeners(const CommitNotice &notice)
{
    std::lock_guard lock(m_listenerMutex);
    t_notifying = true;
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
    t_notifying = false;
}

int AppendQueue::addCommitListener(std::function<void(const CommitNotice &)> listener)
{
    if (t_notifying) {
        // From inside a listener the mutex is already held by this thread.
        spdlog::error("store: addCommitListener called from a commit listener; ignored");
        return 0;
    }
    std::lock_guard lock(m_listenerMutex);
    const int id = m_nextListenerId++;
    m_listeners.emplace_back(id, std::move(listener));
    return id;
}

void AppendQueue::removeCommitListener(int id)
{
    if (t_notifying) {
        m_removeAfterNotify.push_back(id);   // guarded by the lock this thread holds in notifyListeners
        return;
    }
    std::lock_guard lock(m_listenerMutex);
    std::erase_if(m_listeners, [id](const auto &item) { return item.first == id; });
}

} // namespace paddock::store
