#include "pool/runtimes/sandbox_identity.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace paddock::pool {
namespace {

constexpr uint64_t kLastValidId = 4294967294u;   // (uid_t)-1 means "no change" to the kernel
constexpr size_t kHelperStackBytes = 64 * 1024;
// /etc/subuid lines of this user name are the pool's own reservation, not another user's range.
constexpr const char *kReservationUser = "paddock";

bool overlaps(uint64_t a, uint64_t aCount, uint64_t b, uint64_t bCount) { return a < b + bCount && b < a + aCount; }

std::string rangeText(uint64_t first, uint64_t count) { return std::to_string(first) + "-" + std::to_string(first + count - 1); }

// Other users' subordinate ranges (newuidmap's /etc/subuid and /etc/subgid): their rootless
// containers' files belong to those ids.
void checkSubordinateFile(const char *file, const IdentityRange &range, std::vector<std::string> &problems)
{
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':'), b = line.find(':', a == std::string::npos ? a : a + 1);
        if (a == std::string::npos || b == std::string::npos)
            continue;
        const std::string user = line.substr(0, a);
        char *end = nullptr;
        const unsigned long long first = std::strtoull(line.c_str() + a + 1, &end, 10);
        const unsigned long long count = std::strtoull(line.c_str() + b + 1, &end, 10);
        if (user == kReservationUser || count == 0)
            continue;
        if (overlaps(range.firstId, range.count, first, count))
            problems.push_back(std::string("[sandbox_identity] overlaps ") + file + "'s range " + rangeText(first, count) +
                               " of user '" + user + "' (their containers' files belong to those ids); move first_id past " +
                               std::to_string(first + count - 1) + ", or reserve the range for the pool with a '" +
                               kReservationUser + "' line in " + file);
    }
}

struct Helper {
    int pipeRead;
    int pipeWrite;   // the child's copy is closed first, so the pool's close() is its EOF
};

int helperMain(void *arg)
{
    // Only keeps the namespace alive until the pool has written its maps and opened it.
    auto *helper = static_cast<Helper *>(arg);
    ::close(helper->pipeWrite);
    char byte;
    while (::read(helper->pipeRead, &byte, 1) < 0 && errno == EINTR) {
    }
    return 0;
}

Status writeMap(pid_t pid, const char *file, const std::string &map)
{
    const std::string path = "/proc/" + std::to_string(pid) + "/" + file;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(ErrorCode::Internal, "cannot open " + path + ": " + std::strerror(errno));
    const bool ok = ::write(fd, map.data(), map.size()) == static_cast<ssize_t>(map.size());
    const int err = errno;
    ::close(fd);
    if (!ok)
        return fail(ErrorCode::FailedPrecondition, "cannot write the sandbox's " + std::string(file) + " (" + map.substr(0, map.size() - 1) +
                                                       "): " + std::strerror(err) + "; the pool must run as root to give sandboxes ids of their own");
    return {};
}

} // namespace

IdentityLease &IdentityLease::operator=(IdentityLease &&other) noexcept
{
    if (this != &other) {
        release();
        m_allocator = std::exchange(other.m_allocator, nullptr);
        m_identity = other.m_identity;
    }
    return *this;
}

void IdentityLease::release()
{
    if (m_allocator)
        std::exchange(m_allocator, nullptr)->release(m_identity);
}

std::vector<std::string> checkIdentityRange(const IdentityRange &range, int64_t sandboxes)
{
    std::vector<std::string> problems;
    if (range.firstId == 0) {
        problems.push_back("[sandbox_identity] first_id is 0, host root: give sandboxes ids no one uses, e.g. first_id = 1000000000");
        return problems;
    }
    if (range.idsPerSandbox == 0 || range.count == 0) {
        problems.push_back("[sandbox_identity] count and ids_per_sandbox must be at least 1");
        return problems;
    }
    if (uint64_t{range.firstId} + range.count - 1 > kLastValidId)
        problems.push_back("[sandbox_identity] the range " + rangeText(range.firstId, range.count) + " ends past the last valid id " +
                           std::to_string(kLastValidId) + "; lower first_id or count");
    const uint64_t blocks = range.count / range.idsPerSandbox;
    if (static_cast<int64_t>(blocks) < sandboxes)
        problems.push_back("[sandbox_identity] count = " + std::to_string(range.count) + " holds " + std::to_string(blocks) +
                           " sandboxes of ids_per_sandbox = " + std::to_string(range.idsPerSandbox) + ", but the tiers' max_count add up to " +
                           std::to_string(sandboxes) + "; raise count to at least " +
                           std::to_string(static_cast<uint64_t>(sandboxes) * range.idsPerSandbox) + " or lower ids_per_sandbox or max_count");
    // Real users and groups: a sandbox must own nothing of theirs.
    ::setpwent();
    while (passwd *pw = ::getpwent()) {
        if (overlaps(range.firstId, range.count, pw->pw_uid, 1))
            problems.push_back("[sandbox_identity] the range " + rangeText(range.firstId, range.count) + " holds user '" +
                               pw->pw_name + "' (uid " + std::to_string(pw->pw_uid) + "): sandboxes would own that user's files; move first_id past " +
                               std::to_string(pw->pw_uid));
    }
    ::endpwent();
    ::setgrent();
    while (group *gr = ::getgrent()) {
        if (overlaps(range.firstId, range.count, gr->gr_gid, 1))
            problems.push_back("[sandbox_identity] the range " + rangeText(range.firstId, range.count) + " holds group '" +
                               gr->gr_name + "' (gid " + std::to_string(gr->gr_gid) + "); move first_id past " + std::to_string(gr->gr_gid));
    }
    ::endgrent();
    checkSubordinateFile("/etc/subuid", range, problems);
    checkSubordinateFile("/etc/subgid", range, problems);
    return problems;
}

IdentityAllocator::IdentityAllocator(IdentityRange range) : m_range(range)
{
    const size_t blocks = range.idsPerSandbox ? range.count / range.idsPerSandbox : 0;
    m_userNs.assign(blocks, -1);
    m_inUse.assign(blocks, false);
}

IdentityAllocator::~IdentityAllocator()
{
    for (int fd : m_userNs)
        if (fd >= 0)
            ::close(fd);
}

Result<IdentityLease> IdentityAllocator::acquire()
{
    std::lock_guard lock(m_mutex);
    // The lowest free block: its user namespace is made once and then reused, so a sandbox start
    // only joins one. A block is given back only once every process of its last sandbox is dead
    // and its files are deleted (SandboxPool::destroy), so reusing it at once is safe.
    for (size_t block = 0; block < m_inUse.size(); ++block) {
        if (m_inUse[block])
            continue;
        SandboxIdentity id;
        id.hostId = m_range.firstId + static_cast<uint32_t>(block) * m_range.idsPerSandbox;
        id.count = m_range.idsPerSandbox;
        if (m_userNs[block] < 0) {
            auto ns = makeUserNamespace(id.hostId, id.count);
            if (!ns)
                return std::unexpected(ns.error());
            m_userNs[block] = *ns;
        }
        id.userNsFd = m_userNs[block];
        m_inUse[block] = true;
        return IdentityLease(this, id);
    }
    return fail(ErrorCode::ResourceExhausted, "every block of [sandbox_identity] (" + describe() + ") is in use; raise count");
}

void IdentityAllocator::release(const SandboxIdentity &identity)
{
    if (!identity.mapped() || identity.hostId < m_range.firstId)
        return;
    std::lock_guard lock(m_mutex);
    const size_t block = (identity.hostId - m_range.firstId) / m_range.idsPerSandbox;
    if (block < m_inUse.size())
        m_inUse[block] = false;
}

std::string IdentityAllocator::describe() const
{
    return "uids and gids " + rangeText(m_range.firstId, m_range.count) + ", " + std::to_string(m_range.idsPerSandbox) + " per sandbox";
}

Result<int> makeUserNamespace(uint32_t hostId, uint32_t count)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
    // The helper shares our memory (CLONE_VM: no copy of this large process's page tables) and
    // only blocks on the pipe, on a stack of its own.
    std::vector<char> stack(kHelperStackBytes);
    Helper helper{fds[0], fds[1]};
    const pid_t pid = ::clone(helperMain, stack.data() + stack.size(), CLONE_VM | CLONE_NEWUSER | SIGCHLD, &helper);
    if (pid < 0) {
        const int err = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        return fail(ErrorCode::FailedPrecondition, std::string("cannot create a user namespace: ") + std::strerror(err) +
                                                       "; check that user namespaces are enabled (sysctl user.max_user_namespaces)");
    }
    const std::string map = "0 " + std::to_string(hostId) + " " + std::to_string(count) + "\n";
    Status written = writeMap(pid, "uid_map", map);
    if (written)
        written = writeMap(pid, "gid_map", map);
    int nsFd = -1;
    if (written) {
        nsFd = ::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
        if (nsFd < 0)
            written = fail(ErrorCode::Internal, std::string("cannot open the sandbox's user namespace: ") + std::strerror(errno));
    }
    ::close(fds[1]);   // the helper returns
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    ::close(fds[0]);
    if (!written)
        return std::unexpected(written.error());
    return nsFd;
}

bool canMapIdentities() { return ::geteuid() == 0; }

} // namespace paddock::pool
