#pragma once
// The sandbox's end of the egress path, part of paddock-sandbox-init. Commands of an allowlist
// tier find HTTP_PROXY / HTTPS_PROXY (and the lowercase forms) set to http://127.0.0.1:3128: a
// TCP port on the loopback of the sandbox's own network namespace, where this forwarder relays
// every connection, byte for byte, to the pool's egress proxy through the unix socket the runtime
// binds into the sandbox (/run/paddock/egress.sock). The forwarder decides nothing: the proxy on
// the host does, so a command that kills or bypasses the forwarder gains nothing (PID 1 restarts
// it; talking to the socket directly reaches the same proxy).
//
// Threads: one process, one thread (a poll loop); PID 1 forks it.

namespace paddock::pool::init {

constexpr int kEgressProxyPort = 3128;
constexpr int kEgressMaxConnections = 256;

// Listens on 127.0.0.1:port and relays to the unix socket at socketPath. Returns only when it
// cannot listen (an exit code for the process).
int runEgressForwarder(const char *socketPath, int port);

} // namespace paddock::pool::init
