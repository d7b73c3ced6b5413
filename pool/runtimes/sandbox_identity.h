#pragma once
// Who a sandbox is on its host. A pool run as root gives every sandbox a block of host uids and
// gids of its own, taken from the range in pool.toml ([sandbox_identity]): sandbox root is the
// block's first uid, never host root, and no two live sandboxes share a uid. The block is mapped
// into the sandbox's user namespace (bwrap: one the pool makes and the runtime joins; runsc and
// crun: the OCI spec's uidMappings), so a file written inside belongs to that uid outside and a
// host file shows as nobody inside. A pool run as an ordinary user cannot map other uids: its
// sandboxes are that user, with every capability dropped (docs/security.md says what holds then).
//
// Threads: IdentityAllocator is internally locked; the rest are plain functions.

#include "common/result.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::pool {

// One sandbox's host identity. count == 0: no mapping of the pool's (the sandbox is the pool's
// own user, an unprivileged pool).
struct SandboxIdentity {
    uint32_t hostId = 0;    // host uid (and gid) of sandbox root
    uint32_t count = 0;     // ids mapped: sandbox ids 0..count-1 are host hostId..hostId+count-1
    int userNsFd = -1;      // a user namespace with that mapping (bwrap joins it); -1: none

    bool mapped() const { return count > 0; }
};

class IdentityAllocator;

// A block held by one sandbox: given back to its allocator when the lease is released or
// destroyed (an empty lease, from no allocator, gives nothing back). Move-only.
class IdentityLease {
public:
    IdentityLease() = default;
    IdentityLease(IdentityAllocator *allocator, SandboxIdentity identity) : m_allocator(allocator), m_identity(identity) {}
    IdentityLease(IdentityLease &&other) noexcept { *this = std::move(other); }
    IdentityLease &operator=(IdentityLease &&other) noexcept;
    ~IdentityLease() { release(); }

    const SandboxIdentity &identity() const { return m_identity; }
    void release();

private:
    IdentityAllocator *m_allocator = nullptr;
    SandboxIdentity m_identity;
};

// The [sandbox_identity] table of pool.toml.
struct IdentityRange {
    uint32_t firstId = 1000000000;   // documented default (docs/security.md): far from real users and /etc/subuid's 100000+
    uint32_t count = 1u << 26;       // 1024 blocks of 65536
    uint32_t idsPerSandbox = 65536;  // every id a Linux distribution uses, nobody (65534) included
};

// Empty when the range can hold `sandboxes` blocks and touches no user or group of this host
// (passwd and group through NSS, and other users' /etc/subuid ranges); else each problem with the
// key to change and how.
std::vector<std::string> checkIdentityRange(const IdentityRange &range, int64_t sandboxes);

// Hands out blocks of a range, lowest free first; each block's user namespace is made on first use
// and kept, so a sandbox start only joins it.
class IdentityAllocator {
public:
    explicit IdentityAllocator(IdentityRange range);
    ~IdentityAllocator();
    IdentityAllocator(const IdentityAllocator &) = delete;
    IdentityAllocator &operator=(const IdentityAllocator &) = delete;

    // A free block (ResourceExhausted when every block is in use), held until the lease goes.
    Result<IdentityLease> acquire();

    const IdentityRange &range() const { return m_range; }
    // "uids 1000000000-1067108863, 65536 per sandbox"
    std::string describe() const;

private:
    friend class IdentityLease;
    void release(const SandboxIdentity &identity);

    IdentityRange m_range;
    std::mutex m_mutex;
    std::vector<int> m_userNs;     // per block: its namespace's fd, -1 until first used; guarded by m_mutex
    std::vector<bool> m_inUse;     // guarded by m_mutex
};

// A new user namespace mapping ids 0..count-1 inside to hostId.. outside, for uids and gids; its fd
// (close-on-exec). Needs root (CAP_SETUID and CAP_SETGID) to map ids other than the caller's own.
Result<int> makeUserNamespace(uint32_t hostId, uint32_t count);

// True when this process may give sandboxes ids of their own (it is root in the host's user
// namespace).
bool canMapIdentities();

} // namespace paddock::pool
