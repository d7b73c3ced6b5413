#pragma once
// EgressProxy's loop state, shared by egress_proxy.cpp (the public methods, which post commands to
// the loop, and the loop and resolver threads' main functions) and egress_proxy_loop.cpp (what the
// loop does: accepting, reading a request head, connecting, relaying, reporting attempts).
// Not for anyone outside EgressProxy.
//
// Threads: everything here belongs to the loop thread (Job is handed to a resolver thread and
// back through EgressProxy's queues); the loop's state is the destructor's once the threads are
// joined.

#include "pool/egress/egress_proxy.h"
#include "pool/egress/proxy_request.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace paddock::pool::egress {

// epoll tags: the kind in the top byte, an id below.
constexpr uint64_t kTagWake = 1;
constexpr uint64_t kTagListener = 2;
constexpr uint64_t kTagConn = 3;
constexpr int kMaxIdleTickMs = 1000;
constexpr size_t kReadChunk = 16 * 1024;

inline uint64_t tag(uint64_t kind, uint64_t id) { return (kind << 56) | id; }

// A bounded byte queue: data[off..] is pending.
struct Buffer {
    std::string data;
    size_t off = 0;
    size_t size() const { return data.size() - off; }
    bool empty() const { return size() == 0; }
    void consume(size_t n)
    {
        off += n;
        if (off == data.size()) {
            data.clear();
            off = 0;
        } else if (off >= kReadChunk * 4) {
            data.erase(0, off);   // a reader that never catches up must not grow the string
            off = 0;
        }
    }
};

struct EgressProxy::Conn {
    enum class State { Head, Resolving, Connecting, Relay, Closing };
    uint64_t id = 0;
    std::string sandbox;
    int client = -1;
    int upstream = -1;
    State state = State::Head;
    std::string head;
    ProxyRequest request;
    Buffer c2u;   // sandbox -> destination
    Buffer u2c;   // destination -> sandbox (and error responses)
    bool clientEof = false, upstreamEof = false, clientShut = false, upstreamShut = false;
    bool hasAttempt = false;
    bool reported = false;
    bool counted = false;   // counts against the sandbox's relay limit
    EgressAttempt attempt;
    std::vector<IpAddress> addresses;
    size_t nextAddress = 0;
    int64_t startUs = 0;
    int64_t lastUs = 0;
};

struct EgressProxy::Sandbox {
    std::string id;
    int listenFd = -1;
    uint64_t listenerId = 0;
    std::shared_ptr<const Allowlist> allowlist;
    std::map<uint64_t, std::shared_ptr<const Grants>> grantsByHolder;
    std::shared_ptr<const Grants> grants;   // the union of grantsByHolder; null when none
    std::vector<EgressAttempt> attempts;
    int64_t dropped = 0;
    std::set<uint64_t> conns;
    int relaying = 0;
    struct Waiter {
        int64_t deadlineUs;
        AttemptsDone done;
    };
    std::vector<Waiter> waiters;
};

struct EgressProxy::Job {
    uint64_t connId = 0;
    std::string host;
    int port = 0;
    std::shared_ptr<const Allowlist> allowlist;
    std::shared_ptr<const Grants> grants;   // null: none
    Decision decision;
};

struct EgressProxy::Loop {
    EgressProxy &proxy;
    std::map<uint64_t, std::unique_ptr<Conn>> conns;
    std::map<std::string, std::unique_ptr<Sandbox>> sandboxes;
    std::map<uint64_t, Sandbox *> listeners;
    std::set<uint64_t> touched;   // conns to pump after the current batch of commands
    uint64_t nextId = 1;

    explicit Loop(EgressProxy &p) : proxy(p) {}

    const EgressLimits &limits() const { return proxy.m_limits; }

    void watch(int fd, uint64_t id);
    void unionGrants(Sandbox &sb);
    void record(Sandbox &sb, EgressAttempt attempt);
    void accept(Sandbox &sb);
    void refuse(Conn &c, int code, const char *status, std::string reason, std::string detail);
    void onHead(Conn &c, Sandbox &sb);
    void onResolved(const Job &job);
    void startConnect(Conn &c);
    bool pump(Conn &c, Sandbox &sb);
    // pump's steps (egress_proxy_loop.cpp).
    bool readHead(Conn &c, Sandbox &sb, char (&buf)[kReadChunk], bool &progress);
    void checkConnected(Conn &c, bool &progress);
    bool relay(Conn &c, char (&buf)[kReadChunk], bool &progress);
    bool sendToClient(Conn &c, bool &progress);
    bool relayOver(Conn &c);
    void finish(uint64_t id);
    void serveWaiters(Sandbox &sb, int64_t now);
    int tick();
    void pumpTouched();
};

} // namespace paddock::pool::egress
