#pragma once
// A fake Anthropic Messages API on 127.0.0.1 (cpp-httplib), shared by the anthropic adapter's unit
// tests and the end-to-end tests. It checks each request the way the real API does and refuses,
// with the real API's error shape ({"type": "error", "error": {"type", "message"}}) and status, what
// the real API would refuse: a wrong or missing x-api-key (401), a missing or unknown
// anthropic-version, a body that is not JSON or has unknown top-level keys, no max_tokens, a first
// message that is not the user's, roles that do not alternate, empty or whitespace-only text, a
// tool_use without a tool_result right after it (or a tool_result without its tool_use, or after
// text), malformed tools, more than four cache_control breakpoints (all 400). A valid request gets
// the next canned response, or what the responder makes of it.
//
// Threads: the test's thread configures it and reads what it recorded; httplib's workers answer.

#include "tests/unit/broker/llm/chat_test_support.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <csignal>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::llm::test {

struct AnthropicRequest {
    std::string path;
    std::string apiKey;             // x-api-key
    std::string version;            // anthropic-version
    std::string idempotencyKey;
    nlohmann::json body;            // null when it was not JSON
};

class FakeAnthropicServer {
public:
    // What a valid request is answered with, when set (instead of the canned responses).
    using Responder = std::function<CannedResponse(const nlohmann::json &body)>;

    explicit FakeAnthropicServer(std::string apiKey = "sk-ant-test", size_t threads = 4)
        : m_apiKey(std::move(apiKey))
    {
        std::signal(SIGPIPE, SIG_IGN);
        // Serving starts once the task queue is made: stop() before that would not end listen().
        m_server.new_task_queue = [this, threads] {
            auto *pool = new httplib::ThreadPool(threads);
            std::lock_guard lock(m_mutex);
            m_serving = true;
            m_started.notify_all();
            return pool;
        };
        m_server.Post(".*", [this](const httplib::Request &request, httplib::Response &response) {
            answer(request, response);
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
        std::unique_lock lock(m_mutex);
        m_started.wait(lock, [this] { return m_serving; });
    }

    ~FakeAnthropicServer() { stop(); }
    FakeAnthropicServer(const FakeAnthropicServer &) = delete;
    FakeAnthropicServer &operator=(const FakeAnthropicServer &) = delete;

    std::string baseUrl() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    std::string messagesUrl() const { return baseUrl() + "/v1/messages"; }
    const std::string &apiKey() const { return m_apiKey; }

    // The answers to valid requests, in order; the last one repeats.
    void respond(std::vector<CannedResponse> responses)
    {
        std::lock_guard lock(m_mutex);
        m_responses = std::move(responses);
        m_responder = nullptr;
    }

    void respondWith(Responder responder)
    {
        std::lock_guard lock(m_mutex);
        m_responder = std::move(responder);
    }

    // Every request received, valid or not.
    std::vector<AnthropicRequest> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

    // The messages of each refused request: why the real API would have refused it.
    std::vector<std::string> refusals()
    {
        std::lock_guard lock(m_mutex);
        return m_refusals;
    }

    void stop()
    {
        m_server.stop();
        if (m_thread.joinable())
            m_thread.join();
    }

    // The API's error body.
    static std::string errorBody(const std::string &type, const std::string &message)
    {
        return nlohmann::json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}},
                              {"request_id", "req_fake"}}
            .dump();
    }

    // A message as the API answers it.
    static std::string messageBody(nlohmann::json content, const std::string &stopReason, nlohmann::json usage = nullptr,
                                   const std::string &model = "claude-fake-1")
    {
        if (usage.is_null())
            usage = {{"input_tokens", 100}, {"output_tokens", 20}, {"cache_creation_input_tokens", 0},
                     {"cache_read_input_tokens", 0}};
        return nlohmann::json{{"id", "msg_fake"},   {"type", "message"},         {"role", "assistant"},
                              {"model", model},     {"content", std::move(content)}, {"stop_reason", stopReason},
                              {"stop_sequence", nullptr}, {"usage", std::move(usage)}}
            .dump();
    }

    static nlohmann::json toolUse(const std::string &id, const std::string &name, nlohmann::json input)
    {
        return {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", std::move(input)}};
    }

    // A message as the streamed API sends it: message_start, ping, each block's start, deltas and
    // stop, message_delta, message_stop.
    static std::vector<std::string> messageEvents(const nlohmann::json &message)
    {
        using nlohmann::json;
        std::vector<std::string> events;
        auto send = [&](const std::string &type, json data) {
            data["type"] = type;
            events.push_back("event: " + type + "\r\ndata: " + data.dump() + "\r\n\r\n");
        };
        json start = message;
        start["content"] = json::array();
        start["stop_reason"] = nullptr;
        start["usage"]["output_tokens"] = 1;
        send("message_start", {{"message", start}});
        send("ping", json::object());
        const json &content = message["content"];
        for (size_t i = 0; i < content.size(); ++i) {
            const json &block = content[i];
            if (block["type"] == "tool_use") {
                send("content_block_start", {{"index", i}, {"content_block", {{"type", "tool_use"}, {"id", block["id"]},
                                                                               {"name", block["name"]}, {"input", json::object()}}}});
                for (const std::string &piece : piecesOf(block["input"].dump(), 7))
                    send("content_block_delta", {{"index", i}, {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}});
            } else {
                send("content_block_start", {{"index", i}, {"content_block", {{"type", "text"}, {"text", ""}}}});
                for (const std::string &piece : piecesOf(block.value("text", ""), 5))
                    send("content_block_delta", {{"index", i}, {"delta", {{"type", "text_delta"}, {"text", piece}}}});
            }
            send("content_block_stop", {{"index", i}});
        }
        send("message_delta", {{"delta", {{"stop_reason", message["stop_reason"]}, {"stop_sequence", nullptr}}},
                               {"usage", {{"output_tokens", message["usage"]["output_tokens"]}}}});
        send("message_stop", json::object());
        return events;
    }

    // How the next streamed answers are streamed, in order (then plainly).
    void streamPlans(std::vector<StreamPlan> plans)
    {
        std::lock_guard lock(m_mutex);
        m_plans = std::move(plans);
    }
    StreamGate &streamGate() { return *m_gate; }

    static nlohmann::json text(const std::string &value) { return {{"type", "text"}, {"text", value}}; }

    // Why the real Messages API would refuse this body (400 invalid_request_error), or nullopt.
    static std::optional<std::string> invalidBody(const nlohmann::json &body)
    {
        using nlohmann::json;
        if (!body.is_object())
            return "the body must be a JSON object";
        static const std::set<std::string> kKeys{"model", "max_tokens", "messages", "system", "tools", "tool_choice",
                                                 "metadata", "stop_sequences", "stream", "temperature", "top_k",
                                                 "top_p", "thinking", "service_tier"};
        for (const auto &[key, value] : body.items()) {
            if (!kKeys.contains(key))
                return key + ": Extra inputs are not permitted";
        }
        if (!body.contains("model") || !body["model"].is_string() || body["model"].get<std::string>().empty())
            return "model: Field required";
        if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1)
            return "max_tokens: Field required (an integer of at least 1)";
        int breakpoints = 0;
        auto cacheControl = [&](const json &block, const std::string &where) -> std::optional<std::string> {
            if (!block.contains("cache_control"))
                return std::nullopt;
            ++breakpoints;
            const json &control = block["cache_control"];
            if (!control.is_object() || control.value("type", "") != "ephemeral")
                return where + ".cache_control: type must be 'ephemeral'";
            return std::nullopt;
        };
        auto textProblem = [&](const json &block, const std::string &where) -> std::optional<std::string> {
            if (!block.contains("text") || !block["text"].is_string())
                return where + ".text: Field required";
            const std::string &value = block["text"].get_ref<const std::string &>();
            if (value.empty())
                return where + ": text content blocks must be non-empty";
            if (value.find_first_not_of(" \t\r\n") == std::string::npos)
                return where + ": text content blocks must contain non-whitespace text";
            return cacheControl(block, where);
        };

        if (body.contains("system")) {
            const json &system = body["system"];
            if (system.is_array()) {
                for (size_t i = 0; i < system.size(); ++i) {
                    const std::string where = "system." + std::to_string(i);
                    if (!system[i].is_object() || system[i].value("type", "") != "text")
                        return where + ": system blocks must be text blocks";
                    if (auto problem = textProblem(system[i], where))
                        return problem;
                }
            } else if (!system.is_string()) {
                return "system: Input should be a valid string or a list of text blocks";
            }
        }

        std::set<std::string> toolNames;
        if (body.contains("tools")) {
            if (!body["tools"].is_array())
                return "tools: Input should be a valid list";
            static const std::regex kName("^[a-zA-Z0-9_-]{1,64}$");
            for (size_t i = 0; i < body["tools"].size(); ++i) {
                const json &tool = body["tools"][i];
                const std::string where = "tools." + std::to_string(i);
                if (!tool.is_object())
                    return where + ": Input should be an object";
                for (const auto &[key, value] : tool.items()) {
                    if (key != "name" && key != "description" && key != "input_schema" && key != "cache_control")
                        return where + "." + key + ": Extra inputs are not permitted";
                }
                const std::string name = tool.value("name", "");
                if (!std::regex_match(name, kName))
                    return where + ".name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'";
                if (!toolNames.insert(name).second)
                    return "tools: Tool names must be unique";
                if (!tool.contains("input_schema") || !tool["input_schema"].is_object()
                    || tool["input_schema"].value("type", "") != "object")
                    return where + ".input_schema.type: Input should be 'object'";
                if (auto problem = cacheControl(tool, where))
                    return problem;
            }
        }

        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
            return "messages: at least one message is required";
        const json &messages = body["messages"];
        static const std::regex kToolId("^[a-zA-Z0-9_-]+$");
        std::set<std::string> openToolUses;   // the previous assistant message's tool_use ids
        bool anyToolBlock = false;
        for (size_t m = 0; m < messages.size(); ++m) {
            const json &message = messages[m];
            const std::string where = "messages." + std::to_string(m);
            const std::string role = message.is_object() ? message.value("role", "") : "";
            if (role != "user" && role != "assistant")
                return where + ".role: Input should be 'user' or 'assistant'";
            if (m == 0 && role != "user")
                return "messages: first message must use the \"user\" role";
            if (m > 0 && messages[m - 1].value("role", "") == role)
                return "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"" + role
                    + "\" roles in a row";
            if (!message.contains("content"))
                return where + ".content: Field required";
            const json &content = message["content"];
            std::set<std::string> answered;
            std::set<std::string> usedHere;
            if (content.is_string()) {
                if (content.get<std::string>().empty())
                    return where + ": all messages must have non-empty content";
            } else if (!content.is_array() || content.empty()) {
                return where + ": all messages must have non-empty content";
            } else {
                bool sawOther = false;
                for (size_t b = 0; b < content.size(); ++b) {
                    const json &block = content[b];
                    const std::string at = where + ".content." + std::to_string(b);
                    const std::string type = block.is_object() ? block.value("type", "") : "";
                    if (type == "text") {
                        if (auto problem = textProblem(block, at))
                            return problem;
                        sawOther = true;
                    } else if (type == "tool_use") {
                        anyToolBlock = true;
                        if (role != "assistant")
                            return at + ": tool_use blocks may only appear in assistant messages";
                        const std::string id = block.value("id", "");
                        if (!std::regex_match(id, kToolId))
                            return at + ".id: String should match pattern '^[a-zA-Z0-9_-]+$'";
                        if (!block.contains("name") || !block["name"].is_string())
                            return at + ".name: Field required";
                        if (!block.contains("input") || !block["input"].is_object())
                            return at + ".input: Input should be a valid dictionary";
                        if (!usedHere.insert(id).second)
                            return at + ": tool_use ids must be unique";
                        if (auto problem = cacheControl(block, at))
                            return problem;
                        sawOther = true;
                    } else if (type == "tool_result") {
                        anyToolBlock = true;
                        if (role != "user")
                            return at + ": tool_result blocks may only appear in user messages";
                        if (sawOther)
                            return at + ": tool_result blocks must come first in the content of a user message";
                        const std::string id = block.value("tool_use_id", "");
                        if (!openToolUses.contains(id))
                            return where + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id
                                + ". Each `tool_result` block must have a corresponding `tool_use` block in the "
                                  "previous message.";
                        answered.insert(id);
                        if (block.contains("is_error") && !block["is_error"].is_boolean())
                            return at + ".is_error: Input should be a valid boolean";
                        if (block.contains("content") && !block["content"].is_string() && !block["content"].is_array())
                            return at + ".content: Input should be a valid string or list";
                        if (auto problem = cacheControl(block, at))
                            return problem;
                    } else {
                        return at + ".type: Input tag '" + type + "' is not one this fake knows";
                    }
                }
            }
            if (role == "user") {
                for (const std::string &id : openToolUses) {
                    if (!answered.contains(id))
                        return "messages." + std::to_string(m - 1) + ": `tool_use` ids were found without "
                               "`tool_result` blocks immediately after: " + id + ". Each `tool_use` block must have "
                               "a corresponding `tool_result` block in the next message.";
                }
                openToolUses.clear();
            } else {
                openToolUses = usedHere;
            }
        }
        if (!openToolUses.empty())
            return "messages." + std::to_string(messages.size() - 1) + ": `tool_use` ids were found without "
                   "`tool_result` blocks immediately after: " + *openToolUses.begin();
        if (anyToolBlock && toolNames.empty())
            return "Requests which include `tool_use` or `tool_result` blocks must define tools.";
        if (breakpoints > 4)
            return "A maximum of 4 blocks with cache_control may be provided. Found " + std::to_string(breakpoints) + ".";
        return std::nullopt;
    }

private:
    void answer(const httplib::Request &request, httplib::Response &response)
    {
        std::unique_lock lock(m_mutex);
        AnthropicRequest received{request.path, request.get_header_value("x-api-key"),
                                  request.get_header_value("anthropic-version"),
                                  request.get_header_value("Idempotency-Key"),
                                  nlohmann::json::parse(request.body, nullptr, false)};
        if (received.body.is_discarded())
            received.body = nullptr;
        m_requests.push_back(received);
        auto refuse = [&](int status, const std::string &type, const std::string &message) {
            m_refusals.push_back(message);
            response.status = status;
            response.set_content(errorBody(type, message), "application/json");
        };
        if (request.path != "/v1/messages")
            return refuse(404, "not_found_error", "Not Found: " + request.path);
        if (received.apiKey != m_apiKey)
            return refuse(401, "authentication_error", "invalid x-api-key");
        if (received.version.empty())
            return refuse(400, "invalid_request_error", "anthropic-version: header is required");
        if (received.version != "2023-06-01" && received.version != "2023-01-01")
            return refuse(400, "invalid_request_error",
                          "anthropic-version: '" + received.version + "' is not a valid version");
        if (request.get_header_value("Content-Type").find("application/json") != 0)
            return refuse(400, "invalid_request_error", "content-type must be application/json");
        if (received.body.is_null())
            return refuse(400, "invalid_request_error", "There was an error parsing the body: invalid JSON");
        if (auto problem = invalidBody(received.body))
            return refuse(400, "invalid_request_error", *problem);

        CannedResponse canned;
        if (m_responder) {
            Responder responder = m_responder;
            lock.unlock();
            canned = responder(received.body);
            lock.lock();
        } else {
            canned = m_responses.empty() ? CannedResponse{500, errorBody("api_error", "no canned response left"), {}}
                                         : m_responses.front();
            if (m_responses.size() > 1)
                m_responses.erase(m_responses.begin());   // the last one repeats
        }
        response.status = canned.status;
        for (const auto &[key, value] : canned.headers)
            response.set_header(key, value);
        const nlohmann::json message = nlohmann::json::parse(canned.body, nullptr, false);
        if (received.body.value("stream", false) && canned.status == 200 && message.is_object()
            && message.value("type", "") == "message" && message.contains("content") && message["content"].is_array()) {
            StreamPlan plan;
            if (!m_plans.empty()) {
                plan = m_plans.front();
                m_plans.erase(m_plans.begin());
            }
            streamEvents(response, messageEvents(message), plan, m_gate);
            return;
        }
        response.set_content(canned.body, "application/json");
    }

    std::vector<StreamPlan> m_plans;   // guarded by m_mutex
    std::shared_ptr<StreamGate> m_gate = std::make_shared<StreamGate>();
    const std::string m_apiKey;
    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
    std::mutex m_mutex;
    std::condition_variable m_started;
    bool m_serving = false;                    // guarded by m_mutex, and so is what follows
    std::vector<CannedResponse> m_responses;
    Responder m_responder;
    std::vector<AnthropicRequest> m_requests;
    std::vector<std::string> m_refusals;
};

} // namespace paddock::llm::test
