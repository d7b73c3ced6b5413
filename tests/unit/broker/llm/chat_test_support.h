#pragma once
// What the openai adapter's tests and the HTTP loop's tests share: a fake OpenAI-compatible chat
// completions server on 127.0.0.1 (cpp-httplib), an inbox for completion callbacks, and the
// process's thread count.
//
// Threads: the test's thread configures the server and reads what it recorded; httplib's workers
// (a pool of a fixed size, all started with the server) answer. Inbox callbacks may run on any thread.

#include <httplib.h>
#include <netinet/tcp.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace paddock::llm::test {

struct CannedResponse {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

struct ReceivedRequest {
    std::string path;
    std::string body;
    std::string authorization;
    std::string idempotencyKey;
    std::string contentType;
};

class FakeChatServer {
public:
    // threads: how many requests it can serve (or hold) at once.
    explicit FakeChatServer(size_t threads = 8)
    {
        // It may answer a request whose client gave up (a hang, a cancel): a write, not a SIGPIPE.
        std::signal(SIGPIPE, SIG_IGN);
        // The workers start after is_running() turns true; a test that counts threads waits for them.
        m_server.new_task_queue = [this, threads] {
            auto *pool = new httplib::ThreadPool(threads);
            std::lock_guard lock(m_mutex);
            m_workersStarted = true;
            m_changed.notify_all();
            return pool;
        };
        m_server.Post("/v1/chat/completions", [this](const httplib::Request &request, httplib::Response &response) {
            answer(request, response);
        });
        // httplib (built as a library here) listens with a backlog of 5: many clients connecting at
        // once would wait for SYN retransmits, seconds each. Listening again widens the queue.
        // TCP_NODELAY (inherited by accepted sockets) spares each answer on a kept-alive connection
        // a delayed ACK.
        socket_t listening = INVALID_SOCKET;
        m_server.set_socket_options([&listening](socket_t sock) {
            httplib::default_socket_options(sock);
            const int yes = 1;
            ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
            listening = sock;
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        if (listening != INVALID_SOCKET)
            ::listen(listening, 256);
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return m_workersStarted; });
    }

    ~FakeChatServer() { stop(); }
    FakeChatServer(const FakeChatServer &) = delete;
    FakeChatServer &operator=(const FakeChatServer &) = delete;

    int port() const { return m_port; }
    std::string baseUrl() const { return "http://127.0.0.1:" + std::to_string(m_port) + "/v1/"; }
    std::string chatUrl() const { return baseUrl() + "chat/completions"; }

    // The answers, in order; the last one repeats.
    void respond(std::vector<CannedResponse> responses)
    {
        std::lock_guard lock(m_mutex);
        m_responses = std::move(responses);
    }

    std::vector<ReceivedRequest> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

    // Requests wait unanswered until `count` wait at once, then all are answered, and so is every
    // later one. One held longer than kMaxHold is answered with 504 instead: a client that cannot
    // keep `count` requests open fails rather than hangs.
    void holdUntilOpen(int count)
    {
        std::lock_guard lock(m_mutex);
        m_holdUntil = count;
        m_released = false;
    }

    // Answers every held request (not the hanging ones) and holds no more.
    void release()
    {
        std::lock_guard lock(m_mutex);
        m_released = true;
        m_changed.notify_all();
    }

    // A request with this Idempotency-Key is read and never answered (until stop()).
    void hangOn(std::string idempotencyKey)
    {
        std::lock_guard lock(m_mutex);
        m_hangKey = std::move(idempotencyKey);
    }

    // Waits until `count` requests wait unanswered at once; false after kMaxHold.
    bool waitUntilHeld(int count)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, kMaxHold, [&] { return m_held >= count; });
    }

    // The most requests that waited unanswered at once.
    int mostHeld()
    {
        std::lock_guard lock(m_mutex);
        return m_mostHeld;
    }

    // Stops serving; what waits unanswered is let go.
    void stop()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
            m_changed.notify_all();
        }
        m_server.stop();
        if (m_thread.joinable())
            m_thread.join();
    }

    static constexpr std::chrono::seconds kMaxHold{20};

private:
    void answer(const httplib::Request &request, httplib::Response &response)
    {
        std::unique_lock lock(m_mutex);
        m_requests.push_back({request.path, request.body, request.get_header_value("Authorization"),
                              request.get_header_value("Idempotency-Key"), request.get_header_value("Content-Type")});
        const bool hang = !m_hangKey.empty() && m_requests.back().idempotencyKey == m_hangKey;
        if (hang || (m_holdUntil > 0 && !m_released)) {
            ++m_held;
            m_mostHeld = std::max(m_mostHeld, m_held);
            if (!hang && m_held >= m_holdUntil)
                m_released = true;
            m_changed.notify_all();
            const bool answered = m_changed.wait_for(lock, kMaxHold, [&] { return m_stopping || (!hang && m_released); });
            --m_held;
            if (!answered) {
                response.status = 504;
                response.set_content("the fake server held this request too long", "text/plain");
                return;
            }
        }
        const CannedResponse canned = m_responses.empty() ? CannedResponse{500, "no canned response left", {}}
                                                          : m_responses.front();
        if (m_responses.size() > 1)
            m_responses.erase(m_responses.begin());   // the last one repeats
        response.status = canned.status;
        for (const auto &[key, value] : canned.headers)
            response.set_header(key, value);
        response.set_content(canned.body, "application/json");
    }

    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<CannedResponse> m_responses;   // guarded by m_mutex, and so is what follows
    std::vector<ReceivedRequest> m_requests;
    int m_holdUntil = 0;
    bool m_released = false;
    std::string m_hangKey;
    int m_held = 0;
    int m_mostHeld = 0;
    bool m_stopping = false;
    bool m_workersStarted = false;
};

// What completion callbacks delivered, by the index the test gave each call.
template <typename T>
class Inbox {
public:
    std::function<void(T)> doneFor(int call)
    {
        return [this, call](T value) {
            std::lock_guard lock(m_mutex);
            m_delivered[call].push_back(std::move(value));
            m_order.push_back(call);
            m_threads.push_back(std::this_thread::get_id());
            m_changed.notify_all();
        };
    }

    // Waits until `calls` different calls have delivered; false after a generous limit.
    bool waitFor(size_t calls)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, std::chrono::seconds(30), [&] { return m_delivered.size() >= calls; });
    }

    size_t deliveries(int call)
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_delivered.find(call);
        return it == m_delivered.end() ? 0 : it->second.size();
    }

    // The first delivery of a call (which must have delivered).
    T first(int call)
    {
        std::lock_guard lock(m_mutex);
        return m_delivered.at(call).at(0);
    }

    std::vector<int> order()
    {
        std::lock_guard lock(m_mutex);
        return m_order;
    }

    std::vector<std::thread::id> threads()
    {
        std::lock_guard lock(m_mutex);
        return m_threads;
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::map<int, std::vector<T>> m_delivered;   // guarded by m_mutex, and so is what follows
    std::vector<int> m_order;
    std::vector<std::thread::id> m_threads;
};

// The threads of this process now.
inline size_t threadCount()
{
    size_t count = 0;
    for ([[maybe_unused]] const auto &entry : std::filesystem::directory_iterator("/proc/self/task"))
        ++count;
    return count;
}

} // namespace paddock::llm::test
