#include "trace/safe_text.h"

#include <cstdint>
#include <cstdio>

namespace paddock::trace {
namespace {

constexpr char32_t kInvalid = 0xFFFFFFFF;
constexpr std::string_view kEllipsis = "…";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD

// The code point at text[at] and its length in bytes; kInvalid (length 1) for a byte that does not
// start a well-formed sequence: overlong forms, surrogates and values past U+10FFFF are invalid too.
std::pair<char32_t, size_t> decode(std::string_view text, size_t at)
{
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    if (lead < 0x80)
        return {lead, 1};
    size_t length = 0;
    char32_t cp = 0;
    char32_t minimum = 0;
    if ((lead & 0xE0) == 0xC0) {
        length = 2, cp = lead & 0x1F, minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
        length = 3, cp = lead & 0x0F, minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
        length = 4, cp = lead & 0x07, minimum = 0x10000;
    } else {
        return {kInvalid, 1};
    }
    if (at + length > text.size())
        return {kInvalid, 1};
    for (size_t i = 1; i < length; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80)
            return {kInvalid, 1};
        cp = (cp << 6) | (byte(at + i) & 0x3F);
    }
    if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return {kInvalid, 1};
    return {cp, length};
}

// Code points a terminal or a text layout may act on rather than show.
bool isControl(char32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029
        || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void appendEscaped(std::string &out, char32_t cp)
{
    char buffer[12];
    switch (cp) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
    }
    if (cp < 0x80)
        std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(cp));
    else
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(cp));
    out += buffer;
}

// The safe form of one line (no newline kept), cut at maxChars with the ellipsis. Stops reading at
// the cut, so a 10 MB line costs what its first maxChars characters cost.
void appendLine(std::string &out, std::string_view text, size_t maxChars, bool keepTabs)
{
    const size_t begin = out.size();
    size_t chars = 0;              // characters appended so far; an escape like "\x1b" counts its four
    size_t keepEnd = kNoLimit;     // out's size after maxChars - 1 characters: where a cut goes
    for (size_t at = 0; at < text.size();) {
        const auto [cp, length] = decode(text, at);
        const size_t before = out.size();
        size_t added = 1;
        if (cp == kInvalid) {
            out += kReplacement;
        } else if (isControl(cp) && !(keepTabs && cp == '\t')) {
            appendEscaped(out, cp);
            added = out.size() - before;   // ASCII only
        } else {
            out.append(text.substr(at, length));
        }
        at += length;
        if (maxChars == kNoLimit)
            continue;
        // Character by character: where does the (maxChars - 1)th end?
        for (size_t i = 0; i < added; ++i) {
            ++chars;
            if (chars == maxChars - 1 || maxChars <= 1)
                keepEnd = (added == 1 ? out.size() : before + i + 1);
        }
        if (chars > maxChars || (chars == maxChars && at < text.size())) {
            out.resize(maxChars <= 1 ? begin : keepEnd);
            out += kEllipsis;
            return;
        }
    }
}

} // namespace

size_t charCount(std::string_view text)
{
    size_t count = 0;
    for (size_t at = 0; at < text.size(); at += decode(text, at).second)
        ++count;
    return count;
}

std::string safeLine(std::string_view text, size_t maxChars)
{
    std::string out;
    appendLine(out, text, maxChars, false);
    return out;
}

std::string safeLines(std::string_view text, size_t maxLineChars)
{
    std::string out;
    out.reserve(text.size());
    size_t start = 0;
    while (start <= text.size()) {
        const size_t newline = text.find('\n', start);
        std::string_view line = text.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start);
        if (newline != std::string_view::npos && !line.empty() && line.back() == '\r')
            line.remove_suffix(1);   // CRLF output reads as lines, not as a carriage return each
        appendLine(out, line, maxLineChars, true);
        if (newline == std::string_view::npos)
            break;
        out += '\n';
        start = newline + 1;
    }
    return out;
}

} // namespace paddock::trace
