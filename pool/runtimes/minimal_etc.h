#pragma once
// The /etc every sandbox sees: built by the pool at start from one list (kMinimalEtc in
// minimal_etc.cpp, documented in docs/pool.md "The sandbox's /etc"), never the host's. Some
// entries are written by the pool (passwd and group with the sandbox's own users, hosts,
// nsswitch.conf, hostname); the rest are copied from the host as they are at start (the CA
// bundle, ld.so.cache, the time zone, Debian's alternatives links...). The operator adds host
// paths with pool.toml's `etc_extra`. Copies, not binds: a host file changed or added later does
// not reach a sandbox, and nothing but the listed names exists inside.
//
// Threads: plain functions; the pool calls buildMinimalEtc once at start, before any sandbox.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace paddock::pool {

struct MinimalEtcEntry {
    const char *path;     // relative to /etc
    const char *purpose;  // what programs need it for
    bool networkOnly;     // only for tiers with a network (the egress proxy)
    bool generated;       // written by the pool, not copied from the host
};

// The list, for docs and tests.
const std::vector<MinimalEtcEntry> &minimalEtcEntries();

// Builds <dir>/base and <dir>/network (the same plus the network-only entries), read-only trees
// to bind at /etc. A listed host file that is absent is left out (not every host has every
// one); an `extra` path that is absent is FailedPrecondition, naming etc_extra. passwd and group
// name `uid` and `gid` (the ids sandbox processes have inside) root, or "sandbox" when not 0.
Status buildMinimalEtc(const std::filesystem::path &dir, const std::vector<std::string> &extra, uint32_t uid, uint32_t gid);

// Which of the two trees a tier binds.
std::filesystem::path minimalEtcFor(const std::filesystem::path &dir, bool network);

// Problems with an etc_extra entry: not absolute under /etc, missing (error); not world-readable
// (a warning: every sandbox will read it). Empty when fine.
struct EtcExtraCheck {
    std::string error;
    std::string warning;
};
EtcExtraCheck checkEtcExtra(const std::string &path);

} // namespace paddock::pool
