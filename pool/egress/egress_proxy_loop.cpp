// What EgressProxy's loop thread does (egress_proxy_loop.h): accepting a sandbox's connections,
// reading and deciding a request head, connecting to the checked addresses, relaying both ways
// within the buffer limits, closing what timed out, and handing the recorded attempts to waiters.
//
// Threads: the loop thread only (EgressProxy::loopMain, and the commands it runs).

#include "pool/egress/egress_proxy_loop.h"

#include "common/clock.h"
#include "pool/metrics/pool_metrics.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace paddock::pool::egress {

namespace {

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

void EgressProxy::Loop::watch(int fd, uint64_t id)
{
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = tag(kTagConn, id);
    ::epoll_ctl(proxy.m_epollFd, EPOLL_CTL_ADD, fd, &ev);
}

void EgressProxy::Loop::unionGrants(Sandbox &sb)
{
    auto all = std::make_shared<Grants>();
    for (const auto &[holder, grants] : sb.grantsByHolder)
        all->insert(all->end(), grants->begin(), grants->end());
    sb.grants = all->empty() ? nullptr : std::move(all);
}

void EgressProxy::Loop::record(Sandbox &sb, EgressAttempt attempt)
{
    if (sb.attempts.size() >= limits().maxAttemptsKept) {
        sb.dropped++;
        return;
    }
    sb.attempts.push_back(std::move(attempt));
}

void EgressProxy::Loop::accept(Sandbox &sb)
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

void EgressProxy::Loop::refuse(Conn &c, int code, const char *status, std::string reason, std::string detail)
{
    c.attempt.allowed = false;
    c.attempt.reason = std::move(reason);
    c.attempt.detail = std::move(detail);
    pool_metrics::countEgressRefusal(c.attempt.reason);
    c.u2c.data += httpResponse(code, status,
                               "refused " + c.attempt.host + ":" + std::to_string(c.attempt.port) + " (" +
                                   c.attempt.reason + "): " + c.attempt.detail);
    c.state = Conn::State::Closing;
}

void EgressProxy::Loop::onHead(Conn &c, Sandbox &sb)
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

void EgressProxy::Loop::onResolved(const Job &job)
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
void EgressProxy::Loop::startConnect(Conn &c)
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

// Moves bytes as far as they go. false: the connection is finished. Each step below sets progress
// when it moved something and returns false when the connection is finished.
bool EgressProxy::Loop::pump(Conn &c, Sandbox &sb)
{
    char buf[kReadChunk];
    for (int round = 0; round < 64; ++round) {
        bool progress = false;
        if (c.state == Conn::State::Head && !readHead(c, sb, buf, progress))
            return false;
        if (c.state == Conn::State::Connecting)
            checkConnected(c, progress);
        if (c.state == Conn::State::Relay && !relay(c, buf, progress))
            return false;
        if ((c.state == Conn::State::Relay || c.state == Conn::State::Closing) && !c.u2c.empty() &&
            !sendToClient(c, progress))
            return false;
        if (c.state == Conn::State::Closing && c.u2c.empty())
            return false;
        if (c.state == Conn::State::Relay && relayOver(c))
            return false;
        if (progress)
            c.lastUs = monotonicUs();
        else
            return true;
    }
    touched.insert(c.id);   // more to do: come back after other connections had a turn
    return true;
}

// The request head, up to maxHeadBytes; once complete it is decided (onHead).
bool EgressProxy::Loop::readHead(Conn &c, Sandbox &sb, char (&buf)[kReadChunk], bool &progress)
{
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
    return true;
}

// A connect in progress: on to the next address when it failed, to relaying when it succeeded.
void EgressProxy::Loop::checkConnected(Conn &c, bool &progress)
{
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

// Reads from the client and sends upstream, then reads from upstream (the client gets it in
// sendToClient), each within bufferBytes.
bool EgressProxy::Loop::relay(Conn &c, char (&buf)[kReadChunk], bool &progress)
{
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
    return true;
}

// What is queued for the client: relayed bytes, or the proxy's own answer.
bool EgressProxy::Loop::sendToClient(Conn &c, bool &progress)
{
    ssize_t n = ::send(c.client, c.u2c.data.data() + c.u2c.off, c.u2c.size(), MSG_NOSIGNAL);
    if (n > 0) {
        c.u2c.consume(static_cast<size_t>(n));
        progress = true;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return false;
    }
    return true;
}

// Shuts the client's side once upstream is done and drained. true: both directions are over.
bool EgressProxy::Loop::relayOver(Conn &c)
{
    if (c.upstreamEof && c.u2c.empty() && !c.clientShut) {
        ::shutdown(c.client, SHUT_WR);
        c.clientShut = true;
    }
    if (c.clientShut && c.upstreamShut)
        return true;
    // A client that closed while the destination still talks: the reply has nowhere to go.
    if (c.upstreamEof && c.clientEof)
        return true;
    return false;
}

void EgressProxy::Loop::finish(uint64_t id)
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
void EgressProxy::Loop::serveWaiters(Sandbox &sb, int64_t now)
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
int EgressProxy::Loop::tick()
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

void EgressProxy::Loop::pumpTouched()
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

} // namespace paddock::pool::egress
