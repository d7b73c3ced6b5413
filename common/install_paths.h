#pragma once
// Where a Paddock program finds its own installed files. The layout is relocatable: everything is
// found relative to the running executable, so <prefix>/bin/X uses
//   <prefix>/libexec/paddock/   helper programs (paddock-sandbox-init)
//   <prefix>/share/paddock/     read-only data (playbooks, examples)
// whatever the prefix (/usr for the packages, anything for `cmake --install --prefix`). From the
// build tree (build/bin/X) neither directory exists and callers fall back to where the build puts
// things: helpers next to the executable, data in the source tree.
//
// Threads: free functions without state; callable from any thread.

#include <filesystem>
#include <string_view>

namespace paddock {

// The running program's executable (/proc/self/exe); empty when it cannot be read.
std::filesystem::path currentExecutable();

// <prefix>/libexec/paddock and <prefix>/share/paddock for an executable at <prefix>/bin/X.
std::filesystem::path installedLibexecDir(const std::filesystem::path &executable);
std::filesystem::path installedDataDir(const std::filesystem::path &executable);

// A helper program: <prefix>/libexec/paddock/NAME when that is an executable file, else NAME next
// to the executable (the build tree builds every program into one directory), else ./NAME when the
// executable is unknown.
std::filesystem::path findHelperProgram(const std::filesystem::path &executable, std::string_view name);

// A data directory: <prefix>/share/paddock/SUBDIR when it is a directory, else buildTreeFallback.
std::filesystem::path findDataDir(const std::filesystem::path &executable, std::string_view subdir,
                                  const std::filesystem::path &buildTreeFallback);

} // namespace paddock
