#pragma once
// The writer side both EventStore backends share: append, appendThen and appendAll queue a
// checked request (blocking the caller while the queue is full), one writer thread takes the queue
// in groups (by time and count; an all-or-nothing batch alone) and hands each group to the
// backend's GroupCommitter, and after a commit the commit listeners hear of it before each caller
// gets its answer (its future, or its callback on the writer thread). What a commit is (SQL,
// transactions, connections, leases) stays in the backend. Private to broker/store.
//
// Threads: append, appendThen, appendAll, addCommitListener and removeCommitListener from any
// thread (m_queueMutex guards the queue, m_listenerMutex the listeners); start() and close() from
// the store's open() and close(). The writer thread runs the GroupCommitter, which calls
// hasListeners(), publish(), failGroup() and failRolledBack() from there; stats() is read after
// close().

#include "broker/store/event_store.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace paddock::store {

// Appends block their caller (not the writer) once this many times maxBatchEvents events wait:
// memory stays bounded when producers outrun the database.
inline constexpr int64_t kMaxQueuedEventsFactor = 16;

// One queued request and the way its caller hears back.
struct PendingAppend {
    AppendRequest request;
    std::promise<Result<AppendResult>> promise;   // append(), appendAll()
    EventStore::AppendCallback done;               // appendThen(): called instead
    std::chrono::steady_clock::time_point enqueuedAt;
    size_t batchSize = 0;   // > 0: the first of that many requests appended all or nothing (appendAll)
    bool answered = false;

    // The caller's answer, once: through its callback or its future. A callback that throws is
    // logged; its caller's answer is lost, the writer goes on.
    void answer(Result<AppendResult> result);
};

// A request's answer once its group reached it (a refusal of its own, or its result); nullopt:
// the group failed before it.
using RequestOutcome = std::optional<Result<AppendResult>>;

// What a backend does with the groups the writer thread takes; called on that thread only.
class GroupCommitter {
public:
    // One transaction for the group. Every request gets its answer before this returns: through
    // AppendQueue::publish after a commit, AppendQueue::failGroup otherwise.
    virtual void commitGroup(std::vector<PendingAppend> &group, bool allOrNothing) = 0;
    // commitGroup threw (nothing below it does by design): end whatever transaction it left open.
    // The queue then fails the group's callers.
    virtual void abandonGroup() = 0;

protected:
    ~GroupCommitter() = default;
};

class AppendQueue {
public:
    // closingMessage: what a caller hears when the store is closing (names the database).
    AppendQueue(int maxBatchEvents, int maxBatchDelayUs, std::string closingMessage);
    ~AppendQueue() { close(); }
    AppendQueue(const AppendQueue &) = delete;
    AppendQueue &operator=(const AppendQueue &) = delete;

    // Starts the writer thread, which hands every group to committer until close().
    void start(GroupCommitter &committer);
    bool started() const { return m_started; }
    // Stops taking appends and joins the writer once it has committed everything queued. Idempotent.
    void close();

    // EventStore::append, appendThen and appendAll (event_store.h).
    std::future<Result<AppendResult>> append(AppendRequest request);
    void appendThen(AppendRequest request, EventStore::AppendCallback done);
    Result<std::vector<AppendResult>> appendAll(std::vector<AppendRequest> requests);

    int addCommitListener(std::function<void(const CommitNotice &)> listener);
    void removeCommitListener(int id);

    // On the writer thread. Whether a notice is worth building: someone listens.
    bool hasListeners();
    // On the writer thread, after a commit: the listeners hear of notice (when it holds events),
    // then every caller of the group gets its outcome. Listeners first: a caller that reads after
    // its answer finds every listener's view (indexes, live tails) already up to date.
    void publish(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes, const CommitNotice &notice);
    // From another thread of the store: what was committed elsewhere (another broker on the same
    // database), for the listeners. Serialised with publish().
    void notifyElsewhere(const CommitNotice &notice);
    // Answers a group that failed: a request refused on its own merits keeps its answer, the rest
    // hear error.
    static void failGroup(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes, const Error &error);
    // failGroup for a group whose transaction failed and was rolled back: logged, and the callers
    // learn that nothing of their append was written, so a retry is safe.
    static void failRolledBack(std::vector<PendingAppend> &group, std::vector<RequestOutcome> &outcomes,
                               const Error &error);

    // Writer-thread figures; read them after close().
    struct Stats {
        int64_t groups = 0, events = 0, waitUs = 0;
    };
    const Stats &stats() const { return m_stats; }

private:
    bool onWriterThread() const { return std::this_thread::get_id() == m_writerId; }
    // Waits until the queue has room, unless called from the writer thread: a listener or callback
    // that appends would otherwise wait for itself. Returns with the lock still held.
    void waitForRoom(std::unique_lock<std::mutex> &lock);
    // Checks a request and queues it; answers it at once when it is refused or the store is closing.
    void enqueue(PendingAppend pending);
    // Takes the next group off the queue (an all-or-nothing batch alone); empty once closing and drained.
    std::vector<PendingAppend> takeGroup(size_t &batch);
    void writerLoop(GroupCommitter &committer);
    void notifyListeners(const CommitNotice &notice);

    const int m_maxBatchEvents;
    const int m_maxBatchDelayUs;
    const int64_t m_maxQueuedEvents;
    const std::string m_closingMessage;

    std::thread m_writer;
    bool m_started = false;
    std::atomic<std::thread::id> m_writerId;

    std::mutex m_queueMutex;
    std::condition_variable m_queueCv;      // the writer waits for work
    std::condition_variable m_spaceCv;      // producers wait for room in the queue
    std::deque<PendingAppend> m_queue;
    int64_t m_queuedEvents = 0;
    size_t m_lastGroupRequests = 2;   // at least 2: a lone caller still waits for company
    bool m_closing = false;

    // Held while listeners run, so removeCommitListener returning means the listener is done.
    std::mutex m_listenerMutex;
    std::vector<std::pair<int, std::function<void(const CommitNotice &)>>> m_listeners;
    std::vector<int> m_removeAfterNotify;   // removals asked for from inside a listener
    int m_nextListenerId = 1;

    Stats m_stats;   // the writer thread's
};

} // namespace paddock::store
