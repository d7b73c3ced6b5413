#pragma once
// Replaces every secret value in recorded text with [REDACTED:<name>].
//
// What is matched, for each secret: its bytes as they are; its base64 encoding (standard and
// URL-safe alphabets, at each of the three alignments the value can have inside a longer encoded
// text, so `base64 < file` of a file that contains the secret is caught); and its hex encoding
// (lower and upper case); and, for a value with a character JSON escapes (a quote, a backslash, a
// control character), its form inside a JSON string. Encoded forms are matched only when their fully determined part is at
// least kMinEncodedLength characters, so short values do not make ordinary text disappear.
//
// How: every pattern is at least 4 bytes long (shorter secrets are refused when they are set), so
// each position of the text is tested by loading its 4 bytes, hashing them into a 64 Ki-bit filter,
// and only on a hit comparing the few patterns that start with those 4 bytes. The cost per byte is
// one load, one multiply and one bit test whatever the number of secrets.
//
// Overlapping or adjacent matches of different secrets are merged into one redacted region, so no
// byte of any secret survives between two markers; the region is replaced by the markers of the
// secrets whose matches are not inside another match of the region, in order of position.
//
// Threads: a Redactor is immutable once built; redact() may be called from any thread at once. A
// Redactor::Stream belongs to one thread.
//
// Known limits: other encodings (percent-encoding, base32, a value split by line wrapping of a
// base64 dump, or the value transformed by the program) are not recognised. At the edges of a
// base64 match up to 6 bits of the value that share a character with the neighbouring bytes stay.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace paddock::secrets {

inline constexpr size_t kMinSecretBytes = 4;
inline constexpr size_t kMinEncodedLength = 8;

struct Secret {
    std::string name;
    std::string value;
};

class Redactor {
public:
    Redactor() = default;   // knows no secret: redacts nothing
    explicit Redactor(const std::vector<Secret> &secrets);

    bool empty() const { return m_patterns.empty(); }
    size_t patternCount() const { return m_patterns.size(); }
    size_t longestPattern() const { return m_longest; }

    std::string redact(std::string_view text) const;
    // Returns true when something was replaced.
    bool redactInPlace(std::string &text) const;
    // Every string in the document, object keys included.
    void redactJson(nlohmann::json &value) const;
    // A serialized JSON document (an event payload): parsed and rewritten only when it may hold a
    // value. Returns true when it changed. Text that is not JSON is redacted as plain text.
    bool redactJsonText(std::string &jsonText) const;

    // The marker that replaces a value of the secret called name.
    static std::string marker(std::string_view name) { return "[REDACTED:" + std::string(name) + "]"; }

    // Redacts a stream that arrives in chunks: a value split across two chunks is still replaced.
    // Output is held back only as long as it could be the start of a match (the bytes from the
    // first position where what arrived so far begins a pattern, at most longestPattern() - 1 of
    // them, and a match that could still grow); finish() releases the rest.
    class Stream {
    public:
        explicit Stream(const Redactor &redactor) : m_redactor(redactor) {}
        std::string feed(std::string_view chunk);
        std::string finish();
        // Bytes fed and held back (they may be the start of a value): fed - pendingBytes() bytes
        // of input have come out of feed().
        size_t pendingBytes() const { return m_pending.size(); }

    private:
        const Redactor &m_redactor;
        std::string m_pending;
    };

private:
    struct Pattern {
        std::string bytes;
        uint32_t secret = 0;
    };
    struct Match {
        size_t begin = 0;
        size_t end = 0;
        uint32_t secret = 0;
    };

    void addPattern(std::string bytes, uint32_t secret);
    // Whether tail is the start of a pattern, shorter than it (more bytes could complete a match).
    bool startsAPattern(std::string_view tail) const;
    // Matches in order of their start; at each start only the longest.
    std::vector<Match> find(std::string_view text) const;
    // text with the merged regions of matches replaced; matches must come from find(text).
    std::string apply(std::string_view text, const std::vector<Match> &matches, size_t upTo) const;

    std::vector<std::string> m_names;
    std::vector<Pattern> m_patterns;
    std::unordered_map<uint32_t, std::vector<uint32_t>> m_byPrefix;   // first 4 bytes -> patterns, longest first
    std::vector<uint64_t> m_filter;                                    // hashed prefixes
    size_t m_longest = 0;
    bool m_jsonEscaped = false;   // a value holds a character JSON escapes, so it may not appear verbatim
};

// The encoded forms matched besides the raw value (exposed for tests).
std::vector<std::string> base64Cores(std::string_view value, bool urlSafe);

} // namespace paddock::secrets
