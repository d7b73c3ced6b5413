#pragma once
// The host side of the init protocol: talks to one sandbox's paddock-sandbox-init over its unix
// socket. Stateless: each call opens its own connection (one request per connection), so any
// number of threads may call concurrently on the same or different sandboxes.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::pool {

struct InitExecRequest {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;   // added to PATH, HOME, LANG
    std::string cwd;                          // empty: the workspace
    int64_t timeoutMs = 0;                    // 0: none (the pool always sets one)
    std::string stdinData;
    int64_t maxOutputBytes = 16ll << 20;
};

struct InitExecResult {
    int exitCode = 0;      // -1 when killed by a signal
    int signal = 0;
    double durationMs = 0;
    int64_t startedUnixUs = 0;   // when the init spawned the command, on the host's clock (0: unknown)
    bool timedOut = false;
    bool truncated = false;
    // Set by the pool, not the init: "" normal end, "oom_killed", "timeout".
    std::string reason;
    // Set by the pool from the sandbox's cgroup at the exit (pool/runtimes/cgroup.h CommandUsage):
    // -1 and "" when the sandbox has no cgroup or the figure could not be read.
    int64_t peakMemoryBytes = -1;
    int64_t cpuTimeUs = -1;
    std::string peakMemoryScope;   // "command", "concurrent" or "sandbox"
};

struct InitDirEntry {
    std::string name;
    bool isDir = false;
    int64_t size = 0;
    uint32_t mode = 0;
    int64_t mtimeUnixMs = 0;
};

struct InitFile {
    std::string content;
    bool truncated = false;
    int64_t size = 0;
};

// stream 1 = stdout, 2 = stderr; called on the calling thread as chunks arrive.
using ChunkSink = std::function<void(int stream, std::string_view chunk)>;

// Shared by InitClient and InitExecLoop.
namespace detail {
// Connects a unix stream socket to socketPath (through /proc/self/fd for paths beyond sun_path).
// With nonBlocking, the socket is O_NONBLOCK and a full accept backlog gives EAGAIN in errno and
// fd -1 without an error value.
Result<int> connectInit(const std::filesystem::path &socketPath, bool nonBlocking);
// The exec request's frames (header, then stdin), as one buffer.
std::string execRequestFrames(const InitExecRequest &request);
// The exit record of an exec.
Result<InitExecResult> parseExitRecord(std::string_view payload);
// A reply frame that is neither output nor exit: the init's error, or a protocol error.
Error unexpectedExecFrame(char type, std::string_view payload);
// The init went away (err = errno of the failed read or write; 0 for end of stream).
Error lostInitError(int err);
} // namespace detail

class InitClient {
public:
    explicit InitClient(std::filesystem::path socketPath) : m_socketPath(std::move(socketPath)) {}

    Result<InitExecResult> exec(const InitExecRequest &request, const ChunkSink &sink) const;
    Result<InitFile> readFile(const std::string &path, int64_t maxBytes) const;
    Result<int64_t> writeFile(const std::string &path, std::string_view content, uint32_t mode) const;
    Result<std::vector<InitDirEntry>> listDir(const std::string &path) const;
    Status ping() const;

    const std::filesystem::path &socketPath() const { return m_socketPath; }

private:
    // A connected socket whose reads give up after ioTimeoutMs (so a hung sandbox cannot hang
    // the pool's thread).
    Result<int> connect(int64_t ioTimeoutMs) const;

    std::filesystem::path m_socketPath;
};

} // namespace paddock::pool
