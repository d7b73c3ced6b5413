// Issue 17's test of several brokers: three paddockd processes on one PostgreSQL database (the
// test's own server, tests/support/started_postgres.h) and one pool, kSessions sessions submitted
// a third to each broker. Once at least kMidCommandAtKill sessions are mid-command, the first
// broker gets kill -9; once the sessions it held have moved on, and enough are mid-command again,
// the second one. The third runs everything to the end. Then, for every session:
// - it succeeded, its log has dense seqs;
// - no command ran again once its result was recorded, and at most one step was repeated per
//   kill (the marker, tests/integration/marker_sessions.h).
// And while all of that runs, `events -f` of a session another broker steps prints every event of
// it, in order and once: followers see what other brokers append, live; and a follower on the
// first broker killed (`--broker A,C`) goes on through the third without a gap or a repeat.
//
// Printed: the sessions each broker held at its kill (leases in the database), the seconds until
// those sessions moved on, the repeats and replays.
//
// Known limits: the brokers share one pool, as a team's brokers share their pools; "mid-command"
// is the database's view (a run_command call without a result). No wall-clock assertion: every
// wait is bounded, and the figures are printed. Needs root (the bwrap pool); run alone.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/marker_sessions.h"
#include "tests/integration/postgres_brokers.h"
#include "tests/support/started_postgres.h"

#include <libpq-fe.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kBrokers = 3;
constexpr int kSessions = 300;
constexpr int kMarkedSteps = 3;
constexpr int kCommandSeconds = 3;
constexpr int kKills = 2;
constexpr int kMidCommandAtKill = 150;
constexpr int kLeaseMs = 2000;
constexpr auto kWarmTimeout = 600s;
constexpr auto kMidCommandTimeout = 180s;
constexpr auto kRecoveryTimeout = 300s;
constexpr auto kFinishTimeout = 600s;
constexpr auto kPollInterval = 250ms;
constexpr size_t kProblemsShown = 20;
constexpr const char *kPassword = "three-brokers-one-database";
const std::string kTier = "fleet";

std::vector<json> jsonLines(const std::string &text)
{
    std::vector<json> out;
    for (const auto &line : splitLines(text))
        out.push_back(json::parse(line, nullptr, false));
    return out;
}

double secondsSince(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// The database, as the test's superuser, for what only it can see (leases, counts).
class Database {
public:
    explicit Database(const std::string &conninfo) : m_conn(PQconnectdb(conninfo.c_str())) {}
    ~Database() { PQfinish(m_conn); }
    bool ok() const { return PQstatus(m_conn) == CONNECTION_OK; }

    // The first column of every row of sql.
    std::vector<std::string> column(const std::string &sql)
    {
        std::vector<std::string> out;
        PGresult *result = PQexec(m_conn, sql.c_str());
        if (PQresultStatus(result) == PGRES_TUPLES_OK) {
            for (int row = 0; row < PQntuples(result); ++row)
                out.emplace_back(PQgetvalue(result, row, 0));
        } else {
            ADD_FAILURE() << sql << ": " << PQerrorMessage(m_conn);
        }
        PQclear(result);
        return out;
    }

private:
    PGconn *m_conn;
};

class BrokersOnPostgres : public FreshPostgresTest {
protected:
    BrokersOnPostgres() : FreshPostgresTest("brokers") {}

    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        rlimit limit{};
        if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
            limit.rlim_cur = limit.rlim_max;
            ::setrlimit(RLIMIT_NOFILE, &limit);
        }
        FreshPostgresTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        m_role = m_database + "_user";
        ASSERT_EQ(m_server->addPasswordRole(m_role, kPassword, m_database), "");
        m_dir = std::make_unique<TempDir>("paddock-brokers");
        const auto configDir = *m_dir / "xdg/config/paddock";
        std::filesystem::create_directories(configDir);
        std::ostringstream pool;
        pool << "[[tier]]\nname = \"" << kTier << "\"\nruntime = \"bwrap\"\nwarm_count = " << warmCount()
             << "\nmax_count = " << kSessions + 60 << "\ndisk_mb = 64\n";
        std::ofstream(configDir / "pool.toml") << pool.str();
        auto started = startPool(*m_dir);
        ASSERT_TRUE(started) << "cannot start paddock-pool: " << started.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*started));

        const auto password = *m_dir / "db.password";
        std::ofstream(password) << kPassword << "\n";
        ::chmod(password.c_str(), 0600);
        // One broker.toml for all three: what differs between them (data dir, socket) are flags.
        // Checkpoints go to one directory, as a team's go to one bucket.
        writeConfig("broker.toml", "");
        m_brokers = std::make_unique<PostgresBrokers>(*m_dir, *m_dir / "broker.toml", brokerCount(), 8);
        for (int i = 0; i < brokerCount(); ++i) {
            auto serving = m_brokers->start(i);
            ASSERT_TRUE(serving) << serving.error().message;
        }
    }

    void TearDown() override
    {
        if (HasFailure() && m_brokers)
            std::cerr << m_brokers->logs();
        m_brokers.reset();   // terminates every broker
        if (m_pool)
            m_pool->daemon.terminate();
    }

    // The sandboxes the pool keeps warm, and the brokers started with the test.
    virtual int warmCount() const { return kSessions; }
    virtual int brokerCount() const { return kBrokers; }

    // A broker.toml for this database and pool, with extra at its end (top-level keys go in front).
    std::filesystem::path writeConfig(const std::string &name, const std::string &topLevel,
                                      const std::string &extra = {})
    {
        const auto config = *m_dir / name;
        std::ofstream(config) << topLevel << "allow_local_execution = true\nlease_ms = " << kLeaseMs
                              << "\n\n[[pool]]\nname = \"local\"\nendpoint = \"" << m_pool->endpoint
                              << "\"\n\n[checkpoints]\ndir = \"" << (*m_dir / "checkpoints").string()
                              << "\"\n\n[store]\nurl = \"postgresql://" << m_role << "@/" << m_database
                              << "?host=" << m_server->socketDir().string() << "&port=" << StartedPostgres::kPort
                              << "\"\npassword_file = \"" << (*m_dir / "db.password").string() << "\"\n" << extra;
        ::chmod(config.c_str(), 0600);
        return config;
    }

    std::string addressOf(int i) const { return m_brokers->address(i); }

    CliResult cli(int broker, std::vector<std::string> args, std::chrono::milliseconds timeout = 180s)
    {
        return m_brokers->cli(broker, std::move(args), timeout);
    }

    // Every session, by id, as broker `via` lists them.
    std::map<std::string, json> sessions(int via)
    {
        const CliResult result = cli(via, {"ls", "--all", "--output", "json"});
        EXPECT_EQ(result.exitCode, 0) << result.err;
        return sessionRows(result);
    }

    int warmSandboxes(int via) { return warmSandboxesOf(cli(via, {"pools", "--output", "json"}), kTier); }

    // The sessions broker i holds a lease on right now (its worker id is "<host>:<pid>").
    std::vector<std::string> leasedBy(int i)
    {
        Database db(m_server->connectionString(m_database));
        EXPECT_TRUE(db.ok());
        return db.column("SELECT session_id FROM leases WHERE worker_id LIKE '%:" + std::to_string(m_brokers->daemon(i).pid())
                         + "' AND expires_us > (extract(epoch from clock_timestamp()) * 1000000)::bigint");
    }

    std::string m_role;
    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<PostgresBrokers> m_brokers;
};

// `events -f` of one session through a list of brokers, run to the session's end.
struct Follower {
    std::string brokers;   // --broker: one address, or several separated by commas
    std::string sessionId;
    std::thread thread;
    CliResult result;
};

TEST_F(BrokersOnPostgres, KillNineOfTwoBrokersOfThreeLosesNoSessionAndRunsNoCommandTwice)
{
    const auto playbook = *m_dir / "brokers-marker.toml";
    std::ofstream(playbook) << markerPlaybook("brokers-marker", kMarkedSteps, kCommandSeconds);
    const auto warmStart = Clock::now();
    int warm = 0;
    while ((warm = warmSandboxes(2)) < kSessions) {
        ASSERT_LT(Clock::now() - warmStart, kWarmTimeout) << "only " << warm << " of " << kSessions << " sandboxes warm";
        std::this_thread::sleep_for(1s);
    }
    const double warmS = secondsSince(warmStart);

    // A third of the sessions through each broker.
    std::vector<std::string> ids;
    const auto submitStart = Clock::now();
    for (int b = 0; b < kBrokers; ++b) {
        std::string lines;
        for (int i = b; i < kSessions; i += kBrokers)
            lines += json{{"playbook", playbook.string()}, {"tier", kTier}}.dump() + "\n";
        const auto file = *m_dir / ("sessions-" + std::to_string(b) + ".jsonl");
        std::ofstream(file) << lines;
        const CliResult submitted = cli(b, {"submit", "--file", file.string()});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        for (auto &id : splitLines(submitted.out))
            ids.push_back(id);
    }
    ASSERT_EQ(ids.size(), static_cast<size_t>(kSessions));
    const double submitS = secondsSince(submitStart);

    // Followers of sessions submitted through brokers 0 and 1 (ids holds each broker's sessions in
    // turn): six on the broker that is never killed, whose sessions are stepped by any broker, so
    // most of their events are appended elsewhere; three on broker 0, listed before broker 2, which
    // move to broker 2 when broker 0 is killed and go on from the last seq they printed.
    std::vector<Follower> followers(9);
    for (size_t f = 0; f < followers.size(); ++f) {
        auto &follower = followers[f];
        follower.brokers = f < 6 ? addressOf(2) : addressOf(0) + "," + addressOf(2);
        follower.sessionId = ids[(f % 2) * (kSessions / kBrokers) + f];
        follower.thread = std::thread([&follower] {
            follower.result = runCli({"--broker", follower.brokers, "events", follower.sessionId, "-f", "--output", "json"},
                                     {}, 900s);
        });
    }

    struct Kill {
        int midCommand = 0;
        size_t leased = 0;       // sessions the killed broker held
        double recoveredS = -1;  // until each of them had moved on
    };
    std::vector<Kill> kills;
    std::map<std::string, json> rows;
    for (int k = 0; k < kKills; ++k) {
        const int survivor = kBrokers - 1;
        const auto waitStart = Clock::now();
        int mid = 0, most = 0;
        for (;;) {
            rows = sessions(survivor);
            mid = static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const auto &r) { return midCommand(r.second, kMarkedSteps); }));
            most = std::max(most, mid);
            if (mid >= kMidCommandAtKill / (k + 1))
                break;
            ASSERT_LT(Clock::now() - waitStart, kMidCommandTimeout)
                << "kill " << k + 1 << ": at most " << most << " sessions were mid-command at once";
            std::this_thread::sleep_for(kPollInterval);
        }
        const auto held = leasedBy(k);
        std::map<std::string, int> cohort;   // the killed broker's sessions: their results before the kill
        for (const auto &id : held) {
            if (auto row = rows.find(id); row != rows.end())
                cohort[id] = row->second.value("steps", 0);
        }
        m_brokers->kill9(k);
        ASSERT_TRUE(m_brokers->daemon(k).waitExit(10s).has_value());
        const auto killed = Clock::now();
        kills.push_back({mid, held.size(), -1});
        EXPECT_FALSE(held.empty()) << "broker " << k << " held no session when it was killed; the kill proved nothing";

        for (;;) {
            rows = sessions(survivor);
            if (cohortMovedOn(cohort, rows))
                break;
            ASSERT_LT(Clock::now() - killed, kRecoveryTimeout)
                << "kill " << k + 1 << ": the sessions the killed broker held did not move on";
            std::this_thread::sleep_for(kPollInterval);
        }
        kills.back().recoveredS = secondsSince(killed);
    }

    const auto finishStart = Clock::now();
    for (;;) {
        rows = sessions(kBrokers - 1);
        if (allEnded(ids, rows))
            break;
        ASSERT_LT(Clock::now() - finishStart, kFinishTimeout) << "not every session ended after the kills";
        std::this_thread::sleep_for(kPollInterval);
    }
    const double finishS = secondsSince(submitStart);

    std::vector<std::string> problems;
    int succeeded = 0, totalRepeats = 0, replayed = 0;
    std::map<std::string, std::vector<json>> logs;
    for (const auto &id : ids) {
        const auto found = rows.find(id);
        const json row = found != rows.end() ? found->second : json::object();
        if (row.value("status", std::string()) == "succeeded")
            ++succeeded;
        else
            problems.push_back(id + ": " + row.value("status", std::string()) + ": " + row.value("status_reason", std::string()));
        const CliResult events = cli(kBrokers - 1, {"events", id, "--output", "json"});
        ASSERT_EQ(events.exitCode, 0) << events.err;
        logs[id] = jsonLines(events.out);
        const MarkedLog checked = checkMarkedLog(id, logs[id], kMarkedSteps, kKills, problems);
        totalRepeats += checked.repeats;
        replayed += checked.replayed;
    }

    // Each follower printed the whole log, in order, once, and ended with the session.
    for (auto &follower : followers) {
        follower.thread.join();
        SCOPED_TRACE("events -f " + follower.sessionId + " through --broker " + follower.brokers);
        EXPECT_EQ(follower.result.exitCode, 0) << follower.result.err;
        const auto printed = jsonLines(follower.result.out);
        const auto &log = logs[follower.sessionId];
        ASSERT_EQ(printed.size(), log.size()) << "the follower missed or repeated events";
        for (size_t i = 0; i < printed.size(); ++i)
            EXPECT_EQ(printed[i].value("seq", int64_t{0}), log[i].value("seq", int64_t{0}));
    }

    std::cout << std::fixed << std::setprecision(1);
    std::cout << kBrokers << " brokers on one PostgreSQL, " << kSessions << " sessions (" << kMarkedSteps
              << " steps of `echo >> marker.txt && sleep " << kCommandSeconds << "`), every sandbox warm after " << warmS
              << " s, submitted in " << submitS << " s\n";
    for (size_t k = 0; k < kills.size(); ++k)
        std::cout << "kill -9 of broker " << k << ": " << kills[k].midCommand << " sessions mid-command, "
                  << kills[k].leased << " leased by it; every one of those moved on " << kills[k].recoveredS
                  << " s after the kill (lease_ms " << kLeaseMs << ")\n";
    std::cout << "every session ended " << finishS << " s after the first submit; " << succeeded << " of " << kSessions
              << " succeeded; steps run twice (marker): " << totalRepeats << "; results replayed by the pool: "
              << replayed << "\n";

    std::string shown;
    for (size_t i = 0; i < std::min(problems.size(), kProblemsShown); ++i)
        shown += "  " + problems[i] + "\n";
    EXPECT_TRUE(problems.empty()) << problems.size() << " problems; the first ones:\n" << shown;
}

// Brokers on one database must share the settings that decide what a step does: one started with
// other [prices] is refused while the first runs, naming the section and the broker; one that
// differs only in what is the host's own joins; once every broker on the old settings is gone, the
// new ones start.
class BrokerConfigsOnPostgres : public BrokersOnPostgres {
protected:
    int warmCount() const override { return 0; }
    int brokerCount() const override { return 1; }
};

TEST_F(BrokerConfigsOnPostgres, ABrokerWithOtherSharedSettingsIsRefusedNamingThemAndTheRunningBroker)
{
    const auto otherPrices = writeConfig("other-prices.toml", "", "\n[prices]\nstorage_per_gib_month = 0.5\n");
    auto refused = m_brokers->launch(1, otherPrices);
    ASSERT_TRUE(refused) << refused.error().message;
    const auto exit = refused->waitExit(60s);
    ASSERT_TRUE(exit.has_value()) << "paddockd started anyway:\n" << refused->logTail();
    EXPECT_EQ(*exit, 3) << refused->logTail();
    const std::string log = refused->logText();
    EXPECT_NE(log.find("differs from the one the broker on"), std::string::npos) << log;
    EXPECT_NE(log.find("(pid " + std::to_string(m_brokers->daemon(0).pid()) + ")"), std::string::npos) << log;
    EXPECT_NE(log.find("[prices]"), std::string::npos) << log;
    EXPECT_EQ(log.find("top level"), std::string::npos) << "only [prices] differs:\n" << log;

    // Only what is the host's own differs (log_level; its own socket and data dir are flags).
    auto joined = m_brokers->start(1, writeConfig("own-settings.toml", "log_level = \"debug\"\n"));
    ASSERT_TRUE(joined) << joined.error().message;
    const CliResult listed = cli(1, {"ls", "--all"});
    EXPECT_EQ(listed.exitCode, 0) << listed.err;

    // Every broker on the old settings gone (kill -9 leaves their rows behind): the new ones start.
    for (int i = 0; i < 2; ++i) {
        m_brokers->kill9(i);
        ASSERT_TRUE(m_brokers->daemon(i).waitExit(10s).has_value());
    }
    auto restarted = m_brokers->start(2, otherPrices);
    ASSERT_TRUE(restarted) << restarted.error().message;
    Database db(m_server->connectionString(m_database));
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(db.column("SELECT count(*) FROM brokers"), std::vector<std::string>{"1"})
        << "the rows of the killed brokers were not removed";
}

} // namespace
} // namespace paddock::test
