#pragma once
// A server stream fed from a thread of the broker's own (operator_service's workers,
// sample_watch's poller): push() queues a message, finish() ends the call once the queue is
// written. One write in flight; gRPC's reactions only dequeue.
//
// When the queue is full, push() either waits for room (Overflow::Wait: downloads and debug-shell
// output, where every byte matters) or drops the oldest message (Overflow::DropOldest: live
// samples, where a slow reader wants the newest).
//
// Lifetime: OnDone() calls released(), which by default deletes the writer; a subclass shared
// with another owner overrides it.
//
// Threads: push(), finish() and broken() may be called from any thread; the On* reactions come
// from gRPC's callback threads.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace paddock::server {

template <typename Msg>
class QueuedWriter : public grpc::ServerWriteReactor<Msg> {
public:
    enum class Overflow { Wait, DropOldest };

    QueuedWriter(size_t maxQueued, Overflow overflow) : m_maxQueued(maxQueued), m_overflow(overflow) {}

    // false: the client went away; stop producing.
    bool push(Msg msg)
    {
        {
            std::unique_lock lock(m_mutex);
            if (m_overflow == Overflow::Wait)
                m_room.wait(lock, [&] { return m_broken || m_queue.size() < m_maxQueued; });
            if (m_broken)
                return false;
            if (m_queue.size() >= m_maxQueued)
                m_queue.pop_front();
            m_queue.push_back(std::move(msg));
        }
        pump();
        return true;
    }

    // Ends the call with status after the queued messages (CANCELLED if the client went away).
    // Only the first call counts.
    void finish(grpc::Status status)
    {
        {
            std::lock_guard lock(m_mutex);
            if (m_finishing)
                return;
            m_finishing = true;
            m_status = std::move(status);
        }
        pump();
    }

    bool broken() const
    {
        std::lock_guard lock(m_mutex);
        return m_broken;
    }

    void OnWriteDone(bool ok) override
    {
        {
            std::lock_guard lock(m_mutex);
            m_writing = false;
            if (!ok) {
                m_broken = true;
                m_queue.clear();
            }
        }
        m_room.notify_all();
        pump();
    }
    void OnCancel() override
    {
        {
            std::lock_guard lock(m_mutex);
            m_broken = true;
        }
        m_room.notify_all();
    }
    void OnDone() override { released(); }

protected:
    // gRPC is done with this call. Nothing of this object may be used after it returns.
    virtual void released() { delete this; }

private:
    void pump()
    {
        enum { Nothing, Write, Finish } what = Nothing;
        grpc::Status status;
        {
            std::lock_guard lock(m_mutex);
            if (m_writing || m_finished)
                return;
            if (!m_queue.empty() && !m_broken) {
                m_current = std::move(m_queue.front());
                m_queue.pop_front();
                m_writing = true;
                what = Write;
            } else if (m_finishing) {
                m_finished = true;
                status = m_broken ? grpc::Status(grpc::StatusCode::CANCELLED, "the client went away") : m_status;
                what = Finish;
            }
        }
        if (what == Write) {
            m_room.notify_all();
            this->StartWrite(&m_current);
        } else if (what == Finish) {
            this->Finish(status);
        }
    }

    const size_t m_maxQueued;
    const Overflow m_overflow;
    mutable std::mutex m_mutex;
    std::condition_variable m_room;
    std::deque<Msg> m_queue;
    Msg m_current;
    grpc::Status m_status;
    bool m_writing = false;
    bool m_finishing = false;
    bool m_finished = false;
    bool m_broken = false;
};

} // namespace paddock::server
