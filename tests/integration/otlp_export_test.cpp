// Issue 19's OTLP export through the real daemons: paddockd (with [otlp] in its broker.toml) and
// paddock-pool as processes, sessions of a scripted playbook that runs a command in a bubblewrap
// sandbox, and only the OTLP receiver faked (tests/support/fake_otlp_receiver.h: cpp-httplib on
// loopback, every payload checked against the OTLP JSON mapping).
// - The receiver gets the session's root span, a chat span per model call and an execute_tool span
//   per tool call, with the GenAI attributes and the values of the session's log.
// - kill -9 of the broker twice while a post is in flight (the receiver holds it, then refuses it),
//   restarted on the same store, with failing posts in between: every span arrives exactly once.
// - An endpoint that is down (nothing listens), then up, twice: nothing is lost, and the broker's log
//   has one line per outage.

#include "broker/otlp/span_mapping.h"
#include "tests/integration/daemons_fixture.h"
#include "tests/support/fake_otlp_receiver.h"

#include <sys/stat.h>

#include <set>
#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;
using otlp_check::attribute;

constexpr const char *kPlaybook = R"(name = "otlp-count"
goal = "Count the words of a greeting"

[[step]]
tool = "run_command"
command = "echo hello from otlp | wc -w"
expect_stdout = "3"

[[step]]
tool = "finish"
summary = "counted the words"
)";

constexpr const char *kAuthorization = "Basic cGstbGYtdGVzdDpzay1sZi10ZXN0";

class OtlpExport : public DaemonsTest {
protected:
    // receiverFirst: the receiver listens from the start (the outage test starts it later, on m_port).
    explicit OtlpExport(bool receiverFirst = true)
    {
        // The credential lives in a file of mode 0600 outside broker.toml (Langfuse's basic auth).
        m_auth = m_secrets.path() / "otlp.auth";
        std::ofstream(m_auth) << kAuthorization << "\n";
        ::chmod(m_auth.c_str(), 0600);
        m_port = receiverFirst ? (m_receiver.start() ? m_receiver.port() : -1) : freeLoopbackPort();
    }

    std::map<std::string, std::string> configFiles() const override
    {
        return {{"broker.toml", "[otlp]\n"
                                "endpoint = \"http://127.0.0.1:" + std::to_string(m_port) + "\"\n"
                                "header_files = { Authorization = \"" + m_auth.string() + "\" }\n"
                                "batch_size = 2\n"
                                "interval_ms = 50\n"
                                "max_backoff_ms = 300\n"
                                "timeout_ms = 5000\n"}};
    }

    void TearDown() override
    {
        if (HasFailure()) {
            for (const auto &post : m_receiver.posts())
                std::cerr << "post " << post.path << " -> " << post.status << " (" << post.items << " items)\n";
        }
        m_receiver.release({503, "", "{}"});
        DaemonsTest::TearDown();
    }

    void restartBroker()
    {
        auto broker = startBroker(*m_dir, m_pool->endpoint);
        ASSERT_TRUE(broker) << "paddockd did not start again on its store: " << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    // Submits the playbook `count` times (without following) and returns the ids.
    std::vector<std::string> submit(int count)
    {
        const auto playbook = writeFile("otlp-count.toml", kPlaybook);
        std::vector<std::string> ids;
        for (int i = 0; i < count; ++i) {
            const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
            EXPECT_EQ(submitted.exitCode, 0) << submitted.err;
            const json session = json::parse(submitted.out, nullptr, false);
            if (session.is_object() && session.contains("id"))
                ids.push_back(session["id"].get<std::string>());
        }
        return ids;
    }

    // Waits until every session has ended; true when all succeeded.
    bool allSucceed(const std::vector<std::string> &ids)
    {
        for (int round = 0; round < 1200; ++round) {
            const CliResult listed = cli({"ls", "--all", "--output", "json"});
            const json rows = json::parse(listed.out, nullptr, false);
            std::map<std::string, std::string> status;
            for (const auto &row : rows.is_array() ? rows : json::array())
                status[row.value("id", "")] = row.value("status", "");
            const bool ended = std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
                return status[id] == "succeeded" || status[id] == "failed" || status[id] == "cancelled";
            });
            if (ended) {
                return std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
                    EXPECT_EQ(status[id], "succeeded") << id;
                    return status[id] == "succeeded";
                });
            }
            std::this_thread::sleep_for(100ms);
        }
        ADD_FAILURE() << "the sessions did not end";
        return false;
    }

    // The span ids the sessions' logs make (span_mapping.h): the root, a chat span per model
    // response or error, an execute_tool span per tool call.
    std::set<std::string> expectedSpans(const std::vector<std::string> &ids)
    {
        std::set<std::string> out;
        for (const auto &id : ids) {
            out.insert(otlp::spanIdFor(id, "session", 0));
            for (const auto &e : eventsOf(id)) {
                const std::string kind = e.value("kind", "");
                if (kind == "model.response" || kind == "model.error")
                    out.insert(otlp::spanIdFor(id, "chat", e["seq"].get<int64_t>()));
                else if (kind == "tool.call")
                    out.insert(otlp::spanIdFor(id, "execute_tool", e["seq"].get<int64_t>()));
            }
        }
        return out;
    }

    bool receivedAll(const std::set<std::string> &expected, std::chrono::milliseconds timeout = 120s)
    {
        return m_receiver.waitUntil(timeout, [&](FakeOtlpReceiver &r) { return r.distinctSpansLocked() >= expected.size(); });
    }

    // Every span expected arrived exactly once, and nothing else; the payloads followed the mapping.
    void expectExactlyOnce(const std::set<std::string> &expected)
    {
        EXPECT_TRUE(m_receiver.problems().empty()) << ::testing::PrintToString(m_receiver.problems());
        EXPECT_TRUE(m_receiver.parentProblems().empty()) << ::testing::PrintToString(m_receiver.parentProblems());
        const auto counts = m_receiver.spanCounts();
        std::set<std::string> got;
        for (const auto &[id, count] : counts) {
            got.insert(id);
            EXPECT_EQ(count, 1) << "span " << id << " arrived " << count << " times";
        }
        EXPECT_EQ(got, expected);
    }

    size_t logLines(const std::string &needle)
    {
        const std::string log = m_broker->daemon.logText();
        size_t count = 0;
        for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
            ++count;
        return count;
    }

    TempDir m_secrets{"paddock-otlp-secret"};
    std::filesystem::path m_auth;
    FakeOtlpReceiver m_receiver;
    int m_port = -1;
};

TEST_F(OtlpExport, TheReceiverGetsTheSessionModelAndToolSpansWithTheLogsValues)
{
    const std::string id = submitAndFollow({"--playbook", writeFile("otlp-count.toml", kPlaybook).string()});
    ASSERT_FALSE(id.empty());
    const json events = eventsOf(id);
    const auto expected = expectedSpans({id});
    ASSERT_EQ(expected.size(), 5u) << "root, two model calls, run_command and finish: " << events.dump(1);
    ASSERT_TRUE(receivedAll(expected)) << m_receiver.spanCounts().size() << " of " << expected.size();
    // The token metrics go in posts of their own, one per export batch: wait until they count every
    // model call's input tokens the log holds (the check below says which were missing).
    int64_t logInput = 0;
    for (const auto &e : events) {
        if (e["kind"] == "model.response")
            logInput += e["payload"]["usage"]["input_tokens"].get<int64_t>();
    }
    const auto metricInputTokens = [this] {
        int64_t sum = 0;
        for (const auto &point : m_receiver.metricPoints()) {
            if (point["name"] == "gen_ai.client.token.usage" && attribute(point["point"], "gen_ai.token.type") == "input")
                sum += static_cast<int64_t>(point["point"]["sum"].get<double>());
        }
        return sum;
    };
    for (int round = 0; round < 300 && metricInputTokens() < logInput; ++round)
        std::this_thread::sleep_for(100ms);
    expectExactlyOnce(expected);

    std::map<std::string, json> spans;
    for (const auto &span : m_receiver.spans())
        spans[span["spanId"]] = span;
    const std::string traceId = otlp::traceIdFor(id);
    const json &root = spans[otlp::spanIdFor(id, "session", 0)];
    EXPECT_EQ(root["traceId"], traceId);
    EXPECT_FALSE(root.contains("parentSpanId"));
    EXPECT_EQ(root["name"], "invoke_agent default");
    EXPECT_EQ(attribute(root, "gen_ai.operation.name"), "invoke_agent");
    EXPECT_EQ(attribute(root, "gen_ai.conversation.id"), id);
    EXPECT_EQ(attribute(root, "gen_ai.provider.name"), "paddock.scripted");
    EXPECT_EQ(attribute(root, "paddock.session.status"), "succeeded");
    EXPECT_EQ(root["startTimeUnixNano"], std::to_string(events[0]["time_unix_ms"].get<int64_t>()) + "000000");

    int64_t input = 0, output = 0, costUntilEnd = 0, chats = 0, tools = 0;
    std::string sandbox, pool, tier;
    int64_t lastResponseSeq = 0;
    std::map<std::string, int64_t> callSeq;   // call_id -> its tool.call's seq
    const int64_t endSeq = attribute(root, "paddock.event.seq").get<int64_t>();
    for (const auto &e : events) {
        const std::string kind = e["kind"];
        const json &payload = e["payload"];
        const int64_t seq = e["seq"];
        if (seq <= endSeq)
            costUntilEnd += e.value("cost_micros", int64_t{0});
        if (kind == "sandbox.claimed") {
            sandbox = payload["sandbox_id"];
            pool = payload["pool"];
            tier = payload["tier"];
        } else if (kind == "model.response") {
            ++chats;
            const json &span = spans[otlp::spanIdFor(id, "chat", seq)];
            SCOPED_TRACE("model.response at seq " + std::to_string(seq));
            EXPECT_EQ(span["traceId"], traceId);
            EXPECT_EQ(span["parentSpanId"], root["spanId"]);
            EXPECT_EQ(span["kind"], 3);
            EXPECT_EQ(span["name"], "chat " + payload["model"].get<std::string>());
            EXPECT_EQ(attribute(span, "gen_ai.operation.name"), "chat");
            EXPECT_EQ(attribute(span, "gen_ai.provider.name"), "paddock.scripted");
            EXPECT_EQ(attribute(span, "gen_ai.request.model"), payload["model"]);
            EXPECT_EQ(attribute(span, "gen_ai.conversation.id"), id);
            // The scripted model reports tokens (about four characters a token of what it was sent).
            EXPECT_GT(payload["usage"]["input_tokens"].get<int64_t>(), 0);
            EXPECT_EQ(attribute(span, "gen_ai.usage.input_tokens"), payload["usage"]["input_tokens"]);
            EXPECT_EQ(attribute(span, "gen_ai.usage.output_tokens"), payload["usage"]["output_tokens"]);
            EXPECT_EQ(attribute(span, "gen_ai.usage.cache_read.input_tokens"), payload["usage"]["cached_tokens"]);
            EXPECT_EQ(span["endTimeUnixNano"], std::to_string(e["time_unix_ms"].get<int64_t>()) + "000000");
            EXPECT_EQ(attribute(span, "paddock.sandbox.id"), sandbox);
            input += payload["usage"]["input_tokens"].get<int64_t>();
            lastResponseSeq = seq;
            output += payload["usage"]["output_tokens"].get<int64_t>();
        } else if (kind == "cost" && payload.value("kind", "") == "model") {
            // The model call's price rides on its span.
            const json &span = spans[otlp::spanIdFor(id, "chat", lastResponseSeq)];
            EXPECT_DOUBLE_EQ(attribute(span, "paddock.cost_usd").get<double>(), e["cost_micros"].get<int64_t>() / 1e6);
        } else if (kind == "tool.call") {
            ++tools;
            callSeq[payload["call_id"]] = seq;
            const json &span = spans[otlp::spanIdFor(id, "execute_tool", seq)];
            SCOPED_TRACE("tool.call at seq " + std::to_string(seq));
            EXPECT_EQ(span["parentSpanId"], root["spanId"]);
            EXPECT_EQ(span["name"], "execute_tool " + payload["name"].get<std::string>());
            EXPECT_EQ(attribute(span, "gen_ai.operation.name"), "execute_tool");
            EXPECT_EQ(attribute(span, "gen_ai.tool.name"), payload["name"]);
            EXPECT_EQ(attribute(span, "gen_ai.tool.call.id"), payload["call_id"]);
            EXPECT_EQ(attribute(span, "gen_ai.conversation.id"), id);
            EXPECT_EQ(attribute(span, "paddock.tier"), tier);
            EXPECT_EQ(attribute(span, "paddock.pool"), pool);
            EXPECT_EQ(attribute(span, "paddock.sandbox.id"), sandbox);
            EXPECT_EQ(attribute(span, "error.type"), nullptr) << span.dump();
        } else if (kind == "tool.result" && payload["name"] == "run_command") {
            const json &span = spans[otlp::spanIdFor(id, "execute_tool", callSeq[payload["call_id"]])];
            EXPECT_EQ(attribute(span, "paddock.tool.exit_code"), payload["exit_code"]);
            EXPECT_EQ(span["endTimeUnixNano"], std::to_string(e["time_unix_ms"].get<int64_t>()) + "000000");
        }
    }
    EXPECT_EQ(chats, 2);
    EXPECT_EQ(tools, 2);
    EXPECT_FALSE(sandbox.empty());
    EXPECT_EQ(attribute(root, "gen_ai.usage.input_tokens"), input);
    EXPECT_EQ(attribute(root, "gen_ai.usage.output_tokens"), output);
    EXPECT_EQ(attribute(root, "paddock.tier"), tier);
    EXPECT_DOUBLE_EQ(attribute(root, "paddock.cost_usd").get<double>(), costUntilEnd / 1e6);

    // The metrics count the same tokens; the resource names the broker; the credential came from its file.
    EXPECT_EQ(input, logInput);
    EXPECT_EQ(metricInputTokens(), input);
    bool named = false;
    for (const auto &a : m_receiver.lastResource())
        named = named || (a["key"] == "service.name" && a["value"]["stringValue"] == "paddockd");
    EXPECT_TRUE(named) << m_receiver.lastResource().dump();
    for (const auto &post : m_receiver.posts())
        EXPECT_EQ(post.authorization, kAuthorization);
    EXPECT_EQ(m_broker->daemon.logText().find("cGstbGYtdGVzdDpzay1sZi10ZXN0"), std::string::npos)
        << "the credential is never logged";
}

TEST_F(OtlpExport, KillNineMidExportDeliversEverySpanExactlyOnce)
{
    // The first post waits at the receiver while the sessions run: the engine does not wait for it.
    m_receiver.hold();
    const auto ids = submit(6);
    ASSERT_EQ(ids.size(), 6u);
    ASSERT_TRUE(allSucceed(ids));
    const auto expected = expectedSpans(ids);
    ASSERT_EQ(expected.size(), 30u);
    ASSERT_TRUE(m_receiver.waitHeld(60s, 1));

    // Kill 1: a post in flight, never acknowledged.
    m_broker->daemon.kill9();
    ASSERT_TRUE(m_broker->daemon.waitExit(10s).has_value());
    m_receiver.release({503, "", "{}"});
    // Slow, and failing now and then, while the restarted broker catches up.
    m_receiver.setDelay(150ms);
    m_receiver.script({{200, "", "{}"}, {503, "0", "{}"}, {200, "", "{}"}, {429, "", "{}"}, {200, "", "{}"}});
    restartBroker();
    ASSERT_TRUE(m_receiver.waitUntil(60s, [](FakeOtlpReceiver &r) { return r.takenPostsLocked("/v1/traces") >= 3; }));

    // Kill 2: again with a post held, after some were taken.
    m_receiver.hold();
    ASSERT_TRUE(m_receiver.waitHeld(60s, 2));
    const size_t takenBefore = m_receiver.spanCounts().size();
    ASSERT_LT(takenBefore, expected.size()) << "the export ended before the second kill";
    m_broker->daemon.kill9();
    ASSERT_TRUE(m_broker->daemon.waitExit(10s).has_value());
    m_receiver.release({503, "", "{}"});
    m_receiver.setDelay(0ms);
    restartBroker();

    ASSERT_TRUE(receivedAll(expected)) << m_receiver.spanCounts().size() << " of " << expected.size();
    expectExactlyOnce(expected);
}

class OtlpEndpointDown : public OtlpExport {
protected:
    OtlpEndpointDown() : OtlpExport(false) {}
};

TEST_F(OtlpEndpointDown, NothingIsLostAndEachOutageIsLoggedOnce)
{
    const std::string down = "otlp: cannot export spans to http://127.0.0.1:" + std::to_string(m_port) + "/v1/traces";
    const std::string back = "otlp: http://127.0.0.1:" + std::to_string(m_port) + "/v1/traces accepts again";
    std::set<std::string> expected;
    for (int outage = 1; outage <= 2; ++outage) {
        SCOPED_TRACE("outage " + std::to_string(outage));
        // The engine is unaffected: the session runs to its end while nothing receives its spans.
        const auto ids = submit(1);
        ASSERT_EQ(ids.size(), 1u);
        ASSERT_TRUE(allSucceed(ids));
        for (const auto &span : expectedSpans(ids))
            expected.insert(span);
        for (int i = 0; i < 600 && logLines(down) < static_cast<size_t>(outage); ++i)
            std::this_thread::sleep_for(100ms);
        ASSERT_EQ(logLines(down), static_cast<size_t>(outage)) << m_broker->daemon.logTail(20);
        EXPECT_NE(m_broker->daemon.logText().find("check that the receiver runs"), std::string::npos);
        // Let it retry a while (max_backoff_ms is 300 here: a dozen attempts or more).
        std::this_thread::sleep_for(4s);
        ASSERT_TRUE(m_receiver.start(m_port)) << "port " << m_port << " was taken meanwhile";
        ASSERT_TRUE(receivedAll(expected));
        for (int i = 0; i < 600 && logLines(back) < static_cast<size_t>(outage); ++i)
            std::this_thread::sleep_for(100ms);
        EXPECT_EQ(logLines(back), static_cast<size_t>(outage));
        EXPECT_EQ(logLines(down), static_cast<size_t>(outage)) << "one line per outage, not per retry";
        ASSERT_TRUE(m_receiver.waitUntil(30s, [&](FakeOtlpReceiver &r) {
            return r.takenPostsLocked("/v1/metrics") >= static_cast<size_t>(outage);
        }));
        m_receiver.stop();
    }
    expectExactlyOnce(expected);
}

} // namespace
} // namespace paddock::test
