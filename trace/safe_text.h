#pragma once
// Untrusted text (an agent's command output, error strings, file names, a model's words) made safe
// to show: in one line of a table, or in a terminal running `paddockctl events -f`.
//
// - Control characters never pass through: ESC becomes the four characters "\x1b", a newline "\n",
//   a tab "\t", DEL "\x7f"; C1 controls (U+0080-U+009F, which some terminals take as CSI), the
//   line and paragraph separators and the bidirectional overrides and isolates (which reorder what
//   a reader sees) become "\u009b" and the like. Backslashes are left as they are: the point is
//   that no byte reaches a terminal as a command, not that the escaping can be reversed.
// - Invalid UTF-8 becomes U+FFFD, one per bad byte.
// - A cut ends in "…" and never splits a character.
//
// Threads: pure functions; call from anywhere.

#include <cstddef>
#include <string>
#include <string_view>

namespace paddock::trace {

inline constexpr size_t kNoLimit = static_cast<size_t>(-1);

// One line: every control character escaped (newlines too), at most maxChars characters
// (code points) with the ellipsis.
std::string safeLine(std::string_view text, size_t maxChars = kNoLimit);

// Several lines (a command's output under its event): newlines and tabs kept, a "\r\n" line end
// kept as a newline, every other control character escaped as in safeLine, each line cut to
// maxLineChars.
std::string safeLines(std::string_view text, size_t maxLineChars = kNoLimit);

// Characters (code points) of valid UTF-8 text; what a cut counts.
size_t charCount(std::string_view text);

} // namespace paddock::trace
