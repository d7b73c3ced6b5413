#pragma once
// XDG base directories (https://specifications.freedesktop.org/basedir-spec/) for Paddock's files.

#include <filesystem>
#include <string>

namespace paddock {

std::filesystem::path xdgConfigHome();   // $XDG_CONFIG_HOME or ~/.config
std::filesystem::path xdgDataHome();     // $XDG_DATA_HOME or ~/.local/share
std::filesystem::path xdgStateHome();    // $XDG_STATE_HOME or ~/.local/state
std::filesystem::path xdgRuntimeDir();   // $XDG_RUNTIME_DIR, or /tmp/paddock-<uid> when unset

// Default locations of Paddock's own files.
std::filesystem::path defaultConfigDir();         // <config>/paddock
std::filesystem::path defaultDataDir();           // <data>/paddock
std::filesystem::path defaultBrokerSocketPath();  // <runtime>/paddock/broker.sock

// Creates dir (and parents) and sets it to mode (e.g. 0700). Returns an empty string or an error.
std::string ensurePrivateDirectory(const std::filesystem::path &dir, unsigned mode = 0700);

} // namespace paddock
