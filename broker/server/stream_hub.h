#pragma once
// Fans committed events out to StreamEvents and WatchSessions calls.
//
// Threads: onCommit() runs on the store's writer thread and only enqueues. One pump thread does every
// store read and starts every write; the reactors' gRPC callbacks only set flags and wake the pump.
// So a slow or stalled client costs the writer a bounded copy and nothing else: when a stream's live
// queue overflows, it is dropped and the stream catches up by reading the store from its last seq.

#include "broker/store/event_store.h"

#include "paddock/v1/sessions.grpc.pb.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace paddock::server {

class HubStream;
template <typename Message>
class HubWriter;

class StreamHub {
public:
    explicit StreamHub(store::EventStore &store);
    ~StreamHub();

    StreamHub(const StreamHub &) = delete;
    StreamHub &operator=(const StreamHub &) = delete;

    void start();
    // Ends every open stream with UNAVAILABLE ("the broker is shutting down"); new streams end at once.
    void beginShutdown();
    // beginShutdown(), then joins the pump once every stream is done. Call after the gRPC server has
    // shut down, which guarantees that every call has reached OnDone.
    void stop();

    // Reactors for the two streaming calls. The request must already be validated.
    grpc::ServerWriteReactor<v1::EventBatch> *streamEvents(const v1::StreamEventsRequest &request,
                                                           const core::SessionState &session);
    grpc::ServerWriteReactor<v1::SessionChanges> *watchSessions(const v1::WatchSessionsRequest &request);

    // Events a stream may queue before it falls back to reading the store.
    static constexpr size_t kMaxQueuedEvents = 20000;

    // How often a stream fell behind and caught up from the store (for tests and metrics).
    int64_t catchUps() const { return m_catchUps.load(); }

private:
    friend class HubStream;
    template <typename Message>
    friend class HubWriter;
    friend class EventStream;
    friend class SessionWatch;

    void onCommit(const store::CommitNotice &notice);
    void pumpLoop();
    void wake(HubStream *stream);
    void add(HubStream *stream);
    void remove(HubStream *stream);   // from OnDone; waits while the pump is working on it

    store::EventStore &m_store;
    int m_listenerId = -1;
    std::atomic<int64_t> m_catchUps{0};

    std::mutex m_mutex;                          // guards everything below
    std::condition_variable m_cv;
    std::set<HubStream *> m_streams;
    std::deque<HubStream *> m_ready;
    HubStream *m_busy = nullptr;                 // the stream the pump is serving right now
    bool m_stopping = false;                     // streams are being ended
    bool m_exiting = false;                      // the pump exits once no stream is left
    std::thread m_pump;
    std::thread::id m_pumpId;
};

} // namespace paddock::server
