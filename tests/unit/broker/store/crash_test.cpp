// Crash safety: a child process appends and reports every acknowledged event through a pipe; the
// test kills it with SIGKILL at a random moment, reopens the database and checks that every
// acknowledged event is there and that every session's seqs are dense.
#include "store_test_support.h"

#include <csignal>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

namespace paddock::store::test {
namespace {

struct Ack {
    int32_t session;
    int32_t pad;
    int64_t seq;
};
static_assert(sizeof(Ack) == 16);

constexpr int kSessions = 6;
constexpr int kThreads = 3;

std::string sessionName(int index) { return "crash-" + std::to_string(index); }

[[noreturn]] void childAppends(const std::filesystem::path &db, int ackFd)
{
    auto opened = openSqliteEventStore(db);
    if (!opened)
        _exit(3);
    auto &store = **opened;
    for (int s = 0; s < kSessions; ++s) {
        auto created = store.appendSync(createRequest(sessionName(s)));
        if (!created && created.error().code != ErrorCode::AlreadyExists)
            _exit(4);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&store, ackFd, t] {
            std::mt19937 rng(static_cast<unsigned>(t * 7919 + ::getpid()));
            for (;;) {
                const int s = static_cast<int>(rng() % kSessions);
                const int n = 1 + static_cast<int>(rng() % 4);
                std::vector<core::NewEvent> events(static_cast<size_t>(n), event(core::kind::ToolCall, R"({"x":1})"));
                auto result = store.appendSync(appendRequest(sessionName(s), AppendRequest::kAnySeq, events));
                if (!result)
                    _exit(5);
                Ack acks[4];
                for (int i = 0; i < n; ++i)
                    acks[i] = Ack{s, 0, result->events[static_cast<size_t>(i)].seq};
                // One write of at most 64 bytes is atomic on a pipe.
                if (::write(ackFd, acks, sizeof(Ack) * static_cast<size_t>(n)) < 0)
                    _exit(6);
            }
        });
    }
    for (auto &thread : threads)
        thread.join();
    _exit(0);
}

TEST(CrashTest, AcknowledgedAppendsSurviveKillDashNine)
{
    TempDir dir;
    std::random_device rd;
    std::mt19937 rng(rd());
    std::map<int, int64_t> highestAcked;

    for (int cycle = 0; cycle < 3; ++cycle) {
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            ::close(fds[0]);
            childAppends(dir.db(), fds[1]);
        }
        ::close(fds[1]);

        // Kill after a random number of acknowledgements: a random moment in the child's work.
        const size_t killAfter = 100 + rng() % 3000;
        size_t acks = 0;
        std::string buffer;
        char chunk[4096];
        bool killed = false;
        for (;;) {
            const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
            if (n <= 0)
                break;
            buffer.append(chunk, static_cast<size_t>(n));
            acks += static_cast<size_t>(n) / sizeof(Ack);
            if (!killed && acks >= killAfter) {
                ::kill(child, SIGKILL);
                killed = true;
            }
        }
        ::close(fds[0]);
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status) << " in cycle " << cycle;
        EXPECT_EQ(WTERMSIG(status), SIGKILL);
        ASSERT_EQ(buffer.size() % sizeof(Ack), 0u);
        for (size_t off = 0; off < buffer.size(); off += sizeof(Ack)) {
            Ack ack;
            std::memcpy(&ack, buffer.data() + off, sizeof ack);
            auto &high = highestAcked[ack.session];
            high = std::max(high, ack.seq);
        }

        auto store = openOrDie(dir.db());
        ASSERT_TRUE(store);
        for (int s = 0; s < kSessions; ++s) {
            auto events = store->readEvents(sessionName(s), 1, 1 << 30);
            ASSERT_TRUE(events) << events.error().message;
            for (size_t i = 0; i < events->size(); ++i)
                ASSERT_EQ((*events)[i].seq, static_cast<int64_t>(i) + 1);
            EXPECT_GE(static_cast<int64_t>(events->size()), highestAcked[s])
                << "session " << s << " lost acknowledged events in cycle " << cycle;
            auto state = store->getSession(sessionName(s));
            ASSERT_TRUE(state);
            EXPECT_EQ(state->lastSeq, static_cast<int64_t>(events->size()));   // projection committed with events
        }
    }
}

} // namespace
} // namespace paddock::store::test
