#include "broker/secrets/redactor.h"

#include <gtest/gtest.h>

#include <random>

namespace paddock::secrets {
namespace {

// An encoder of its own, so the redactor's encoder is not checked against itself.
std::string base64Of(std::string_view bytes, bool urlSafe = false)
{
    const std::string alphabet = std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        + (urlSafe ? "-_" : "+/");
    std::string out;
    uint32_t bits = 0;
    int held = 0;
    for (unsigned char c : bytes) {
        bits = (bits << 8) | c;
        held += 8;
        while (held >= 6) {
            held -= 6;
            out += alphabet[(bits >> held) & 63];
        }
    }
    if (held > 0)
        out += alphabet[(bits << (6 - held)) & 63];
    while (out.size() % 4 != 0)
        out += '=';
    return out;
}

std::string randomText(std::mt19937 &random, size_t size, const char *alphabet = nullptr)
{
    std::string out(size, ' ');
    for (auto &c : out) {
        if (alphabet)
            c = alphabet[random() % std::strlen(alphabet)];
        else
            c = static_cast<char>(random() % 95 + 32);
    }
    return out;
}

TEST(Redactor, ReplacesEveryOccurrenceWithTheMarker)
{
    const Redactor redactor(std::vector<Secret>{{"API_TOKEN", "tok-12345-secret"}});
    EXPECT_EQ(redactor.redact("a tok-12345-secret b tok-12345-secret"), "a [REDACTED:API_TOKEN] b [REDACTED:API_TOKEN]");
    EXPECT_EQ(redactor.redact("nothing here"), "nothing here");
    EXPECT_EQ(redactor.redact("tok-12345-secre"), "tok-12345-secre");   // one byte short is not the value
    EXPECT_EQ(redactor.redact("tok-12345-secret"), "[REDACTED:API_TOKEN]");
    EXPECT_EQ(redactor.redact(""), "");
}

TEST(Redactor, EmptyRedactorChangesNothing)
{
    const Redactor redactor;
    EXPECT_TRUE(redactor.empty());
    EXPECT_EQ(redactor.redact("tok-12345-secret"), "tok-12345-secret");
}

TEST(Redactor, FourByteValuesAreTheShortestRedacted)
{
    const Redactor redactor(std::vector<Secret>{{"TINY", "abc"}, {"FOUR", "wxyz"}});
    EXPECT_EQ(redactor.redact("abc wxyz"), "abc [REDACTED:FOUR]");
}

TEST(Redactor, OverlappingSecretsLeaveNoByteOfEither)
{
    const Redactor redactor(std::vector<Secret>{{"A", "alpha-bravo"}, {"B", "bravo-charlie"}});
    const std::string out = redactor.redact("<alpha-bravo-charlie>");
    EXPECT_EQ(out, "<[REDACTED:A][REDACTED:B]>");
    // The other order of appearance.
    EXPECT_EQ(redactor.redact("bravo-charlie alpha-bravo"), "[REDACTED:B] [REDACTED:A]");
}

TEST(Redactor, ASecretInsideAnotherIsNamedOnceAsTheLonger)
{
    const Redactor redactor(std::vector<Secret>{{"LONG", "prefix-INNER-suffix"}, {"INNER", "INNER"}});
    EXPECT_EQ(redactor.redact("x prefix-INNER-suffix y"), "x [REDACTED:LONG] y");
    EXPECT_EQ(redactor.redact("x INNER y"), "x [REDACTED:INNER] y");
}

TEST(Redactor, AChainOfOverlapsIsOneRegion)
{
    const Redactor redactor(std::vector<Secret>{{"A", "aaaab"}, {"B", "abbbbc"}, {"C", "bcccc"}});
    EXPECT_EQ(redactor.redact("-aaaabbbbcccc-"), "-[REDACTED:A][REDACTED:B][REDACTED:C]-");
}

TEST(Redactor, Base64AtEveryAlignmentInsideLongerData)
{
    const std::string secret = "s3cr3t-v4lue-for-base64";
    const Redactor redactor(std::vector<Secret>{{"B64", secret}});
    for (bool urlSafe : {false, true}) {
        for (size_t before = 0; before < 6; ++before) {
            for (size_t after = 0; after < 4; ++after) {
                const std::string data = std::string(before, '\xfb') + secret + std::string(after, '\xff');
                const std::string encoded = base64Of(data, urlSafe);
                const std::string out = redactor.redact(encoded);
                EXPECT_NE(out.find("[REDACTED:B64]"), std::string::npos)
                    << "before " << before << " after " << after << ": " << encoded << " -> " << out;
                // What is left of the encoding is the few characters that mix in the neighbours.
                EXPECT_LE(out.size() - std::string("[REDACTED:B64]").size(), before / 3 * 4 + after / 3 * 4 + 10)
                    << encoded << " -> " << out;
            }
        }
    }
}

TEST(Redactor, HexInBothCases)
{
    const Redactor redactor(std::vector<Secret>{{"HEX", "key\x01\xfe"}});
    EXPECT_EQ(redactor.redact("dump: 6b657901fe."), "dump: [REDACTED:HEX].");
    EXPECT_EQ(redactor.redact("dump: 6B657901FE."), "dump: [REDACTED:HEX].");
}

TEST(Redactor, ShortValuesHaveNoEncodedPatterns)
{
    // Base64 of a 4-byte value leaves fewer than 8 characters that depend on it alone: too likely in
    // ordinary text, so only the raw value and its hex are searched for.
    EXPECT_TRUE(base64Cores("abcd", false).empty());
    EXPECT_EQ(base64Cores("abcdefghijkl", false).size(), 3u);
}

TEST(Redactor, JsonStringsAndKeysAtAnyDepth)
{
    const Redactor redactor(std::vector<Secret>{{"Q", "quote\"and\\back"}});
    nlohmann::json doc = {{"stdout", "x quote\"and\\back y"},
                          {"nested", {{"list", {"a", "quote\"and\\back"}}}},
                          {"quote\"and\\back", 1}};
    redactor.redactJson(doc);
    const std::string dumped = doc.dump();
    EXPECT_EQ(dumped.find("quote"), std::string::npos) << dumped;
    EXPECT_EQ(doc["stdout"], "x [REDACTED:Q] y");
    EXPECT_EQ(doc["nested"]["list"][1], "[REDACTED:Q]");
    EXPECT_TRUE(doc.contains("[REDACTED:Q]"));
}

// A model's tool-call arguments stream as JSON text, and a config file prints as one: a value
// with a quote, a backslash or a newline stands there escaped, and is redacted in that form too.
TEST(Redactor, AValueAsItStandsInsideAJsonString)
{
    const std::string value = "pa\"ss\\word\n42";
    const Redactor redactor(std::vector<Secret>{{"DB", value}});
    const std::string arguments = nlohmann::json{{"content", "password=" + value}}.dump();
    ASSERT_EQ(arguments.find(value), std::string::npos) << "the value must stand escaped here";
    const std::string redacted = redactor.redact(arguments);
    EXPECT_EQ(redacted, R"({"content":"password=[REDACTED:DB]"})");
    EXPECT_EQ(redactor.redact("password=" + value), "password=[REDACTED:DB]");   // as it is, still

    // Split anywhere, as streamed arguments are.
    for (size_t cut = 1; cut < arguments.size(); ++cut) {
        Redactor::Stream stream(redactor);
        std::string out = stream.feed(std::string_view(arguments).substr(0, cut));
        out += stream.feed(std::string_view(arguments).substr(cut));
        out += stream.finish();
        EXPECT_EQ(out, redacted) << "cut at " << cut;
    }
}

TEST(Redactor, StreamRedactsAValueSplitAtEveryBoundary)
{
    const std::string secret = "split-across-chunks";
    const Redactor redactor(std::vector<Secret>{{"S", secret}});
    const std::string text = "before " + secret + " after";
    const std::string whole = redactor.redact(text);
    for (size_t cut = 1; cut < text.size(); ++cut) {
        Redactor::Stream stream(redactor);
        std::string out = stream.feed(std::string_view(text).substr(0, cut));
        EXPECT_EQ(out.find("split"), std::string::npos) << "cut " << cut << " released part of the value: " << out;
        out += stream.feed(std::string_view(text).substr(cut));
        out += stream.finish();
        EXPECT_EQ(out, whole) << "cut at " << cut;
    }
}

TEST(Redactor, StreamOfRandomChunksEqualsRedactingTheWhole)
{
    std::mt19937 random(7);
    std::vector<Secret> secrets{{"A", "alpha-bravo"}, {"B", "bravo-charlie"}, {"C", "zzzz"}, {"D", "0123456789abcdef"}};
    const Redactor redactor(secrets);
    for (int round = 0; round < 200; ++round) {
        std::string text;
        for (int piece = 0; piece < 30; ++piece) {
            if (random() % 3 == 0)
                text += secrets[random() % secrets.size()].value;
            else
                text += randomText(random, random() % 12, "abcz-0189 ");
        }
        Redactor::Stream stream(redactor);
        std::string out;
        for (size_t at = 0; at < text.size();) {
            const size_t n = std::min<size_t>(random() % 9 + 1, text.size() - at);
            out += stream.feed(std::string_view(text).substr(at, n));
            at += n;
        }
        out += stream.finish();
        EXPECT_EQ(out, redactor.redact(text)) << text;
    }
}

TEST(Redactor, StreamHoldsBackOnlyWhatCouldStartAMatch)
{
    const Redactor redactor(std::vector<Secret>{{"S", "0123456789"}});
    Redactor::Stream stream(redactor);
    // Nothing here can begin the value or its encodings: all of it is released at once.
    EXPECT_EQ(stream.feed("plain text that matches nothing at all\n"), "plain text that matches nothing at all\n");
    // Only what could be the value's start waits, however short the rest is.
    EXPECT_EQ(stream.feed("key=0123"), "key=");
    EXPECT_EQ(stream.feed("456789 ok\n"), "[REDACTED:S] ok\n");
    EXPECT_EQ(stream.feed("and 01"), "and ");
    EXPECT_EQ(stream.finish(), "01");
}

TEST(Redactor, ManySecretsEachRedactedNoneLeft)
{
    std::mt19937 random(42);
    std::vector<Secret> secrets;
    for (int i = 0; i < 1000; ++i)
        secrets.push_back({"S" + std::to_string(i), randomText(random, 12 + random() % 40,
                                                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")});
    const Redactor redactor(secrets);
    EXPECT_GE(redactor.patternCount(), 1000u * 3);

    std::string text;
    std::vector<size_t> planted;
    for (int i = 0; i < 300; ++i) {
        text += randomText(random, random() % 200, "!#%&()*,.:;<>?@[]^{}|~ \n");
        const size_t which = random() % secrets.size();
        planted.push_back(which);
        text += secrets[which].value;
    }
    const std::string out = redactor.redact(text);
    for (const auto &secret : secrets)
        EXPECT_EQ(out.find(secret.value), std::string::npos) << secret.name;
    size_t markers = 0;
    for (size_t at = out.find("[REDACTED:"); at != std::string::npos; at = out.find("[REDACTED:", at + 1))
        ++markers;
    EXPECT_EQ(markers, planted.size());
    // Text without any secret comes out unchanged.
    const std::string plain = randomText(random, 100000, "!#%&()*,.:;<>?@[]^{}|~ \n");
    EXPECT_EQ(redactor.redact(plain), plain);
}

} // namespace
} // namespace paddock::secrets
