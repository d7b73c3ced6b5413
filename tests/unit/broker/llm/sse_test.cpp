// The server-sent events parser (broker/llm/sse.h): the same events however the bytes are chunked,
// every line ending, comments and multi-line data, and input that is not SSE named.

#include "broker/llm/sse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace paddock::llm {
namespace {

using ::testing::HasSubstr;

const std::string kSample = ": a comment to keep the connection open\n"
                            "event: message_start\r\n"
                            "data: {\"type\":\"message_start\"}\r\n"
                            "\r\n"
                            "data: line one\r"
                            "data:line two\r"
                            "id: 7\r"
                            "retry: 100\r"
                            "\r"
                            "event: ping\n"
                            "data: \n"
                            "\n"
                            "data: caf\xc3\xa9 [DONE]\n\n";

std::vector<SseEvent> parseAll(const std::vector<std::string_view> &chunks)
{
    SseParser parser;
    std::vector<SseEvent> events;
    for (const auto chunk : chunks)
        EXPECT_TRUE(parser.feed(chunk, events));
    EXPECT_TRUE(parser.finish());
    return events;
}

TEST(SseParserTest, ReadsEventsWithEveryLineEndingCommentsAndMultiLineData)
{
    const auto events = parseAll({kSample});
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0].event, "message_start");
    EXPECT_EQ(events[0].data, "{\"type\":\"message_start\"}");
    EXPECT_EQ(events[1].data, "line one\nline two");
    EXPECT_EQ(events[1].id, "7");
    EXPECT_EQ(events[2].event, "ping");
    EXPECT_EQ(events[2].data, "");
    EXPECT_EQ(events[3].data, "caf\xc3\xa9 [DONE]");
}

TEST(SseParserTest, AChunkSplitAtEveryBytePositionGivesTheSameEvents)
{
    const auto whole = parseAll({kSample});
    for (size_t at = 0; at <= kSample.size(); ++at) {
        const std::string_view sample(kSample);
        const auto split = parseAll({sample.substr(0, at), sample.substr(at)});
        ASSERT_EQ(split.size(), whole.size()) << "split at " << at;
        for (size_t i = 0; i < whole.size(); ++i) {
            EXPECT_EQ(split[i].event, whole[i].event) << "split at " << at;
            EXPECT_EQ(split[i].data, whole[i].data) << "split at " << at;
            EXPECT_EQ(split[i].id, whole[i].id) << "split at " << at;
        }
    }
    // And one byte at a time.
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < kSample.size(); ++i)
        bytes.push_back(std::string_view(kSample).substr(i, 1));
    EXPECT_EQ(parseAll(bytes).size(), whole.size());
}

TEST(SseParserTest, InputThatIsNotSseIsNamed)
{
    SseParser parser;
    std::vector<SseEvent> events;
    auto fed = parser.feed("data: {}\n\n<html>502 Bad Gateway</html>\n\n", events);
    ASSERT_FALSE(fed);
    EXPECT_EQ(fed.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(fed.error().message, HasSubstr("not a server-sent event field"));
    EXPECT_THAT(fed.error().message, HasSubstr("<html>502 Bad Gateway</html>"));
    EXPECT_EQ(events.size(), 1u);   // what came before it was read
    EXPECT_FALSE(parser.feed("data: more\n\n", events));   // and nothing after
}

TEST(SseParserTest, AStreamThatEndsInsideAnEventIsNamed)
{
    SseParser parser;
    std::vector<SseEvent> events;
    ASSERT_TRUE(parser.feed("data: {\"partial\":", events));
    auto finished = parser.finish();
    ASSERT_FALSE(finished);
    EXPECT_THAT(finished.error().message, HasSubstr("ended inside an event"));
}

} // namespace
} // namespace paddock::llm
