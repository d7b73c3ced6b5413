// Events in words (trace/event_summary.h) and their spans (trace/spans.h) from any payload: the
// first byte picks the kind, the rest is the payload's text, as a broker's stream or a hostile
// agent's output could make it. Never crash; a summary is one line of at most kMaxSummaryChars
// characters with no control character left in it.

#include "trace/event_summary.h"
#include "trace/safe_text.h"
#include "trace/spans.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace paddock::trace;
    if (size == 0)
        return 0;
    static const auto kinds = kindsWithSummaries();
    const std::string_view kind = kinds[data[0] % kinds.size()];
    const std::string_view payload(reinterpret_cast<const char *>(data) + 1, size - 1);

    const std::string summary = summarize(kind, payload, 1234);
    if (charCount(summary) > kMaxSummaryChars)
        std::abort();
    for (const char c : summary) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f)
            std::abort();
    }
    if (safeLine(summary) != summary)   // valid UTF-8, nothing left to escape
        std::abort();
    (void)safeLines(payload, 80);

    // One long session across inputs, so its maps of open spans see every order; a new one now and
    // then keeps memory bounded however long the fuzzer runs.
    static SpanBuilder spans;
    static int64_t seq = 0;
    if (++seq % 100'000 == 0)
        spans = SpanBuilder();
    spans.apply(seq, 1'800'000'000'000 + seq, kind, payload);
    return 0;
}
