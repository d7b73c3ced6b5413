#pragma once
// The sandbox init gives up every capability before anything of the agent's runs: the bounding
// set (so no exec can ever get one back), the ambient, permitted and effective sets. bwrap started
// inside the sandbox's user namespace leaves the bounding set full (its --cap-drop empties it only
// when bwrap makes the user namespace itself), so the pool hands the init CAP_SETPCAP alone and the
// init drops the rest, then that one. Under crun and runsc the sets arrive empty and nothing is
// left to do.
//
// Threads: called once, by the init's only thread, at start.

#include <string>

namespace paddock::pool::init {

// Empty on success (every set empty afterwards, checked); otherwise what is still held.
std::string dropAllCapabilities();

} // namespace paddock::pool::init
