#pragma once
// A checkpoint of a sandbox's /workspace, in the words the pool and the broker share: a Manifest
// lists every entry (file, directory, symlink) with its mode and owner as seen inside the sandbox,
// and names each file's content as a list of chunks, cut every kChunkBytes and named by the SHA-256
// of their bytes. A Manifest's id is the SHA-256 of its JSON, so equal workspaces have one id and a
// stored manifest proves its own integrity.
//
// A Delta is what a pool sends after a step: the entries added or changed since a base manifest
// and the paths removed. apply() turns base + delta into the new Manifest, which the broker stores.
//
// Both parse() functions take untrusted bytes (a pool is on a hostile host) and refuse anything a
// restore could be tricked by: absolute paths, "." or ".." components, an entry whose parent is not
// a directory of the manifest (a symlink cannot stand in for a directory), duplicate paths, chunk
// lists that do not add up to the size, ids that are not SHA-256 hex. Modes keep the permission and
// sticky bits only; set-id bits are dropped.
//
// Threads: plain values.

#include "common/result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::checkpoint {

constexpr int64_t kChunkBytes = 1 << 20;        // 1 MiB
constexpr uint32_t kModeMask = 01777;           // permissions and sticky; never set-id
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxEntries = 1'000'000;

enum class EntryType { File, Dir, Symlink };

struct Entry {
    std::string path;                  // relative to /workspace, "/"-separated
    EntryType type = EntryType::File;
    uint32_t mode = 0;                 // & kModeMask
    uint32_t uid = 0;                  // as seen inside the sandbox
    uint32_t gid = 0;
    int64_t size = 0;                  // files: bytes
    int64_t mtimeMs = 0;
    std::string target;                // symlinks
    std::vector<std::string> chunks;   // files: one hash per kChunkBytes piece, in order

    bool operator==(const Entry &) const = default;
};

// How many chunks a file of `size` bytes has.
constexpr int64_t chunkCount(int64_t size) { return (size + kChunkBytes - 1) / kChunkBytes; }

struct Manifest {
    std::vector<Entry> entries;        // sorted by path: a directory comes before what it holds

    std::string toJson() const;
    // The id: SHA-256 of toJson().
    std::string id() const;
    int64_t fileBytes() const;
    // Every chunk hash named, each once, sorted.
    std::vector<std::string> chunkHashes() const;
    // InvalidArgument naming the first problem.
    static Result<Manifest> parse(std::string_view json);
    // Sorts the entries and checks them (parse() does this for what it reads).
    Status normalise();
};

struct Delta {
    std::string base;                  // the manifest id it is against; "" for an empty workspace
    std::vector<Entry> changed;        // added or changed entries
    std::vector<std::string> removed;  // paths gone since base (a directory's contents with it)

    bool empty() const { return changed.empty() && removed.empty(); }
    std::string toJson() const;
    static Result<Delta> parse(std::string_view json);
};

// base with delta applied. InvalidArgument when the result is not a valid manifest.
Result<Manifest> apply(const Manifest &base, const Delta &delta);

// What changed from `from` to `to` (the pool's side of apply). The caller sets the Delta's base:
// the id the broker knows `from` by, or "" when `from` is the empty workspace.
Delta diff(const Manifest &from, const Manifest &to);

// A path as a manifest may hold it: relative, no empty, "." or ".." component, no NUL, at most
// kMaxPathBytes. Returns the problem, or "" when fine.
std::string pathProblem(std::string_view path);

const char *entryTypeName(EntryType type);

} // namespace paddock::checkpoint
