#pragma once
// Message sizes between the broker and its pools. gRPC refuses a received message over 4 MiB by
// default; a checkpoint's full listing (TakeCheckpoint) or manifest (BeginRestore) is about 200
// bytes an entry, so both ends of the pool channel accept up to kMaxPoolMessageBytes: a workspace
// of about a million entries (checkpoint::kMaxEntries). Chunk batches stay at 3 MiB either way.

namespace paddock::rpc {

inline constexpr int kMaxPoolMessageBytes = 256 << 20;

} // namespace paddock::rpc
