#pragma once
// Where checkpoints live: a flat namespace of keys ("chunks/ab/ab12...", "manifests/...") holding
// immutable bytes. Two backends: LocalBlobStore (files in the broker's data directory, the embedded
// default) and S3BlobStore (an S3-compatible object store, for teams). CheckpointStore
// (checkpoint_store.h) builds checkpoints on top: it names, verifies and collects; a BlobStore only
// keeps bytes.
//
// Keys are [a-z0-9._/-], at most 512 bytes, no leading '/', no "." or ".." component.
//
// Errors, the same for every backend: NotFound (no such key), Unavailable (the store did not
// answer: refused, timed out, 5xx; retry later), ResourceExhausted (the disk or the bucket is
// full), PermissionDenied (credentials refused), InvalidArgument (a bad key). Every message names
// the store and the key.
//
// Threads: every method may be called from any thread concurrently.

#include "common/result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::checkpoints {

struct BlobInfo {
    std::string key;
    int64_t size = 0;
    int64_t modifiedUnixMs = 0;
};

class BlobStore {
public:
    virtual ~BlobStore() = default;

    // "broker data directory <dir>" or "s3 bucket <b> at <endpoint>": for messages and the CLI.
    virtual std::string describe() const = 0;

    // Stores bytes under key, replacing what was there. Durable when it returns: a crash of this
    // process or of the machine right after cannot lose it (fsync for files; an S3 200 for buckets).
    virtual Status put(const std::string &key, std::string_view bytes) = 0;
    virtual Result<std::string> get(const std::string &key) = 0;
    // Whether key exists (a HEAD, a stat); false is not an error.
    virtual Result<bool> exists(const std::string &key) = 0;
    // Every key starting with prefix, sorted, with sizes.
    virtual Result<std::vector<BlobInfo>> list(const std::string &prefix) = 0;
    // Fine when the key does not exist.
    virtual Status remove(const std::string &key) = 0;
};

// "" when key is a valid blob key, else what is wrong with it.
std::string blobKeyProblem(std::string_view key);

} // namespace paddock::checkpoints
