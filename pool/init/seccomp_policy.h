#pragma once
// The seccomp filter of every tier, built with libseccomp. The sandbox init loads it on itself
// before it answers its first request, so every command, and the init, run under it; nothing
// inside can lift it (a filter only ever narrows). Under bwrap and crun it guards the host's
// kernel. Under runsc it is enforced by gVisor's kernel (which implements seccomp), so a command
// gets the same EPERM on every tier; the host's kernel is guarded there by runsc's own filter on
// its sentry and gofer, which stays as gVisor ships it.
//
// The policy is a deny list in the spirit of the container engines' default profiles: every system
// call an agent has a use for is allowed, and the groups below, each with the reason it is denied,
// return EPERM (never a kill: a program that probes for, say, io_uring falls back politely). The
// list is kSeccompGroups, the one place to read or change it; docs/security.md explains each group.
//
// Threads: plain functions and constant data.

#include <string>
#include <vector>

namespace paddock::pool::init {

struct SeccompGroup {
    const char *name;                     // "keyring", "mount", ...
    const char *reason;                   // why an agent gets EPERM for these
    std::vector<const char *> syscalls;   // denied outright
};

// Every group denied outright. The argument-dependent rules (clone and unshare with namespace
// flags, the TIOCSTI and TIOCLINUX ioctls, clone3) are listed in seccompArgumentRules().
const std::vector<SeccompGroup> &seccompGroups();

// The rules that look at an argument, for the docs and the report: one line each.
std::vector<std::string> seccompArgumentRules();

// Builds the filter (native, x86 and x32 system call tables, so a 32-bit call cannot slip past)
// and loads it on the calling thread, setting no_new_privs. Returns an empty string on success,
// else what failed.
std::string loadSeccompFilter();

} // namespace paddock::pool::init
