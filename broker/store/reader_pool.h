#pragma once
// The read connections of a store, both backends': a read borrows one for a single call and gives
// it back, so reads run in parallel with each other and with the writer. A few idle ones are kept
// (opening one costs a schema read or a server round trip); past that a returned one closes.
// Private to broker/store.
//
// Threads: any thread; m_mutex guards the idle connections. Connections are opened outside it.

#include "common/result.h"

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace paddock::store {

template <typename Connection>
class ReaderPool {
public:
    static constexpr size_t kMaxIdle = 8;

    // open: a new read connection (the backend's). closingMessage: what a read hears after close().
    ReaderPool(std::function<Result<Connection>()> open, std::string closingMessage)
        : m_open(std::move(open)), m_closingMessage(std::move(closingMessage))
    {
    }

    // An idle connection, or a new one; Unavailable once closed.
    Result<Connection> borrow()
    {
        {
            std::lock_guard lock(m_mutex);
            if (m_closed)
                return fail(ErrorCode::Unavailable, m_closingMessage);
            if (!m_idle.empty()) {
                Connection reader = std::move(m_idle.back());
                m_idle.pop_back();
                return reader;
            }
        }
        // Opening outside the lock: it reads from disk or waits for the server.
        return m_open();
    }

    void giveBack(Connection reader)
    {
        std::lock_guard lock(m_mutex);
        if (!m_closed && m_idle.size() < kMaxIdle)
            m_idle.push_back(std::move(reader));
        // Otherwise it closes here.
    }

    // Opens one connection at open(), so a file or server that refuses readers shows there, not
    // at the first read.
    Status probe()
    {
        auto reader = borrow();
        if (!reader)
            return std::unexpected(reader.error());
        giveBack(std::move(*reader));
        return {};
    }

    // Closes the idle connections (they went stale: the server restarted, say).
    void dropIdle()
    {
        std::lock_guard lock(m_mutex);
        m_idle.clear();
    }

    // Closes the idle connections; borrowed ones close when given back.
    void close()
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
        m_idle.clear();
    }

private:
    const std::function<Result<Connection>()> m_open;
    const std::string m_closingMessage;
    std::mutex m_mutex;
    std::vector<Connection> m_idle;
    bool m_closed = false;
};

} // namespace paddock::store
