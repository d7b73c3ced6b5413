// A model server's streamed answer, as a misconfigured base_url, a proxy's error page or a hostile
// server could send it: the bytes go through the SSE parser (broker/llm/sse.h) and an adapter's
// stream decoder (openai or anthropic, by the first byte), cut in two at a point the second byte
// picks, then the gathered answer through the adapter's parseResponse. Never crash, never throw.
// Checked on the way:
// - the parser gives the same events (or the same refusal) whether the bytes come whole or cut;
// - an openai answer that parses is exactly the text its deltas streamed.

#include "broker/llm/anthropic_model.h"
#include "broker/llm/openai_model.h"
#include "broker/llm/sse.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace paddock::llm;

bool sameEvents(const std::vector<SseEvent> &a, const std::vector<SseEvent> &b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].event != b[i].event || a[i].data != b[i].data || a[i].id != b[i].id)
            return false;
    }
    return true;
}

// Every event the parser gives for `parts` fed in turn, and whether it accepted them all and the end.
std::pair<std::vector<SseEvent>, bool> parse(const std::vector<std::string_view> &parts)
{
    SseParser parser;
    std::vector<SseEvent> events;
    for (const auto part : parts) {
        if (!parser.feed(part, events))
            return {events, false};
    }
    return {events, static_cast<bool>(parser.finish())};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const bool anthropic = (data[0] & 1) != 0;
    const std::string_view bytes(reinterpret_cast<const char *>(data) + 2, size - 2);
    const size_t cut = bytes.size() * data[1] / 255;
    const std::string_view first = bytes.substr(0, cut);
    const std::string_view second = bytes.substr(cut);

    // Events do not depend on where the chunks end. (A refusal may come at a different feed, and
    // the events before it with it, so only accepted input is compared event by event.)
    const auto whole = parse({bytes});
    const auto split = parse({first, second});
    if (whole.second != split.second || (whole.second && !sameEvents(whole.first, split.first)))
        std::abort();

    std::string streamedText;
    auto stream = anthropic ? AnthropicModel::makeStream(nullptr) : OpenAiModel::makeStream([&](const ModelDelta &delta) {
        streamedText += delta.text;
    });
    stream->begin(1);
    if (!stream->data(first).empty() || !stream->data(second).empty() || !stream->end().empty())
        return 0;   // named as broken: the adapter retries or reports it
    const std::string body = stream->body().dump();
    if (anthropic) {
        (void)AnthropicModel::parseResponse(body, AnthropicConfig{}, "fuzz-key");
        return 0;
    }
    const auto turn = OpenAiModel::parseResponse(body, OpenAiConfig{}, "fuzz-key");
    if (turn && turn->text != streamedText)
        std::abort();
    return 0;
}
