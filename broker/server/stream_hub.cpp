#include "broker/server/stream_hub.h"

#include "broker/server/convert.h"

#include <spdlog/spdlog.h>

namespace paddock::server {

// One streaming call served by the hub's pump.
class HubStream {
public:
    virtual ~HubStream() = default;
    // Pump thread: read what is needed, start at most one write, or finish.
    virtual void serve() = 0;
    // Writer thread, hub mutex held: take what this stream wants from a commit. True when the
    // stream has something new to send.
    virtual bool takeCommit(const store::CommitNotice &notice) = 0;
    // Any thread: finish at the next serve() with UNAVAILABLE.
    virtual void requestStop() = 0;

    bool m_queued = false;   // in the hub's ready queue; guarded by the hub mutex
};

namespace {

constexpr int kWatchPageSize = 500;

} // namespace

// What both streaming calls share: one write in flight, and the reactor callbacks that only set a
// flag and wake the pump.
template <typename Message>
class HubWriter : public grpc::ServerWriteReactor<Message>, public HubStream {
public:
    explicit HubWriter(StreamHub &hub) : m_hub(hub) {}

    void OnWriteDone(bool ok) override
    {
        {
            std::lock_guard lock(m_mutex);
            m_writeInFlight = false;
            if (!ok)
                m_cancelled = true;
        }
        m_hub.wake(this);
    }

    void OnCancel() override
    {
        {
            std::lock_guard lock(m_mutex);
            m_cancelled = true;
        }
        m_hub.wake(this);
    }

    void OnDone() override
    {
        m_hub.remove(this);
        delete this;
    }

    void requestStop() override
    {
        std::lock_guard lock(m_mutex);
        m_stopRequested = true;
    }

protected:
    // Pump thread, m_mutex held by `lock`: true when the call is finished or finishing and serve()
    // has nothing more to do. Ends a cancelled call, and a stopped one with UNAVAILABLE and `why`.
    bool finishedOrFinishing(std::unique_lock<std::mutex> &lock, const std::string &why)
    {
        if (m_finishing || m_writeInFlight)
            return true;
        if (!m_cancelled && !m_stopRequested)
            return false;
        m_finishing = true;
        const grpc::Status status = m_cancelled ? grpc::Status::CANCELLED
                                                : grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
        lock.unlock();
        this->Finish(status);
        return true;
    }

    // Pump thread, m_mutex held by `lock`: ends the call with status.
    void finish(std::unique_lock<std::mutex> &lock, const grpc::Status &status)
    {
        m_finishing = true;
        lock.unlock();
        this->Finish(status);
    }

    // Pump thread, m_mutex held by `lock`: sends m_buffer.
    void write(std::unique_lock<std::mutex> &lock)
    {
        m_writeInFlight = true;
        lock.unlock();
        this->StartWrite(&m_buffer);
    }

    StreamHub &m_hub;
    std::mutex m_mutex;            // guards the members below and those of the subclasses
    bool m_writeInFlight = false;
    bool m_cancelled = false;
    bool m_stopRequested = false;
    bool m_finishing = false;
    Message m_buffer;              // the message being written; untouched while a write is in flight
};

class EventStream final : public HubWriter<v1::EventBatch> {
public:
    EventStream(StreamHub &hub, const v1::StreamEventsRequest &request, const core::SessionState &session)
        : HubWriter(hub)
        , m_sessionId(request.session_id())
        , m_nextSeq(std::max<int64_t>(1, request.from_seq()))
        , m_follow(request.follow())
        , m_maxBatch(request.max_batch() > 0 ? std::min(request.max_batch(), 10000) : 1000)
    {
        updateEnded(session);
        m_hub.add(this);
        m_hub.wake(this);
    }

    bool takeCommit(const store::CommitNotice &notice) override
    {
        std::lock_guard lock(m_mutex);
        bool any = false;
        for (const auto &event : notice.events) {
            if (event.sessionId != m_sessionId)
                continue;
            any = true;
            if (m_lagging)
                continue;
            if (m_live.size() >= StreamHub::kMaxQueuedEvents) {
                // The client is not keeping up: stop queueing and catch up from the store.
                m_live.clear();
                m_lagging = true;
                ++m_hub.m_catchUps;
                continue;
            }
            m_live.push_back(event);
        }
        for (const auto &state : notice.sessions) {
            if (state.id != m_sessionId || state.lastSeq < m_endSeq)
                continue;   // an older state than one heard already (commits heard from elsewhere come late)
            updateEnded(state);
            any = true;
            // A state ahead of every event this stream has: its events were committed elsewhere
            // (another broker on the same database) and come from the store.
            const int64_t have = m_live.empty() ? m_nextSeq - 1 : m_live.back().seq;
            if (!m_lagging && state.lastSeq > have) {
                m_live.clear();
                m_lagging = true;
            }
        }
        return any;
    }

    void serve() override
    {
        std::unique_lock lock(m_mutex);
        if (finishedOrFinishing(lock, "the broker is shutting down: reconnect and resume from seq "
                                          + std::to_string(m_nextSeq)))
            return;

        std::vector<core::Event> batch;
        if (!m_historyDone || m_lagging) {
            const int64_t from = m_nextSeq;
            lock.unlock();
            auto read = m_hub.m_store.readEvents(m_sessionId, from, m_maxBatch);
            lock.lock();
            if (!read)
                return finish(lock, toGrpcStatus(read.error()));
            batch = std::move(*read);
            const int64_t after = batch.empty() ? from : batch.back().seq + 1;
            if (static_cast<int>(batch.size()) < m_maxBatch) {
                m_historyDone = true;
                // Still behind when a commit heard during the read (and not queued while lagging)
                // ends past what it returned; that commit has queued this stream again.
                m_lagging = m_endSeq >= after;
            }
            if (!m_lagging)
                dropQueuedBefore(after);
        } else {
            dropQueuedBefore(m_nextSeq);
            while (!m_live.empty() && static_cast<int>(batch.size()) < m_maxBatch) {
                batch.push_back(std::move(m_live.front()));
                m_live.pop_front();
            }
        }

        if (!batch.empty()) {
            m_buffer.Clear();
            for (const auto &event : batch)
                toProto(event, m_buffer.add_events());
            m_nextSeq = batch.back().seq + 1;
            return write(lock);
        }
        if (!m_historyDone)
            return;
        if (!m_follow)
            return finish(lock, grpc::Status::OK);
        if (m_ended && m_nextSeq > m_endSeq) {
            m_finishing = true;
            m_buffer.Clear();
            m_buffer.set_end_of_session(true);
            lock.unlock();
            StartWriteAndFinish(&m_buffer, grpc::WriteOptions(), grpc::Status::OK);
        }
        // Otherwise: caught up with a live session; the next commit wakes us.
    }

private:
    void updateEnded(const core::SessionState &state)
    {
        m_ended = core::isTerminal(state.status) && !state.needsWork();
        m_endSeq = state.lastSeq;
    }

    // Queued events older than `seq` were already sent or read; a gap after them means some were
    // dropped, and the store fills it.
    void dropQueuedBefore(int64_t seq)
    {
        while (!m_live.empty() && m_live.front().seq < seq)
            m_live.pop_front();
        if (!m_live.empty() && m_live.front().seq > seq) {
            m_live.clear();
            m_lagging = true;
        }
    }

    const std::string m_sessionId;
    int64_t m_nextSeq;
    const bool m_follow;
    const int m_maxBatch;
    std::deque<core::Event> m_live;
    bool m_lagging = false;
    bool m_historyDone = false;
    bool m_ended = false;
    int64_t m_endSeq = 0;
};

class SessionWatch final : public HubWriter<v1::SessionChanges> {
public:
    SessionWatch(StreamHub &hub, const v1::WatchSessionsRequest &request, store::SessionQuery query)
        : HubWriter(hub), m_filter(request.filter()), m_query(std::move(query))
    {
        m_query.pageSize = kWatchPageSize;
        m_hub.add(this);
        m_hub.wake(this);
    }

    bool takeCommit(const store::CommitNotice &notice) override
    {
        std::lock_guard lock(m_mutex);
        bool any = false;
        for (const auto &state : notice.sessions) {
            if (!matches(m_filter, state))
                continue;
            // Coalesced: only the newest state of each session is sent (a commit heard from another
            // broker may arrive after a later one).
            auto [it, added] = m_pending.try_emplace(state.id, state);
            if (!added && it->second.lastSeq <= state.lastSeq)
                it->second = state;
            any = true;
        }
        return any;
    }

    void serve() override
    {
        std::unique_lock lock(m_mutex);
        if (finishedOrFinishing(lock, "the broker is shutting down: reconnect to watch again"))
            return;
        m_buffer.Clear();
        if (!m_initialDone) {
            lock.unlock();
            auto page = m_hub.m_store.listSessions(m_query);
            lock.lock();
            if (!page)
                return finish(lock, toGrpcStatus(page.error()));
            for (const auto &state : page->sessions)
                toProto(state, m_buffer.add_sessions());
            m_buffer.set_initial(true);
            m_query.pageToken = page->nextPageToken;
            m_initialDone = page->nextPageToken.empty();
        } else {
            if (m_pending.empty())
                return;
            auto it = m_pending.begin();
            for (int n = 0; it != m_pending.end() && n < kWatchPageSize; ++n, ++it)
                toProto(it->second, m_buffer.add_sessions());
            m_pending.erase(m_pending.begin(), it);
        }
        write(lock);
    }

private:
    const v1::SessionFilter m_filter;
    store::SessionQuery m_query;
    bool m_initialDone = false;
    std::map<std::string, core::SessionState> m_pending;
};

StreamHub::StreamHub(store::EventStore &store) : m_store(store) {}

StreamHub::~StreamHub()
{
    stop();
}

void StreamHub::start()
{
    m_listenerId = m_store.addCommitListener([this](const store::CommitNotice &notice) { onCommit(notice); });
    m_pump = std::thread([this] { pumpLoop(); });
    m_pumpId = m_pump.get_id();
}

void StreamHub::beginShutdown()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
        for (HubStream *stream : m_streams) {
            stream->requestStop();
            if (!stream->m_queued) {
                stream->m_queued = true;
                m_ready.push_back(stream);
            }
        }
    }
    m_cv.notify_all();
}

void StreamHub::stop()
{
    beginShutdown();
    if (m_listenerId >= 0) {
        m_store.removeCommitListener(m_listenerId);
        m_listenerId = -1;
    }
    {
        std::lock_guard lock(m_mutex);
        m_exiting = true;
    }
    m_cv.notify_all();
    if (m_pump.joinable())
        m_pump.join();
}

grpc::ServerWriteReactor<v1::EventBatch> *StreamHub::streamEvents(const v1::StreamEventsRequest &request,
                                                                  const core::SessionState &session)
{
    return new EventStream(*this, request, session);
}

grpc::ServerWriteReactor<v1::SessionChanges> *StreamHub::watchSessions(const v1::WatchSessionsRequest &request)
{
    auto query = toQuery(request.filter());
    if (!query) {
        // A reactor that only reports the error.
        class Refusal : public grpc::ServerWriteReactor<v1::SessionChanges> {
        public:
            explicit Refusal(const Error &error) { Finish(toGrpcStatus(error)); }
            void OnDone() override { delete this; }
        };
        return new Refusal(query.error());
    }
    return new SessionWatch(*this, request, std::move(*query));
}

void StreamHub::onCommit(const store::CommitNotice &notice)
{
    bool woke = false;
    {
        std::lock_guard lock(m_mutex);
        for (HubStream *stream : m_streams) {
            if (stream->takeCommit(notice) && !stream->m_queued) {
                stream->m_queued = true;
                m_ready.push_back(stream);
                woke = true;
            }
        }
    }
    if (woke)
        m_cv.notify_all();
}

void StreamHub::wake(HubStream *stream)
{
    {
        std::lock_guard lock(m_mutex);
        if (stream->m_queued || !m_streams.contains(stream))
            return;
        stream->m_queued = true;
        m_ready.push_back(stream);
    }
    m_cv.notify_all();
}

void StreamHub::add(HubStream *stream)
{
    std::lock_guard lock(m_mutex);
    m_streams.insert(stream);
    if (m_stopping)
        stream->requestStop();
}

void StreamHub::remove(HubStream *stream)
{
    std::unique_lock lock(m_mutex);
    m_streams.erase(stream);
    if (std::this_thread::get_id() != m_pumpId)
        m_cv.wait(lock, [&] { return m_busy != stream; });
    std::erase(m_ready, stream);
}

void StreamHub::pumpLoop()
{
    std::unique_lock lock(m_mutex);
    while (true) {
        m_cv.wait(lock, [&] { return !m_ready.empty() || (m_exiting && m_streams.empty()); });
        if (m_ready.empty()) {
            if (m_exiting && m_streams.empty())
                return;
            continue;
        }
        HubStream *stream = m_ready.front();
        m_ready.pop_front();
        if (!m_streams.contains(stream))
            continue;
        stream->m_queued = false;
        m_busy = stream;
        lock.unlock();
        stream->serve();
        lock.lock();
        m_busy = nullptr;
        m_cv.notify_all();
    }
}

} // namespace paddock::server
