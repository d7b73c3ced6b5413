#include "pool/init/init_exec_loop.h"

#include "pool/init/init_protocol.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace paddock::pool {
namespace {

namespace proto = init;

constexpr int64_t kExecGraceMs = 10000;      // beyond the command's own timeout, for the init to report
constexpr int kDeadlineCheckMs = 1000;       // deadlines are checked at least this often
constexpr size_t kReadChunkBytes = 64 * 1024;
constexpr int kMaxEvents = 64;

int64_t nowMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace

struct InitExecLoop::Conn {
    int fd = -1;
    std::string out;        // request bytes not yet sent
    size_t outOff = 0;
    std::string in;         // reply bytes not yet parsed
    int64_t deadlineMs = 0;
    ChunkSink sink;
    Done done;
    ~Conn()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

InitExecLoop::InitExecLoop()
{
    m_epollFd = ::epoll_create1(EPOLL_CLOEXEC);
    m_wakeFd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;   // id 0: the wake fd
    ::epoll_ctl(m_epollFd, EPOLL_CTL_ADD, m_wakeFd, &ev);
    m_thread = std::thread([this] { run(); });
}

InitExecLoop::~InitExecLoop()
{
    stop();
    ::close(m_epollFd);
    ::close(m_wakeFd);
}

Result<std::optional<int>> InitExecLoop::connect(const std::filesystem::path &socketPath)
{
    auto fd = detail::connectInit(socketPath, true);
    if (!fd)
        return std::unexpected(fd.error());
    if (*fd < 0)
        return std::optional<int>{};
    return std::optional<int>{*fd};
}

void InitExecLoop::submit(int fd, const InitExecRequest &request, ChunkSink sink, Done done)
{
    if (request.stdinData.size() > proto::kMaxFrameBytes) {
        ::close(fd);
        done(fail(ErrorCode::InvalidArgument, "stdin of " + std::to_string(request.stdinData.size()) +
                                                  " bytes exceeds the 64 MiB limit of an exec"));
        return;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conn->out = detail::execRequestFrames(request);
    const int64_t timeoutMs = request.timeoutMs > 0 ? request.timeoutMs : 24 * 3600 * 1000ll;
    conn->deadlineMs = nowMs() + timeoutMs + kExecGraceMs;
    conn->sink = std::move(sink);
    conn->done = std::move(done);

    // The request goes out from the calling thread: usually all of it, in one send.
    ssize_t n;
    do {
        n = ::send(fd, conn->out.data(), conn->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN) {
        const int err = errno;
        auto callback = std::move(conn->done);
        conn.reset();
        callback(std::unexpected(detail::lostInitError(err)));
        return;
    }
    conn->outOff = n > 0 ? static_cast<size_t>(n) : 0;
    const bool pendingOut = conn->outOff < conn->out.size();
    if (!pendingOut)
        std::string().swap(conn->out);

    uint64_t id;
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping) {
            auto callback = std::move(conn->done);
            conn.reset();
            callback(fail(ErrorCode::Unavailable, "the pool is shutting down; retry on another pool or when it is back"));
            return;
        }
        id = m_nextId++;
        m_inFlight++;
        // Registered before epoll_ctl: the loop may see the fd's first event at once.
        m_conns.emplace(id, std::move(conn));
    }
    epoll_event ev {};
    ev.events = EPOLLIN | EPOLLRDHUP | (pendingOut ? EPOLLOUT : 0u);
    ev.data.u64 = id;
    if (::epoll_ctl(m_epollFd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        const int err = errno;
        finish(id, fail(ErrorCode::ResourceExhausted, std::string("cannot watch the sandbox init's socket: ") + std::strerror(err)));
    }
}

void InitExecLoop::finish(uint64_t id, Result<InitExecResult> result)
{
    std::unique_ptr<Conn> conn;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_conns.find(id);
        if (it == m_conns.end())
            return;
        conn = std::move(it->second);
        m_conns.erase(it);
    }
    ::epoll_ctl(m_epollFd, EPOLL_CTL_DEL, conn->fd, nullptr);
    // Closing the connection first: an init still running the command kills its group.
    ::close(conn->fd);
    conn->fd = -1;
    auto done = std::move(conn->done);
    conn.reset();
    m_inFlight--;
    done(std::move(result));
}

void InitExecLoop::run()
{
    std::vector<char> buf(kReadChunkBytes);
    epoll_event events[kMaxEvents];
    for (;;) {
        const int n = ::epoll_wait(m_epollFd, events, kMaxEvents, kDeadlineCheckMs);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; ++i) {
            const uint64_t id = events[i].data.u64;
            const uint32_t ev = events[i].events;
            if (id == 0) {
                uint64_t count;
                (void)!::read(m_wakeFd, &count, sizeof count);
                continue;
            }
            Conn *c;
            {
                std::lock_guard lock(m_mutex);
                auto it = m_conns.find(id);
                if (it == m_conns.end())
                    continue;
                c = it->second.get();   // only this thread erases: stays valid below
            }
            std::optional<Result<InitExecResult>> outcome;

            if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && c->outOff < c->out.size()) {
                ssize_t w = ::send(c->fd, c->out.data() + c->outOff, c->out.size() - c->outOff, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0)
                    c->outOff += static_cast<size_t>(w);
                else if (w < 0 && errno != EAGAIN && errno != EINTR)
                    outcome = std::unexpected(detail::lostInitError(errno));
                if (!outcome && c->outOff >= c->out.size()) {
                    std::string().swap(c->out);
                    epoll_event mod {};
                    mod.events = EPOLLIN | EPOLLRDHUP;
                    mod.data.u64 = id;
                    ::epoll_ctl(m_epollFd, EPOLL_CTL_MOD, c->fd, &mod);
                }
            }
            // Read what is there; EOF only counts once everything before it is parsed.
            while (!outcome && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
                ssize_t got = ::recv(c->fd, buf.data(), buf.size(), MSG_DONTWAIT);
                if (got < 0 && errno == EINTR)
                    continue;
                if (got < 0 && errno == EAGAIN)
                    break;
                if (got <= 0) {
                    outcome = std::unexpected(detail::lostInitError(got == 0 ? 0 : errno));
                    break;
                }
                c->in.append(buf.data(), static_cast<size_t>(got));
                size_t off = 0;
                while (!outcome && c->in.size() - off >= 5) {
                    const auto *h = reinterpret_cast<const unsigned char *>(c->in.data() + off);
                    const uint32_t len = (uint32_t{h[1]} << 24) | (uint32_t{h[2]} << 16) | (uint32_t{h[3]} << 8) | uint32_t{h[4]};
                    if (len > proto::kMaxFrameBytes) {
                        outcome = std::unexpected(detail::lostInitError(EMSGSIZE));
                        break;
                    }
                    if (c->in.size() - off < 5 + size_t{len})
                        break;
                    const char type = static_cast<char>(h[0]);
                    const std::string_view payload(c->in.data() + off + 5, len);
                    off += 5 + size_t{len};
                    if (type == proto::kStdout || type == proto::kStderr) {
                        if (c->sink)
                            c->sink(type == proto::kStdout ? 1 : 2, payload);
                    } else if (type == proto::kExit) {
                        outcome = detail::parseExitRecord(payload);
                    } else {
                        outcome = std::unexpected(detail::unexpectedExecFrame(type, payload));
                    }
                }
                c->in.erase(0, off);
                if (static_cast<size_t>(got) < buf.size())
                    break;   // drained; saves a recv that would say EAGAIN
            }
            if (outcome)
                finish(id, std::move(*outcome));
        }

        // Deadlines (the command's timeout plus a grace; the init normally reports first).
        std::vector<uint64_t> expired;
        bool stopping;
        {
            std::lock_guard lock(m_mutex);
            stopping = m_stopping;
            const int64_t now = nowMs();
            for (const auto &[id, c] : m_conns)
                if (stopping || c->deadlineMs <= now)
                    expired.push_back(id);
        }
        for (uint64_t id : expired)
            finish(id, stopping ? fail(ErrorCode::Unavailable, "the pool is shutting down; retry on another pool or when it is back")
                                : fail(ErrorCode::DeadlineExceeded, "the sandbox init did not answer in time; the sandbox may be overloaded or hung — release it and claim a new one"));
        if (stopping)
            return;
    }
}

void InitExecLoop::stop()
{
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping && !m_thread.joinable())
            return;
        m_stopping = true;
    }
    uint64_t one = 1;
    (void)!::write(m_wakeFd, &one, sizeof one);
    if (m_thread.joinable())
        m_thread.join();
}

} // namespace paddock::pool
