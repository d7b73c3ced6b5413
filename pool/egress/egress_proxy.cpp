#include "pool/egress/egress_proxy.h"
#include "pool/egress/proxy_request.h"

#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <future>
#include <set>

namespace paddock::pool::egress {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kTagWake = 1;
constexpr uint64_t kTagListener = 2;
constexpr uint64_t kTagConn = 3;
constexpr int kMaxIdleTickMs = 1000;
constexpr size_t kReadChunk = 16 * 1024;

uint64_t tag(uint64_t kind, uint64_t id) { return (kind << 56) | id; }

int64_t unixMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string httpResponse(int code, const char *status, const std::string &text)
{
    const std::string body = "paddock egress proxy: " + text + "\n";
    return "HTTP/1.1 " + std::to_string(code) + " " + status + "\r\nContent-Type: text/plain; charset=utf-8\r\n" +
           "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

} // namespace

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

    void watch(int fd, uint64_t id)
    {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.u64 = tag(kTagConn, id);
        ::epoll_ctl(proxy.m_epollFd, EPOLL_CTL_ADD, fd, &ev);
    }

    void unionGrants(Sandbox &sb)
    {
        auto all = std::make_shared<Grants>();
        for (const auto &[holder, grants] : sb.grantsByHolder)
            all->insert(all->end(), grants->begin(), grants->end());
        sb.grants = all->empty() ? nullptr : std::move(all);
    }

    void record(Sandbox &sb, EgressAttempt attempt)
    {
        if (sb.attempts.size() >= limits().maxAttemptsKept) {
            sb.dropped++;
            return;
        }
        sb.attempts.push_back(std::move(attempt));
    }

    void accept(Sandbox &sb)
    {
        for (;;) {
            int fd = ::accept4(sb.listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                return;
            // Connections still reading their head count too, at twice the relay limit, so a
            // sandbox cannot hold an unbounded number of them open.
            if (sb.conns.size() >= static_cast<size_t>(2 * limits().maxConnectionsPerSandbox)) {
                EgressAttempt a;
                a.reason = "too_many_connections";
                a.detail = "more than " + std::to_string(2 * limits().maxConnectionsPerSandbox) +
                           " connections open to the egress proxy";
                a.timeUnixMs = unixMs();
                record(sb, std::move(a));
                const std::string resp = httpResponse(503, "Service Unavailable", "too many connections from this sandbox");
                (void)!::write(fd, resp.data(), resp.size());
                ::close(fd);
                continue;
            }
            auto c = std::make_unique<Conn>();
            c->id = nextId++;
            c->sandbox = sb.id;
            c->client = fd;
            c->startUs = c->lastUs = monotonicUs();
            c->attempt.timeUnixMs = unixMs();
            watch(fd, c->id);
            sb.conns.insert(c->id);
            touched.insert(c->id);
            conns.emplace(c->id, std::move(c));
        }
    }

    void refuse(Conn &c, int code, const char *status, std::string reason, std::string detail)
    {
        c.attempt.allowed = false;
        c.attempt.reason = std::move(reason);
        c.attempt.detail = std::move(detail);
        c.u2c.data += httpResponse(code, status,
                                   "refused " + c.attempt.host + ":" + std::to_string(c.attempt.port) + " (" +
                                       c.attempt.reason + "): " + c.attempt.detail);
        c.state = Conn::State::Closing;
    }

    void onHead(Conn &c, Sandbox &sb)
    {
        c.hasAttempt = true;
        c.request = parseProxyRequest(c.head);
        c.attempt.method = c.request.method;
        c.attempt.host = c.request.host;
        c.attempt.port = c.request.port;
        if (!c.request.error.empty()) {
            refuse(c, 400, "Bad Request", "bad_request", c.request.error);
            return;
        }
        if (sb.relaying >= limits().maxConnectionsPerSandbox) {
            refuse(c, 503, "Service Unavailable", "too_many_connections",
                   "this sandbox already has " + std::to_string(sb.relaying) + " connections through the proxy (the limit)");
            return;
        }
        // Bytes the client sent after the head go upstream once connected.
        const size_t end = c.head.find("\r\n\r\n") + 4;
        c.c2u.data = c.head.substr(end);
        c.head.clear();
        sb.relaying++;
        c.counted = true;
        c.state = Conn::State::Resolving;
        auto job = std::make_unique<Job>();
        job->connId = c.id;
        job->host = c.request.host;
        job->port = c.request.port;
        job->allowlist = sb.allowlist;
        job->grants = sb.grants;
        {
            std::lock_guard lock(proxy.m_mutex);
            proxy.m_jobs.push_back(std::move(job));
        }
        proxy.m_jobsCv.notify_one();
    }

    void onResolved(const Job &job)
    {
        auto it = conns.find(job.connId);
        if (it == conns.end())
            return;   // the sandbox or the client went away meanwhile
        Conn &c = *it->second;
        const Decision &d = job.decision;
        c.attempt.host = d.host;
        c.attempt.address = d.address;
        c.attempt.reviewId = d.reviewId;
        c.lastUs = monotonicUs();
        if (!d.allowed) {
            const bool unresolvable = d.reason == "unresolvable";
            refuse(c, unresolvable ? 502 : 403, unresolvable ? "Bad Gateway" : "Forbidden", d.reason, d.detail);
        } else {
            c.attempt.allowed = true;
            c.addresses = d.addresses;
            c.nextAddress = 0;
            startConnect(c);
        }
        touched.insert(c.id);
    }

    // Connects to the next checked address; on none left, answers 502.
    void startConnect(Conn &c)
    {
        if (c.upstream >= 0) {
            ::close(c.upstream);
            c.upstream = -1;
        }
        while (c.nextAddress < c.addresses.size()) {
            const IpAddress &a = c.addresses[c.nextAddress++];
            c.attempt.address = a.toString();
            sockaddr_storage ss{};
            socklen_t len;
            if (a.v6) {
                auto *sin6 = reinterpret_cast<sockaddr_in6 *>(&ss);
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(static_cast<uint16_t>(c.attempt.port));
                std::memcpy(&sin6->sin6_addr, a.bytes.data(), 16);
                len = sizeof *sin6;
            } else {
                auto *sin = reinterpret_cast<sockaddr_in *>(&ss);
                sin->sin_family = AF_INET;
                sin->sin_port = htons(static_cast<uint16_t>(c.attempt.port));
                std::memcpy(&sin->sin_addr, a.bytes.data(), 4);
                len = sizeof *sin;
            }
            int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                c.attempt.error = std::string("socket: ") + std::strerror(errno);
                continue;
            }
            if (::connect(fd, reinterpret_cast<sockaddr *>(&ss), len) != 0 && errno != EINPROGRESS) {
                c.attempt.error = std::string("connect to ") + c.attempt.address + ": " + std::strerror(errno);
                ::close(fd);
                continue;
            }
            c.upstream = fd;
            c.state = Conn::State::Connecting;
            c.lastUs = monotonicUs();
            watch(fd, c.id);
            return;
        }
        c.u2c.data += httpResponse(502, "Bad Gateway", "cannot connect to " + c.attempt.host + ":" +
                                                           std::to_string(c.attempt.port) + ": " + c.attempt.error);
        c.state = Conn::State::Closing;
    }

    // Moves bytes as far as they go. false: the connection is finished.
    bool pump(Conn &c, Sandbox &sb)
    {
        char buf[kReadChunk];
        for (int round = 0; round < 64; ++round) {
            bool progress = false;
            if (c.state == Conn::State::Head) {
                const size_t room = limits().maxHeadBytes - c.head.size();
                ssize_t n = ::read(c.client, buf, std::min(room, sizeof buf));
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                    return false;   // gone before asking for anything: nothing to record
                if (n > 0) {
                    c.head.append(buf, static_cast<size_t>(n));
                    c.lastUs = monotonicUs();
                    progress = true;
                    if (c.head.find("\r\n\r\n") != std::string::npos) {
                        onHead(c, sb);
                    } else if (c.head.size() >= limits().maxHeadBytes) {
                        c.hasAttempt = true;
                        refuse(c, 431, "Request Header Fields Too Large", "bad_request",
                               "request head longer than " + std::to_string(limits().maxHeadBytes) + " bytes");
                    }
                }
            }
            if (c.state == Conn::State::Connecting) {
                int err = 0;
                socklen_t len = sizeof err;
                pollfd p{c.upstream, POLLOUT, 0};
                if (::poll(&p, 1, 0) == 1) {
                    ::getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &len);
                    if (err != 0) {
                        c.attempt.error = std::string("connect to ") + c.attempt.address + ": " + std::strerror(err);
                        startConnect(c);
                    } else {
                        c.attempt.error.clear();
                        c.state = Conn::State::Relay;
                        c.lastUs = monotonicUs();
                        if (c.request.tunnel)
                            c.u2c.data += "HTTP/1.1 200 Connection established\r\n\r\n";
                        else
                            c.c2u.data.insert(0, c.request.forwardHead);
                    }
                    progress = true;
                }
            }
            if (c.state == Conn::State::Relay) {
                // client -> upstream
                if (!c.clientEof && c.c2u.size() < limits().bufferBytes) {
                    ssize_t n = ::read(c.client, buf, std::min(limits().bufferBytes - c.c2u.size(), sizeof buf));
                    if (n > 0) {
                        c.c2u.data.append(buf, static_cast<size_t>(n));
                        progress = true;
                    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                        c.clientEof = true;
                        progress = true;
                    }
                }
                if (!c.c2u.empty()) {
                    ssize_t n = ::send(c.upstream, c.c2u.data.data() + c.c2u.off, c.c2u.size(), MSG_NOSIGNAL);
                    if (n > 0) {
                        // The plain-HTTP head the proxy wrote is not the sandbox's bytes, but close enough.
                        c.attempt.bytesOut += n;
                        c.c2u.consume(static_cast<size_t>(n));
                        progress = true;
                    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        c.attempt.error = std::string("send: ") + std::strerror(errno);
                        return false;
                    }
                }
                if (c.clientEof && c.c2u.empty() && !c.upstreamShut) {
                    ::shutdown(c.upstream, SHUT_WR);
                    c.upstreamShut = true;
                }
                // upstream -> client
                if (!c.upstreamEof && c.u2c.size() < limits().bufferBytes) {
                    ssize_t n = ::read(c.upstream, buf, std::min(limits().bufferBytes - c.u2c.size(), sizeof buf));
                    if (n > 0) {
                        c.attempt.bytesIn += n;
                        c.u2c.data.append(buf, static_cast<size_t>(n));
                        progress = true;
                    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                        if (n < 0)
                            c.attempt.error = std::string("receive: ") + std::strerror(errno);
                        c.upstreamEof = true;
                        progress = true;
                    }
                }
            }
            if ((c.state == Conn::State::Relay || c.state == Conn::State::Closing) && !c.u2c.empty()) {
                ssize_t n = ::send(c.client, c.u2c.data.data() + c.u2c.off, c.u2c.size(), MSG_NOSIGNAL);
                if (n > 0) {
                    c.u2c.consume(static_cast<size_t>(n));
                    progress = true;
                } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    return false;
                }
            }
            if (c.state == Conn::State::Closing && c.u2c.empty())
                return false;
            if (c.state == Conn::State::Relay) {
                if (c.upstreamEof && c.u2c.empty() && !c.clientShut) {
                    ::shutdown(c.client, SHUT_WR);
                    c.clientShut = true;
                }
                if (c.clientShut && c.upstreamShut)
                    return false;
                // A client that closed while the destination still talks: the reply has nowhere to go.
                if (c.upstreamEof && c.clientEof)
                    return false;
            }
            if (progress)
                c.lastUs = monotonicUs();
            else
                return true;
        }
        touched.insert(c.id);   // more to do: come back after other connections had a turn
        return true;
    }

    void finish(uint64_t id)
    {
        auto it = conns.find(id);
        if (it == conns.end())
            return;
        Conn &c = *it->second;
        if (c.client >= 0)
            ::close(c.client);
        if (c.upstream >= 0)
            ::close(c.upstream);
        auto sbIt = sandboxes.find(c.sandbox);
        if (sbIt != sandboxes.end()) {
            Sandbox &sb = *sbIt->second;
            sb.conns.erase(id);
            if (c.counted)
                sb.relaying--;
            if (c.hasAttempt && !c.reported) {
                c.attempt.durationMs = static_cast<double>(monotonicUs() - c.startUs) / 1000.0;
                record(sb, std::move(c.attempt));
            }
        }
        conns.erase(it);
    }

    // Waiters whose sandbox has nothing open, or whose deadline passed, get the attempts.
    void serveWaiters(Sandbox &sb, int64_t now)
    {
        if (sb.waiters.empty())
            return;
        bool anyOpen = false;
        for (uint64_t id : sb.conns) {
            auto it = conns.find(id);
            if (it != conns.end() && it->second->state != Conn::State::Head)
                anyOpen = true;
        }
        bool due = !anyOpen;
        for (const auto &w : sb.waiters)
            due = due || w.deadlineUs <= now;
        if (!due)
            return;
        std::vector<EgressAttempt> out = std::move(sb.attempts);
        sb.attempts.clear();
        if (sb.dropped > 0) {
            EgressAttempt a;
            a.reason = "not_recorded";
            a.detail = std::to_string(sb.dropped) + " more attempts were not recorded (at most " +
                       std::to_string(limits().maxAttemptsKept) + " are kept between execs)";
            a.timeUnixMs = unixMs();
            out.push_back(std::move(a));
            sb.dropped = 0;
        }
        for (uint64_t id : sb.conns) {
            auto it = conns.find(id);
            if (it == conns.end() || !it->second->hasAttempt || it->second->reported || it->second->state == Conn::State::Head)
                continue;
            Conn &c = *it->second;
            EgressAttempt a = c.attempt;
            a.open = true;
            a.durationMs = static_cast<double>(now - c.startUs) / 1000.0;
            c.reported = true;
            out.push_back(std::move(a));
        }
        auto waiters = std::move(sb.waiters);
        sb.waiters.clear();
        // Every waiter gets the batch once; the first one that asked gets it all.
        for (size_t i = 0; i < waiters.size(); ++i)
            waiters[i].done(i == 0 ? std::move(out) : std::vector<EgressAttempt>{});
    }

    // Timeouts and waiter deadlines; returns the epoll timeout until the next one.
    int tick()
    {
        const int64_t now = monotonicUs();
        std::vector<uint64_t> expired;
        for (auto &[id, c] : conns) {
            const int64_t age = (now - c->lastUs) / 1000;
            if ((c->state == Conn::State::Head && age > limits().headTimeoutMs) ||
                (c->state == Conn::State::Connecting && age > limits().connectTimeoutMs) ||
                (c->state == Conn::State::Relay && age > limits().idleTimeoutMs) ||
                (c->state == Conn::State::Closing && age > limits().headTimeoutMs)) {
                if (c->state == Conn::State::Connecting) {
                    c->attempt.error = "connect to " + c->attempt.address + ": timed out";
                    startConnect(*c);
                    touched.insert(id);
                    continue;
                }
                if (c->state == Conn::State::Relay)
                    c->attempt.error = "closed after " + std::to_string(limits().idleTimeoutMs) + " ms without traffic";
                expired.push_back(id);
            }
        }
        for (uint64_t id : expired)
            finish(id);
        int64_t nextUs = now + kMaxIdleTickMs * 1000;
        for (auto &[id, sb] : sandboxes) {
            serveWaiters(*sb, now);
            for (const auto &w : sb->waiters)
                nextUs = std::min(nextUs, w.deadlineUs);
        }
        return static_cast<int>(std::max<int64_t>(1, (nextUs - now + 999) / 1000));
    }

    void pumpTouched()
    {
        while (!touched.empty()) {
            auto batch = std::move(touched);
            touched.clear();
            std::set<std::string> sandboxesTouched;
            for (uint64_t id : batch) {
                auto it = conns.find(id);
                if (it == conns.end())
                    continue;
                auto sbIt = sandboxes.find(it->second->sandbox);
                if (sbIt == sandboxes.end())
                    continue;
                sandboxesTouched.insert(it->second->sandbox);
                if (!pump(*it->second, *sbIt->second))
                    finish(id);
            }
            const int64_t now = monotonicUs();
            for (const auto &name : sandboxesTouched)
                if (auto sbIt = sandboxes.find(name); sbIt != sandboxes.end())
                    serveWaiters(*sbIt->second, now);
        }
    }
};

EgressProxy::EgressProxy(EgressLimits limits, Resolver resolver)
    : m_limits(limits), m_resolver(std::move(resolver)), m_loop(std::make_unique<Loop>(*this))
{
    m_wakeFd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    m_epollFd = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kTagWake, 0);
    ::epoll_ctl(m_epollFd, EPOLL_CTL_ADD, m_wakeFd, &ev);
    m_threads.emplace_back([this] { loopMain(); });
    for (int i = 0; i < kResolverThreads; ++i)
        m_threads.emplace_back([this] { resolverMain(); });
}

EgressProxy::~EgressProxy()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_jobsCv.notify_all();
    uint64_t one = 1;
    (void)!::write(m_wakeFd, &one, sizeof one);
    for (auto &t : m_threads)
        t.join();
    // The loop thread is gone: its state is ours now.
    for (auto &[id, c] : m_loop->conns) {
        if (c->client >= 0)
            ::close(c->client);
        if (c->upstream >= 0)
            ::close(c->upstream);
    }
    for (auto &[id, sb] : m_loop->sandboxes) {
        ::close(sb->listenFd);
        for (auto &w : sb->waiters)
            w.done({});
    }
    m_commands.clear();   // takeAttempts() callbacks among them answer empty as they are dropped
    ::close(m_epollFd);
    ::close(m_wakeFd);
}

void EgressProxy::post(std::function<void()> fn)
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_stopping) {
            m_commands.push_back(std::move(fn));
            fn = nullptr;
        }
    }
    if (fn)
        return;   // stopped: dropped here, outside the lock (a dropped takeAttempts answers empty)
    uint64_t one = 1;
    (void)!::write(m_wakeFd, &one, sizeof one);
}

Status EgressProxy::addSandbox(const std::string &sandboxId, const fs::path &socketPath,
                               std::shared_ptr<const Allowlist> allowlist)
{
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create the egress socket: ") + std::strerror(errno));
    // Bound through the directory's descriptor: deep state directories exceed sun_path.
    int dirFd = ::open(socketPath.parent_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = socketPath.filename().string();
    const std::string bindPath = "/proc/self/fd/" + std::to_string(dirFd) + "/" + name;
    std::strncpy(addr.sun_path, bindPath.c_str(), sizeof addr.sun_path - 1);
    if (dirFd >= 0)
        ::unlinkat(dirFd, name.c_str(), 0);
    const bool ok = dirFd >= 0 && ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 && ::listen(fd, 128) == 0;
    const int err = errno;
    if (dirFd >= 0) {
        ::fchmodat(dirFd, name.c_str(), 0600, 0);
        ::close(dirFd);
    }
    if (!ok) {
        ::close(fd);
        return fail(ErrorCode::Internal, "cannot create the egress socket " + socketPath.string() + ": " +
                                             std::strerror(err) + "; check the pool's state directory");
    }
    post([this, sandboxId, fd, allowlist = std::move(allowlist)] {
        auto &loop = *m_loop;
        if (auto old = loop.sandboxes.find(sandboxId); old != loop.sandboxes.end()) {
            ::close(old->second->listenFd);
            loop.listeners.erase(old->second->listenerId);
        }
        auto sb = std::make_unique<Sandbox>();
        sb->id = sandboxId;
        sb->listenFd = fd;
        sb->listenerId = loop.nextId++;
        sb->allowlist = allowlist;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = tag(kTagListener, sb->listenerId);
        ::epoll_ctl(m_epollFd, EPOLL_CTL_ADD, fd, &ev);
        loop.listeners[sb->listenerId] = sb.get();
        loop.sandboxes[sandboxId] = std::move(sb);
    });
    return {};
}

void EgressProxy::removeSandbox(const std::string &sandboxId)
{
    auto done = std::make_shared<std::promise<void>>();
    auto future = done->get_future();
    post([this, sandboxId, done] {
        auto &loop = *m_loop;
        auto it = loop.sandboxes.find(sandboxId);
        if (it != loop.sandboxes.end()) {
            Sandbox &sb = *it->second;
            ::close(sb.listenFd);
            loop.listeners.erase(sb.listenerId);
            for (uint64_t id : std::vector<uint64_t>(sb.conns.begin(), sb.conns.end())) {
                auto c = loop.conns.find(id);
                if (c == loop.conns.end())
                    continue;
                if (c->second->client >= 0)
                    ::close(c->second->client);
                if (c->second->upstream >= 0)
                    ::close(c->second->upstream);
                loop.conns.erase(c);
            }
            for (auto &w : sb.waiters)
                w.done({});
            loop.sandboxes.erase(it);
        }
        done->set_value();
    });
    // Wait, so the socket is closed before the sandbox's directory is deleted. A stopped proxy
    // runs no more commands: do not wait forever for it.
    if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
        spdlog::warn("egress proxy did not remove sandbox {} in time", sandboxId);
}

void EgressProxy::addGrants(const std::string &sandboxId, uint64_t holder, std::shared_ptr<const Grants> grants)
{
    post([this, sandboxId, holder, grants = std::move(grants)] {
        auto it = m_loop->sandboxes.find(sandboxId);
        if (it == m_loop->sandboxes.end())
            return;
        it->second->grantsByHolder[holder] = grants;
        m_loop->unionGrants(*it->second);
    });
}

void EgressProxy::revokeGrants(const std::string &sandboxId, uint64_t holder)
{
    post([this, sandboxId, holder] {
        auto it = m_loop->sandboxes.find(sandboxId);
        if (it == m_loop->sandboxes.end())
            return;
        it->second->grantsByHolder.erase(holder);
        m_loop->unionGrants(*it->second);
    });
}

void EgressProxy::takeAttempts(const std::string &sandboxId, int64_t waitMs, AttemptsDone done)
{
    // Called exactly once: with the attempts, or empty if the proxy stops first.
    struct Once {
        AttemptsDone fn;
        ~Once()
        {
            if (fn)
                fn({});
        }
    };
    auto once = std::make_shared<Once>();
    once->fn = std::move(done);
    post([this, sandboxId, waitMs, once] {
        AttemptsDone fn = std::move(once->fn);
        once->fn = nullptr;
        auto it = m_loop->sandboxes.find(sandboxId);
        if (it == m_loop->sandboxes.end()) {
            fn({});
            return;
        }
        it->second->waiters.push_back({monotonicUs() + waitMs * 1000, std::move(fn)});
        m_loop->serveWaiters(*it->second, monotonicUs());
    });
}

std::vector<EgressAttempt> EgressProxy::takeAttemptsBlocking(const std::string &sandboxId, int64_t waitMs)
{
    auto promise = std::make_shared<std::promise<std::vector<EgressAttempt>>>();
    auto future = promise->get_future();
    takeAttempts(sandboxId, waitMs, [promise](std::vector<EgressAttempt> a) { promise->set_value(std::move(a)); });
    if (future.wait_for(std::chrono::milliseconds(waitMs + 5000)) != std::future_status::ready)
        return {};
    return future.get();
}

void EgressProxy::loopMain()
{
    Loop &loop = *m_loop;
    epoll_event events[64];
    int timeoutMs = kMaxIdleTickMs;
    for (;;) {
        int n = ::epoll_wait(m_epollFd, events, 64, timeoutMs);
        std::deque<std::function<void()>> commands;
        {
            std::lock_guard lock(m_mutex);
            if (m_stopping)
                return;
            commands.swap(m_commands);
        }
        for (int i = 0; i < n; ++i) {
            const uint64_t kind = events[i].data.u64 >> 56;
            const uint64_t id = events[i].data.u64 & ((uint64_t{1} << 56) - 1);
            if (kind == kTagWake) {
                uint64_t count;
                (void)!::read(m_wakeFd, &count, sizeof count);
            } else if (kind == kTagListener) {
                if (auto it = loop.listeners.find(id); it != loop.listeners.end())
                    loop.accept(*it->second);
            } else if (kind == kTagConn) {
                loop.touched.insert(id);
            }
        }
        for (auto &command : commands)
            command();
        loop.pumpTouched();
        timeoutMs = loop.tick();
        loop.pumpTouched();
    }
}

void EgressProxy::resolverMain()
{
    for (;;) {
        std::unique_ptr<Job> job;
        {
            std::unique_lock lock(m_mutex);
            m_jobsCv.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
            if (m_stopping)
                return;
            job = std::move(m_jobs.front());
            m_jobs.pop_front();
        }
        job->decision = job->grants ? decide(job->host, job->port, *job->allowlist, m_resolver, *job->grants)
                                    : decide(job->host, job->port, *job->allowlist, m_resolver);
        std::shared_ptr<Job> shared(std::move(job));
        post([this, shared] { m_loop->onResolved(*shared); });
    }
}

} // namespace paddock::pool::egress
