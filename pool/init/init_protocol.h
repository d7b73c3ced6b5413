#pragma once
// The wire protocol between the pool (host side) and paddock-sandbox-init (inside the sandbox).
//
// One request per connection on a unix stream socket. Every message is a frame:
//   u8 type | u32 length (big endian) | length bytes
// Headers are JSON objects; bulk bytes (stdin, file content, output) travel in their own frames
// so they need no escaping. See docs/pool.md for the sequence of frames of each operation.
//
// Threads: plain functions on file descriptors; callers own the descriptors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace paddock::pool::init {

// Frame types. Requests (pool -> init):
inline constexpr char kExec = 'X';        // JSON header, then one kStdin frame
inline constexpr char kStdin = 'I';
inline constexpr char kReadFile = 'R';    // JSON header
inline constexpr char kWriteFile = 'W';   // JSON header, then one kData frame
inline constexpr char kListDir = 'L';     // JSON header
inline constexpr char kPing = 'P';        // empty; answered with kOk
// Replies (init -> pool):
inline constexpr char kStdout = 'o';
inline constexpr char kStderr = 'e';
inline constexpr char kExit = 'x';        // JSON: exit_code, signal, duration_ms, timed_out, truncated
inline constexpr char kOk = 'k';          // JSON: operation-specific result
inline constexpr char kData = 'D';        // bulk bytes (file content)
inline constexpr char kError = 'F';       // JSON: code (paddock ErrorCode name), message

// A frame larger than this is a protocol error: it protects both sides from a corrupt length.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

struct Frame {
    char type = 0;
    std::string payload;
};

// Writes the whole frame; false on any error (errno is set). Retries on EINTR and short writes.
bool writeFrame(int fd, char type, std::string_view payload);
// Reads one frame. nullopt on EOF, error or an oversized frame (errno set; 0 on clean EOF).
std::optional<Frame> readFrame(int fd);

// Full-length write/read helpers shared by both sides.
bool writeAll(int fd, const void *data, size_t size);
bool readAll(int fd, void *data, size_t size);

} // namespace paddock::pool::init
