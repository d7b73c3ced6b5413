#include "broker/secrets/redactor.h"

#include <algorithm>
#include <cstring>

namespace paddock::secrets {

namespace {

constexpr size_t kPrefixBytes = 4;
constexpr unsigned kFilterBits = 16;

uint32_t loadPrefix(const char *p)
{
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint32_t filterSlot(uint32_t prefix)
{
    return (prefix * 2654435761u) >> (32 - kFilterBits);
}

std::string base64(std::string_view bytes, bool urlSafe)
{
    static const char *standard = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char *url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *alphabet = urlSafe ? url : standard;
    std::string out;
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += alphabet[(n >> 6) & 63];
        out += alphabet[n & 63];
    }
    // A partial group: only the characters its bytes fill completely matter to callers here.
    if (const size_t rest = bytes.size() - i; rest > 0) {
        uint32_t n = uint8_t(bytes[i]) << 16;
        if (rest == 2)
            n |= uint8_t(bytes[i + 1]) << 8;
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        if (rest == 2)
            out += alphabet[(n >> 6) & 63];
    }
    return out;
}

std::string hex(std::string_view bytes, bool upper)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

} // namespace

std::vector<std::string> base64Cores(std::string_view value, bool urlSafe)
{
    // Inside a longer base64 text the value starts at byte 0, 1 or 2 of a 3-byte group. Characters
    // that mix bits of the value with bits of its neighbours differ from one text to the next; the
    // ones in between depend on the value alone and are what is searched for.
    std::vector<std::string> cores;
    for (size_t align = 0; align < 3; ++align) {
        const std::string padded = std::string(align, '\0') + std::string(value);
        const std::string encoded = base64(padded, urlSafe);
        const size_t skip = align == 0 ? 0 : align == 1 ? 2 : 3;
        const size_t total = padded.size();
        const size_t keep = (total / 3) * 4 + total % 3;   // a partial group's last character is mixed
        if (keep > skip && keep - skip >= kMinEncodedLength)
            cores.push_back(encoded.substr(skip, keep - skip));
    }
    return cores;
}

Redactor::Redactor(const std::vector<Secret> &secrets)
{
    m_filter.assign((size_t(1) << kFilterBits) / 64, 0);
    for (const auto &secret : secrets) {
        if (secret.value.size() < kMinSecretBytes)
            continue;   // refused at set; never loaded
        const auto index = static_cast<uint32_t>(m_names.size());
        for (unsigned char c : secret.value)
            m_jsonEscaped = m_jsonEscaped || c < 0x20 || c == '"' || c == '\\' || c == 0x7f;
        m_names.push_back(secret.name);
        addPattern(secret.value, index);
        for (bool urlSafe : {false, true}) {
            for (auto &core : base64Cores(secret.value, urlSafe))
                addPattern(std::move(core), index);
        }
        addPattern(hex(secret.value, false), index);
        addPattern(hex(secret.value, true), index);
        // As it stands inside a JSON string (a model's tool-call arguments as they stream, a
        // config file printed): a value with a quote, a backslash or a control character.
        const std::string quoted = nlohmann::json(secret.value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (quoted.size() != secret.value.size() + 2)
            addPattern(quoted.substr(1, quoted.size() - 2), index);
    }
    for (auto &[prefix, list] : m_byPrefix) {
        std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
            return m_patterns[a].bytes.size() > m_patterns[b].bytes.size();
        });
    }
}

void Redactor::addPattern(std::string bytes, uint32_t secret)
{
    if (bytes.size() < kPrefixBytes)
        return;
    const uint32_t prefix = loadPrefix(bytes.data());
    auto &list = m_byPrefix[prefix];
    for (uint32_t existing : list) {
        if (m_patterns[existing].bytes == bytes)
            return;   // the same text (hex of a digit-only value, say) is searched once
    }
    m_longest = std::max(m_longest, bytes.size());
    const uint32_t slot = filterSlot(prefix);
    m_filter[slot / 64] |= uint64_t(1) << (slot % 64);
    list.push_back(static_cast<uint32_t>(m_patterns.size()));
    m_patterns.push_back({std::move(bytes), secret});
}

std::vector<Redactor::Match> Redactor::find(std::string_view text) const
{
    std::vector<Match> matches;
    if (m_patterns.empty() || text.size() < kPrefixBytes)
        return matches;
    const char *data = text.data();
    const size_t last = text.size() - kPrefixBytes;
    for (size_t i = 0; i <= last; ++i) {
        const uint32_t prefix = loadPrefix(data + i);
        const uint32_t slot = filterSlot(prefix);
        if (!(m_filter[slot / 64] & (uint64_t(1) << (slot % 64))))
            continue;
        auto it = m_byPrefix.find(prefix);
        if (it == m_byPrefix.end())
            continue;
        for (uint32_t index : it->second) {
            const Pattern &pattern = m_patterns[index];
            if (pattern.bytes.size() <= text.size() - i
                && std::memcmp(data + i, pattern.bytes.data(), pattern.bytes.size()) == 0) {
                matches.push_back({i, i + pattern.bytes.size(), pattern.secret});
                break;   // longest first: shorter ones here lie inside this match
            }
        }
    }
    return matches;
}

bool Redactor::startsAPattern(std::string_view tail) const
{
    if (tail.size() >= kPrefixBytes) {
        const uint32_t prefix = loadPrefix(tail.data());
        const uint32_t slot = filterSlot(prefix);
        if (!(m_filter[slot / 64] & (uint64_t(1) << (slot % 64))))
            return false;
        auto it = m_byPrefix.find(prefix);
        if (it == m_byPrefix.end())
            return false;
        return std::ranges::any_of(it->second, [&](uint32_t index) {
            const std::string &bytes = m_patterns[index].bytes;
            return bytes.size() > tail.size() && std::string_view(bytes).starts_with(tail);
        });
    }
    return std::ranges::any_of(m_patterns, [&](const Pattern &pattern) {
        return pattern.bytes.size() > tail.size() && std::string_view(pattern.bytes).starts_with(tail);
    });
}

std::string Redactor::apply(std::string_view text, const std::vector<Match> &matches, size_t upTo) const
{
    std::string out;
    out.reserve(text.size());
    size_t copied = 0;
    size_t m = 0;
    while (m < matches.size() && matches[m].end <= upTo) {
        // One region: this match and every later one that overlaps what the region covers so far.
        const size_t begin = matches[m].begin;
        size_t end = matches[m].end;
        std::vector<uint32_t> named{matches[m].secret};
        for (++m; m < matches.size() && matches[m].begin < end; ++m) {
            if (matches[m].end <= end)
                continue;   // inside the region: its secret is covered by the markers already named
            end = matches[m].end;
            if (std::find(named.begin(), named.end(), matches[m].secret) == named.end())
                named.push_back(matches[m].secret);
        }
        out.append(text.substr(copied, begin - copied));
        for (uint32_t secret : named)
            out += marker(m_names[secret]);
        copied = end;
    }
    out.append(text.substr(copied, upTo - copied));
    return out;
}

std::string Redactor::redact(std::string_view text) const
{
    const auto matches = find(text);
    if (matches.empty())
        return std::string(text);
    return apply(text, matches, text.size());
}

bool Redactor::redactInPlace(std::string &text) const
{
    const auto matches = find(text);
    if (matches.empty())
        return false;
    text = apply(text, matches, text.size());
    return true;
}

void Redactor::redactJson(nlohmann::json &value) const
{
    if (empty())
        return;
    if (value.is_string()) {
        redactInPlace(value.get_ref<std::string &>());
    } else if (value.is_array()) {
        for (auto &element : value)
            redactJson(element);
    } else if (value.is_object()) {
        bool keyChanged = false;
        for (auto it = value.begin(); it != value.end(); ++it) {
            redactJson(it.value());
            keyChanged = keyChanged || !find(it.key()).empty();
        }
        if (keyChanged) {
            nlohmann::json rebuilt = nlohmann::json::object();
            for (auto it = value.begin(); it != value.end(); ++it)
                rebuilt[redact(it.key())] = std::move(it.value());
            value = std::move(rebuilt);
        }
    }
}

bool Redactor::redactJsonText(std::string &jsonText) const
{
    if (empty())
        return false;
    // Values JSON writes as they are can be looked for in the text itself, which is far cheaper than
    // parsing every payload.
    if (!m_jsonEscaped && find(jsonText).empty())
        return false;
    auto document = nlohmann::json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
    if (document.is_discarded())
        return redactInPlace(jsonText);
    redactJson(document);
    std::string dumped = document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (dumped == jsonText)
        return false;
    jsonText = std::move(dumped);
    return true;
}

std::string Redactor::Stream::feed(std::string_view chunk)
{
    m_pending.append(chunk);
    const size_t longest = m_redactor.longestPattern();
    if (longest == 0) {
        std::string out;
        out.swap(m_pending);
        return out;
    }
    // Positions before `safe` have all the bytes any pattern starting there needs, so their matches
    // are final; a match still to come starts at `safe` or later ...
    size_t safe = m_pending.size() >= longest ? m_pending.size() - (longest - 1) : 0;
    // ... and, of the positions after it, only at one where what is here so far is the start of a
    // pattern: a short line is not held back for a long value it cannot be part of.
    while (safe < m_pending.size() && !m_redactor.startsAPattern(std::string_view(m_pending).substr(safe)))
        ++safe;
    const auto matches = m_redactor.find(m_pending);
    // A region that reaches past `safe` may still grow: keep all of it for the next chunk.
    size_t regionBegin = 0;
    size_t regionEnd = 0;
    for (const auto &match : matches) {
        if (match.begin >= regionEnd)
            regionBegin = match.begin;
        regionEnd = std::max(regionEnd, match.end);
        if (regionBegin < safe && regionEnd > safe) {
            safe = regionBegin;
            break;
        }
        if (match.begin >= safe)
            break;
    }
    std::string out = m_redactor.apply(m_pending, matches, safe);
    m_pending.erase(0, safe);
    return out;
}

std::string Redactor::Stream::finish()
{
    std::string out = m_redactor.redact(m_pending);
    m_pending.clear();
    return out;
}

} // namespace paddock::secrets
