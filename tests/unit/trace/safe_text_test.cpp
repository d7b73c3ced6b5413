// Untrusted text made safe for one line or a terminal: escapes, invalid UTF-8, cuts.

#include "trace/safe_text.h"

#include <gtest/gtest.h>

namespace paddock::trace {
namespace {

TEST(SafeText, TerminalEscapesAreShownNeverPassedThrough)
{
    // A colour, a title change (OSC ... BEL), a cursor move and a clear screen.
    const std::string hostile = "\x1b[31mred\x1b[0m \x1b]0;owned\x07 \x1b[2J\x1b[H done";
    const std::string safe = safeLine(hostile);
    EXPECT_EQ(safe, "\\x1b[31mred\\x1b[0m \\x1b]0;owned\\x07 \\x1b[2J\\x1b[H done");
    EXPECT_EQ(safe.find('\x1b'), std::string::npos);
    EXPECT_EQ(safe.find('\x07'), std::string::npos);
}

TEST(SafeText, ControlCharactersAndSeparatorsAreEscaped)
{
    EXPECT_EQ(safeLine("a\nb\r\tc\x7f" "d"), "a\\nb\\r\\tc\\x7fd");
    EXPECT_EQ(safeLine(std::string("nul\0byte", 8)), "nul\\x00byte");
    // C1 CSI (U+009B), a line separator and a right-to-left override.
    EXPECT_EQ(safeLine("\xc2\x9b" "2J \xe2\x80\xa8 \xe2\x80\xae" "evil"), "\\u009b2J \\u2028 \\u202eevil");
    // What is not a control stays: accents, CJK, emoji, backslashes.
    EXPECT_EQ(safeLine("café 日本 🚀 C:\\path"), "café 日本 🚀 C:\\path");
}

TEST(SafeText, InvalidUtf8IsReplaced)
{
    EXPECT_EQ(safeLine("ok \xff\xfe end"), "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
    EXPECT_EQ(safeLine("cut \xe2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");      // a sequence cut short
    EXPECT_EQ(safeLine("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");               // an overlong '/'
    EXPECT_EQ(safeLine("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a UTF-16 surrogate
}

TEST(SafeText, LongTextIsCutWithAnEllipsisOnACharacterBoundary)
{
    EXPECT_EQ(safeLine("abcdef", 4), "abc…");
    EXPECT_EQ(safeLine("abcd", 4), "abcd");
    EXPECT_EQ(safeLine("日本語テキスト", 4), "日本語…");
    EXPECT_EQ(charCount(safeLine(std::string(10'000'000, 'x'), 240)), 240u);
    // An escape counts as the characters it shows; a cut through one leaves part of its text,
    // never the raw byte.
    const std::string cut = safeLine("ab\x1b[31m", 4);
    EXPECT_EQ(cut, "ab\\…");
}

TEST(SafeText, LinesKeepNewlinesAndTabsButNothingElse)
{
    EXPECT_EQ(safeLines("one\r\ntwo\tcols\n\x1b[2Jthree\rfour\n"), "one\ntwo\tcols\n\\x1b[2Jthree\\rfour\n");
    EXPECT_EQ(safeLines("abcdef\nxy", 4), "abc…\nxy");
}

} // namespace
} // namespace paddock::trace
