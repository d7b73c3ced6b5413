// EgressProxy's public face: the constructor and destructor, the methods that post commands to
// the loop thread (adding and removing a sandbox, grants, taking attempts), and the loop and
// resolver threads' main functions. What the loop does with connections is in
// egress_proxy_loop.cpp; the state they share in egress_proxy_loop.h.
//
// Threads: the public methods run on any thread and only post; loopMain and resolverMain are
// the threads EgressProxy starts.

#include "pool/egress/egress_proxy_loop.h"

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
