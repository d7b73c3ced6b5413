#pragma once
// What the openai adapter's tests and the HTTP loop's tests share: a fake OpenAI-compatible chat
// completions server on 127.0.0.1 (cpp-httplib), an inbox for completion callbacks, and the
// process's thread count.
//
// Threads: the test's thread configures the server and reads what it recorded; httplib's workers
// (a pool of a fixed size, all started with the server) answer. Inbox callbacks may run on any thread.

#include <httplib.h>
#include <netinet/tcp.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
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

// How the fakes stream an answer when the request asks for one (stream: true): the answer's
// server-sent events, cut (the connection closed) before event cutAfter, a line that is not SSE
// sent before event malformedAt, or held before event holdAfter (and again before holdAgainAfter)
// until StreamGate::release().
struct StreamPlan {
    int cutAfter = -1;
    int malformedAt = -1;
    int holdAfter = -1;
    int holdAgainAfter = -1;
};

// Holds streams (StreamPlan::holdAfter) until the test releases them; counts the holds. Each
// release() lets one hold go, in the order they came (a release before a hold lets it pass).
class StreamGate {
public:
    void release()
    {
        std::lock_guard lock(m_mutex);
        ++m_releases;
        m_changed.notify_all();
    }
    int held()
    {
        std::lock_guard lock(m_mutex);
        return m_held;
    }
    // False when the test never released it (a generous limit).
    bool hold()
    {
        std::unique_lock lock(m_mutex);
        const int mine = m_held++;
        m_changed.notify_all();
        return m_changed.wait_for(lock, std::chrono::seconds(30), [&] { return m_releases > mine; });
    }
    // Waits until `count` holds have begun; false after a generous limit.
    bool waitUntilHeld(int count)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, std::chrono::seconds(60), [&] { return m_held >= count; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    int m_releases = 0;
    int m_held = 0;
};

// Sends `events` (each a whole SSE event, blank line included) as a chunked text/event-stream, as
// the plan says.
inline void streamEvents(httplib::Response &response, std::vector<std::string> events, StreamPlan plan,
                         std::shared_ptr<StreamGate> gate)
{
    response.set_chunked_content_provider(
        "text/event-stream", [events = std::move(events), plan, gate](size_t, httplib::DataSink &sink) {
            for (size_t i = 0; i < events.size(); ++i) {
                const int at = static_cast<int>(i);
                if (at == plan.cutAfter)
                    return false;   // the connection closes mid-stream
                if ((at == plan.holdAfter || at == plan.holdAgainAfter) && !gate->hold())
                    return false;
                if (at == plan.malformedAt) {
                    const std::string garbage = "<html>502 Bad Gateway</html>\n\n";
                    sink.write(garbage.data(), garbage.size());
                }
                if (!sink.write(events[i].data(), events[i].size()))
                    return false;
            }
            sink.done();
            return true;
        });
}

// Pieces of `text` of at most `size` bytes (the fakes' deltas).
inline std::vector<std::string> piecesOf(const std::string &text, size_t size)
{
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size(); at += size)
        pieces.push_back(text.substr(at, size));
    return pieces;
}

// A chat.completion body as chat.completion.chunk events, then the usage chunk and [DONE].
inline std::vector<std::string> chatCompletionEvents(const nlohmann::json &completion)
{
    using nlohmann::json;
    std::vector<std::string> events;
    auto chunk = [&](json choice, json usage = nullptr) {
        json data{{"id", "chatcmpl-fake"}, {"object", "chat.completion.chunk"},
                  {"model", completion.value("model", "fake-model")},
                  {"choices", choice.is_null() ? json::array() : json::array({choice})}};
        if (!usage.is_null())
            data["usage"] = usage;
        events.push_back("data: " + data.dump() + "\n\n");
    };
    const json &choice = completion["choices"][0];
    const json &message = choice["message"];
    chunk({{"index", 0}, {"delta", {{"role", "assistant"}}}, {"finish_reason", nullptr}});
    if (message.contains("content") && message["content"].is_string()) {
        for (const std::string &piece : piecesOf(message["content"].get<std::string>(), 5))
            chunk({{"index", 0}, {"delta", {{"content", piece}}}, {"finish_reason", nullptr}});
    }
    if (message.contains("tool_calls") && message["tool_calls"].is_array()) {
        for (size_t i = 0; i < message["tool_calls"].size(); ++i) {
            const json &call = message["tool_calls"][i];
            json first{{"index", i}, {"type", "function"}, {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}};
            if (call.contains("id"))
                first["id"] = call["id"];
            chunk({{"index", 0}, {"delta", {{"tool_calls", json::array({first})}}}, {"finish_reason", nullptr}});
            const json &arguments = call["function"]["arguments"];
            for (const std::string &piece : piecesOf(arguments.is_string() ? arguments.get<std::string>() : arguments.dump(), 7))
                chunk({{"index", 0},
                       {"delta", {{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", piece}}}}})}}},
                       {"finish_reason", nullptr}});
        }
    }
    chunk({{"index", 0}, {"delta", json::object()}, {"finish_reason", choice.value("finish_reason", json(nullptr))}});
    if (completion.contains("usage"))
        chunk(nullptr, completion["usage"]);
    events.push_back("data: [DONE]\n\n");
    return events;
}

// A chat.completion body whose assistant message says `content` (null: nothing) and calls one
// tool, with the usage given.
inline std::string toolCallCompletion(const std::string &id, const std::string &name, const nlohmann::json &arguments,
                                      const nlohmann::json &content = nullptr, int promptTokens = 100,
                                      int completionTokens = 20)
{
    using nlohmann::json;
    const json call{{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments.dump()}}}};
    return json{{"id", "chatcmpl-" + id},
                {"object", "chat.completion"},
                {"model", "gpt-test"},
                {"choices",
                 json::array({{{"index", 0},
                               {"finish_reason", "tool_calls"},
                               {"message", {{"role", "assistant"}, {"content", content}, {"tool_calls", json::array({call})}}}}})},
                {"usage",
                 {{"prompt_tokens", promptTokens},
                  {"completion_tokens", completionTokens},
                  {"total_tokens", promptTokens + completionTokens}}}}
        .dump();
}

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

    // How the next streamed answers are streamed, in order (then plainly).
    void streamPlans(std::vector<StreamPlan> plans)
    {
        std::lock_guard lock(m_mutex);
        m_plans = std::move(plans);
    }
    StreamGate &streamGate() { return *m_gate; }

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
        // Asked to stream: a completion goes as server-sent events (anything else, an error or a
        // body that is not a completion, as it is).
        const nlohmann::json asked = nlohmann::json::parse(request.body, nullptr, false);
        const nlohmann::json completion = nlohmann::json::parse(canned.body, nullptr, false);
        if (asked.is_object() && asked.value("stream", false) && canned.status == 200 && completion.is_object()
            && completion.contains("choices") && completion["choices"].is_array() && !completion["choices"].empty()
            && completion["choices"][0].is_object() && completion["choices"][0].contains("message")
            && completion["choices"][0]["message"].is_object()) {
            StreamPlan plan;
            if (!m_plans.empty()) {
                plan = m_plans.front();
                m_plans.erase(m_plans.begin());
            }
            streamEvents(response, chatCompletionEvents(completion), plan, m_gate);
            return;
        }
        response.set_content(canned.body, "application/json");
    }

    std::vector<StreamPlan> m_plans;   // guarded by m_mutex
    std::shared_ptr<StreamGate> m_gate = std::make_shared<StreamGate>();
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
