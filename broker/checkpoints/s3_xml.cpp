#include "broker/checkpoints/s3_xml.h"

#include <algorithm>
#include <charconv>
#include <chrono>

namespace paddock::checkpoints::s3 {

namespace {

struct Element {
    std::string_view raw;   // the text between the tags, entities not yet decoded
    size_t end = 0;         // just past the closing tag
};

// The first <tag>text</tag> or <tag/> in xml[from, to). The opening tag is matched whole, so <Key>
// never matches <KeyCount>; and since text escapes every '<', a key can never fake a tag.
std::optional<Element> findElement(std::string_view xml, std::string_view tag, size_t from = 0,
                                   size_t to = std::string_view::npos)
{
    xml = xml.substr(0, to);
    const std::string open = "<" + std::string(tag) + ">";
    const std::string empty = "<" + std::string(tag) + "/>";
    const std::string close = "</" + std::string(tag) + ">";
    const size_t openAt = xml.find(open, from);
    const size_t emptyAt = xml.find(empty, from);
    if (emptyAt < openAt)
        return Element{xml.substr(emptyAt + empty.size(), 0), emptyAt + empty.size()};
    if (openAt == std::string_view::npos)
        return std::nullopt;
    const size_t textAt = openAt + open.size();
    const size_t closeAt = xml.find(close, textAt);
    if (closeAt == std::string_view::npos)
        return std::nullopt;
    return Element{xml.substr(textAt, closeAt - textAt), closeAt + close.size()};
}

void appendUtf8(std::string &out, uint32_t code)
{
    if (code < 0x80) {
        out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (code >> 6)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (code >> 12)));
        out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (code >> 18)));
        out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
}

// "#65" or "#x41": the character it names, nullopt when malformed or outside Unicode.
std::optional<uint32_t> numericEntity(std::string_view name)
{
    if (name.size() < 2 || name[0] != '#')
        return std::nullopt;
    const bool hex = name[1] == 'x' || name[1] == 'X';
    const std::string_view digits = name.substr(hex ? 2 : 1);
    uint32_t code = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), code, hex ? 16 : 10);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || code == 0
        || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
        return std::nullopt;
    return code;
}

std::optional<char> namedEntity(std::string_view name)
{
    if (name == "amp")
        return '&';
    if (name == "lt")
        return '<';
    if (name == "gt")
        return '>';
    if (name == "quot")
        return '"';
    if (name == "apos")
        return '\'';
    return std::nullopt;
}

template <typename T>
std::optional<T> number(std::string_view text)
{
    T value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

std::optional<std::string> elementText(std::string_view xml, std::string_view tag, size_t from = 0,
                                       size_t to = std::string_view::npos)
{
    const auto element = findElement(xml, tag, from, to);
    if (!element)
        return std::nullopt;
    return xmlText(element->raw);
}

// One <Contents> block: the object's key, size and time.
Result<BlobInfo> parseContents(std::string_view xml, size_t from, size_t to)
{
    const auto key = elementText(xml, "Key", from, to);
    if (!key || key->empty())
        return fail(ErrorCode::InvalidArgument, "a <Contents> entry has no readable <Key>");
    const auto sizeText = elementText(xml, "Size", from, to);
    const auto size = sizeText ? number<int64_t>(*sizeText) : std::nullopt;
    if (!size || *size < 0)
        return fail(ErrorCode::InvalidArgument, "the entry for '" + *key + "' has no readable <Size>");
    BlobInfo info{*key, *size, 0};
    if (const auto modified = elementText(xml, "LastModified", from, to)) {
        const auto ms = parseIso8601Ms(*modified);
        if (!ms)
            return fail(ErrorCode::InvalidArgument,
                        "the entry for '" + *key + "' has an unreadable <LastModified> '" + *modified + "'");
        info.modifiedUnixMs = *ms;
    }
    return info;
}

} // namespace

std::optional<std::string> xmlText(std::string_view raw)
{
    std::string out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
        const char c = raw[i];
        if (c == '<')
            return std::nullopt;
        if (c != '&') {
            out.push_back(c);
            continue;
        }
        const size_t semicolon = raw.find(';', i);
        if (semicolon == std::string_view::npos)
            return std::nullopt;
        const std::string_view name = raw.substr(i + 1, semicolon - i - 1);
        if (const auto named = namedEntity(name))
            out.push_back(*named);
        else if (const auto code = numericEntity(name))
            appendUtf8(out, *code);
        else
            return std::nullopt;
        i = semicolon;
    }
    return out;
}

std::optional<int64_t> parseIso8601Ms(std::string_view text)
{
    // YYYY-MM-DDTHH:MM:SS[.fff...]Z
    if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':'
        || text[16] != ':' || text.back() != 'Z')
        return std::nullopt;
    const auto year = number<int>(text.substr(0, 4));
    const auto month = number<unsigned>(text.substr(5, 2));
    const auto day = number<unsigned>(text.substr(8, 2));
    const auto hour = number<int>(text.substr(11, 2));
    const auto minute = number<int>(text.substr(14, 2));
    const auto second = number<int>(text.substr(17, 2));
    if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 || *second > 60)
        return std::nullopt;
    int millis = 0;
    const std::string_view fraction = text.substr(19, text.size() - 20);
    if (!fraction.empty()) {
        const bool digitsOnly = std::ranges::all_of(fraction.substr(1), [](char c) { return c >= '0' && c <= '9'; });
        if (fraction[0] != '.' || fraction.size() < 2 || !digitsOnly)
            return std::nullopt;
        const std::string digits = (std::string(fraction.substr(1)) + "00").substr(0, 3);
        millis = *number<int>(digits);
    }
    const std::chrono::year_month_day date{std::chrono::year(*year), std::chrono::month(*month),
                                           std::chrono::day(*day)};
    if (!date.ok())
        return std::nullopt;
    using namespace std::chrono;
    const auto when = sys_days(date) + hours(*hour) + minutes(*minute) + seconds(*second) + milliseconds(millis);
    return duration_cast<milliseconds>(when.time_since_epoch()).count();
}

Result<ListPage> parseListPage(std::string_view xml)
{
    if (xml.find("<ListBucketResult") == std::string_view::npos)
        return fail(ErrorCode::InvalidArgument, "the answer is not a ListBucketResult");
    ListPage page;
    size_t at = 0;
    while (const auto contents = findElement(xml, "Contents", at)) {
        const size_t from = static_cast<size_t>(contents->raw.data() - xml.data());
        auto info = parseContents(xml, from, from + contents->raw.size());
        if (!info)
            return std::unexpected(info.error());
        page.objects.push_back(std::move(*info));
        at = contents->end;
    }
    const auto truncated = elementText(xml, "IsTruncated");
    if (!truncated || (*truncated != "true" && *truncated != "false"))
        return fail(ErrorCode::InvalidArgument, "the answer has no readable <IsTruncated>");
    page.truncated = *truncated == "true";
    if (page.truncated) {
        const auto token = elementText(xml, "NextContinuationToken");
        if (!token || token->empty())
            return fail(ErrorCode::InvalidArgument, "the answer is truncated but has no <NextContinuationToken>");
        page.nextContinuationToken = *token;
    }
    return page;
}

ErrorBody parseErrorBody(std::string_view xml)
{
    ErrorBody body;
    const auto root = findElement(xml, "Error");
    if (!root)
        return body;
    const size_t from = static_cast<size_t>(root->raw.data() - xml.data());
    const size_t to = from + root->raw.size();
    body.code = elementText(xml, "Code", from, to).value_or("");
    body.message = elementText(xml, "Message", from, to).value_or("");
    return body;
}

} // namespace paddock::checkpoints::s3
