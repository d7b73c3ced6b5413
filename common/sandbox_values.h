#pragma once
// Values the pool and the broker both speak of, defined once: a claimed sandbox, one file of a
// workspace snapshot, and a chunk of one file's content. pool.proto carries them between the two
// processes; pool/server and broker/pool_client convert at their gRPC edges, and both sides use
// these structs inside. The console has Qt twins of SnapshotFile (models/sandbox_types.h), because
// its models hold QStrings.
//
// Threads: plain values.

#include <cstdint>
#include <string>

namespace paddock {

struct ClaimedSandbox {
    std::string sandboxId;
    std::string tier;
    std::string runtime;
    std::string host;
    bool warm = false;       // taken from the warm pool (not started for this claim)
    double claimMs = 0;
};

struct SnapshotFile {
    std::string path;        // relative to /workspace, "/"-separated
    bool isDir = false;
    bool isSymlink = false;
    std::string symlinkTarget;
    int64_t size = 0;
    uint32_t mode = 0;
    int64_t mtimeUnixMs = 0;
};

struct SnapshotChunk {
    std::string content;
    int64_t offset = 0;
    int64_t size = 0;        // the whole file
    bool eof = false;
};

} // namespace paddock
