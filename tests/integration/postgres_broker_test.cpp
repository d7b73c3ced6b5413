// paddockd on PostgreSQL, as a process ([store] in broker.toml; docs/deployment.md, "A team on
// PostgreSQL"), against the test's own server (tests/support/started_postgres.h: a unix socket in
// a temporary directory, a role that logs in with a password):
// - a session submitted through paddockctl runs to the end, its log is in the database, and a
//   restarted broker serves the same log;
// - a wrong password stops the start (exit 3) naming the user and how to set the password;
// - a server that is not there is waited for (connect_wait_ms), then refused (exit 1); SIGTERM
//   ends the wait (exit 0); a server that comes up during the wait is used;
// - a schema from a newer paddockd is refused (exit 3), naming both versions;
// - `paddockd migrate` copies a SQLite broker's store, and the broker on PostgreSQL serves the same
//   log event for event (seqs and times included); a second migrate into it is refused.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/marker_sessions.h"
#include "tests/support/started_postgres.h"

#include <libpq-fe.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

namespace paddock::test {
namespace {

constexpr const char *kPassword = "right-horse-battery";

class PostgresBroker : public FreshPostgresTest {
protected:
    PostgresBroker() : FreshPostgresTest("broker") {}

    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        FreshPostgresTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        // A role per test: the tests of one process share the server.
        m_role = m_database + "_user";
        ASSERT_EQ(m_server->addPasswordRole(m_role, kPassword, m_database), "");
        m_dir = std::make_unique<TempDir>("paddock-pg-broker");
        std::filesystem::create_directories(*m_dir / "xdg/config/paddock");
        std::filesystem::create_directories(*m_dir / "run");
        auto pool = startPool(*m_dir);
        ASSERT_TRUE(pool) << "cannot start paddock-pool: " << pool.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*pool));
        writePrivate("db.password", std::string(kPassword) + "\n");
    }

    void TearDown() override
    {
        if (HasFailure() && m_broker)
            std::cerr << "---- paddockd log (tail) ----\n" << m_broker->logTail(80);
        if (m_broker)
            m_broker->terminate();
        if (m_pool)
            m_pool->daemon.terminate();
    }

    // The database as a url: the role, the socket directory as the host (percent-encoded path).
    std::string url() const
    {
        return "postgresql://" + m_role + "@/" + m_database + "?host=" + m_server->socketDir().string()
            + "&port=" + std::to_string(StartedPostgres::kPort);
    }

    std::filesystem::path writePrivate(const std::string &name, const std::string &text)
    {
        const auto path = *m_dir / name;
        std::ofstream(path) << text;
        ::chmod(path.c_str(), 0600);
        return path;
    }

    // A broker.toml with the test's pool and the given [store] table (and whatever else extra says).
    std::filesystem::path brokerToml(const std::string &store)
    {
        return writePrivate("broker.toml", "allow_local_execution = true\n\n[[pool]]\nname = \"local\"\nendpoint = \""
                                               + m_pool->endpoint + "\"\n\n[store]\n" + store);
    }

    std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const
    {
        extra["XDG_CONFIG_HOME"] = (*m_dir / "xdg/config").string();
        extra["XDG_DATA_HOME"] = (*m_dir / "xdg/data").string();
        extra["XDG_RUNTIME_DIR"] = (*m_dir / "xdg/run").string();
        extra["PGPASSFILE"] = (*m_dir / "no.pgpass").string();   // only what the config says
        return extra;
    }

    std::string socketAddress() const { return "unix:" + (*m_dir / "run/broker.sock").string(); }

    Result<Daemon> startPaddockd(const std::filesystem::path &config, const std::vector<std::string> &extraArgs = {},
                                 const std::map<std::string, std::string> &extraEnv = {})
    {
        std::vector<std::string> args{binaryPath("paddockd").string(), "--config", config.string(), "--data-dir",
                                      (*m_dir / "broker").string(), "--socket", (*m_dir / "run/broker.sock").string(),
                                      "--playbook-dir", playbookDir().string(), "--workers", "4"};
        args.insert(args.end(), extraArgs.begin(), extraArgs.end());
        return Daemon::start(args, *m_dir / ("paddockd-" + std::to_string(++m_starts) + ".log"), env(extraEnv));
    }

    // Starts paddockd on config and waits until it serves.
    void startServing(const std::filesystem::path &config, const std::vector<std::string> &extraArgs = {})
    {
        auto daemon = startPaddockd(config, extraArgs);
        ASSERT_TRUE(daemon) << daemon.error().message;
        m_broker = std::make_unique<Daemon>(std::move(*daemon));
        auto healthy = waitForHealthy(socketAddress(), 60s, m_broker.get());
        ASSERT_TRUE(healthy) << healthy.error().message;
    }

    // A start that must fail: its exit code and log.
    std::pair<int, std::string> startFailing(const std::filesystem::path &config,
                                             const std::vector<std::string> &extraArgs = {})
    {
        auto daemon = startPaddockd(config, extraArgs);
        EXPECT_TRUE(daemon) << daemon.error().message;
        if (!daemon)
            return {-1, ""};
        const auto exit = daemon->waitExit(60s);
        EXPECT_TRUE(exit.has_value()) << "paddockd kept running:\n" << daemon->logTail();
        return {exit.value_or(-1), daemon->logText()};
    }

    // `paddockd migrate ...`: its exit code and output (stdout and stderr).
    std::pair<int, std::string> migrate(const std::vector<std::string> &args)
    {
        std::vector<std::string> argv{binaryPath("paddockd").string(), "migrate"};
        argv.insert(argv.end(), args.begin(), args.end());
        auto daemon = Daemon::start(argv, *m_dir / ("migrate-" + std::to_string(++m_starts) + ".log"), env());
        EXPECT_TRUE(daemon) << daemon.error().message;
        if (!daemon)
            return {-1, ""};
        const auto exit = daemon->waitExit(120s);
        EXPECT_TRUE(exit.has_value()) << "paddockd migrate did not end:\n" << daemon->logTail();
        return {exit.value_or(-1), daemon->logText()};
    }

    CliResult cli(std::vector<std::string> args)
    {
        args.insert(args.begin(), {"--broker", socketAddress()});
        return runCli(args);
    }

    std::string submitAndFollow(const std::string &playbook)
    {
        const CliResult result = cli({"submit", "--playbook", playbook, "-f", "--output", "json"});
        EXPECT_EQ(result.exitCode, 0) << "stderr: " << result.err << "\nstdout: " << result.out;
        const auto lines = splitLines(result.out);
        if (lines.empty())
            return {};
        auto first = nlohmann::json::parse(lines.front(), nullptr, false);
        return first.is_object() && first.contains("id") ? first["id"].get<std::string>() : std::string();
    }

    // The number of events of a session in the test's database (as its superuser).
    int64_t eventsInDatabase(const std::string &sessionId)
    {
        PGconn *conn = PQconnectdb(m_server->connectionString(m_database).c_str());
        int64_t count = -1;
        if (PQstatus(conn) == CONNECTION_OK) {
            const char *values[] = {sessionId.c_str()};
            PGresult *result = PQexecParams(conn, "SELECT count(*) FROM events WHERE session_id = $1", 1, nullptr,
                                            values, nullptr, nullptr, 0);
            if (PQresultStatus(result) == PGRES_TUPLES_OK)
                count = std::strtoll(PQgetvalue(result, 0, 0), nullptr, 10);
            PQclear(result);
        }
        PQfinish(conn);
        return count;
    }

    std::string m_role;
    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<Daemon> m_broker;
    int m_starts = 0;
};

TEST_F(PostgresBroker, RunsASessionAndKeepsItsLogInTheDatabase)
{
    startServing(brokerToml("url = \"" + url() + "\"\npassword_file = \"db.password\"\n"));
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_NE(m_broker->logText().find("store PostgreSQL at " + m_role + "@" + m_server->socketDir().string()),
              std::string::npos)
        << m_broker->logTail();

    const std::string id = submitAndFollow("hello-c");
    ASSERT_FALSE(id.empty());
    const CliResult before = cli({"events", id, "--output", "json"});
    ASSERT_EQ(before.exitCode, 0) << before.err;
    const auto events = splitLines(before.out);
    EXPECT_GT(events.size(), 3u);
    EXPECT_EQ(eventsInDatabase(id), static_cast<int64_t>(events.size()));
    EXPECT_FALSE(std::filesystem::exists(*m_dir / "broker" / "broker.db")) << "no SQLite file beside PostgreSQL";
    const CliResult shown = cli({"show", id, "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    EXPECT_EQ(nlohmann::json::parse(shown.out)["status"], "succeeded") << shown.out;

    // A restarted broker serves the same log from the database.
    EXPECT_EQ(m_broker->terminate(), 0) << m_broker->logTail();
    startServing(brokerToml("url = \"" + url() + "\"\npassword_file = \"db.password\"\n"));
    ASSERT_FALSE(HasFatalFailure());
    const CliResult after = cli({"events", id, "--output", "json"});
    ASSERT_EQ(after.exitCode, 0) << after.err;
    EXPECT_EQ(after.out, before.out);
}

TEST_F(PostgresBroker, APasswordFromTheEnvironmentWorksToo)
{
    auto daemon = startPaddockd(brokerToml("url = \"" + url() + "\"\npassword_env = \"PADDOCK_TEST_DB_PASSWORD\"\n"),
                                {}, {{"PADDOCK_TEST_DB_PASSWORD", kPassword}});
    ASSERT_TRUE(daemon) << daemon.error().message;
    m_broker = std::make_unique<Daemon>(std::move(*daemon));
    auto healthy = waitForHealthy(socketAddress(), 60s, m_broker.get());
    ASSERT_TRUE(healthy) << healthy.error().message;
    EXPECT_EQ(cli({"ls"}).exitCode, 0);
}

TEST_F(PostgresBroker, AWrongPasswordIsNamedWithTheFix)
{
    writePrivate("wrong.password", "not-the-password\n");
    const auto [exit, log] = startFailing(brokerToml("url = \"" + url() + "\"\npassword_file = \"wrong.password\"\n"));
    EXPECT_EQ(exit, 3) << log;
    EXPECT_NE(log.find("authentication failed for user " + m_role), std::string::npos) << log;
    EXPECT_NE(log.find("password_file"), std::string::npos) << log;
    EXPECT_NE(log.find("password_env"), std::string::npos) << log;
    EXPECT_NE(log.find((*m_dir / "wrong.password").string()), std::string::npos) << "where it took the password: " << log;
    EXPECT_EQ(log.find("not-the-password"), std::string::npos) << "the password must not be logged: " << log;
}

TEST_F(PostgresBroker, APasswordInTheUrlIsRefusedBeforeAnythingStarts)
{
    const std::string withPassword = "postgresql://" + m_role + ":" + kPassword + "@/" + m_database
        + "?host=" + m_server->socketDir().string();
    const auto [exit, log] = startFailing(brokerToml("url = \"" + withPassword + "\"\n"));
    EXPECT_EQ(exit, 3) << log;
    EXPECT_NE(log.find("the store url carries a password"), std::string::npos) << log;
    EXPECT_EQ(log.find(kPassword), std::string::npos) << log;

    const auto [flagExit, flagLog] = startFailing(brokerToml(""), {"--store", withPassword});
    EXPECT_EQ(flagExit, 3) << flagLog;
    EXPECT_NE(flagLog.find("--store: the store url carries a password"), std::string::npos) << flagLog;
}

TEST_F(PostgresBroker, AServerThatIsNotThereIsWaitedForThenRefused)
{
    const auto nowhere = *m_dir / "no-server";
    std::filesystem::create_directories(nowhere);
    const std::string store = "url = \"host=" + nowhere.string() + " dbname=paddock user=paddock\"\nconnect_wait_ms = 2500\n";
    const auto [exit, log] = startFailing(brokerToml(store));
    EXPECT_EQ(exit, 1) << log;
    EXPECT_NE(log.find("Retrying every 1 s"), std::string::npos) << log;
    EXPECT_NE(log.find("paddockd waited 2 s for it (connect_wait_ms in [store]) and gives up"), std::string::npos) << log;
    EXPECT_NE(log.find(nowhere.string()), std::string::npos) << "the address it tried: " << log;

    // SIGTERM during the wait ends it at once, cleanly.
    auto waiting = startPaddockd(brokerToml("url = \"host=" + nowhere.string() + " dbname=paddock\"\n"
                                            "connect_wait_ms = 600000\n"));
    ASSERT_TRUE(waiting) << waiting.error().message;
    for (int i = 0; i < 500 && waiting->logText().find("Retrying") == std::string::npos; ++i)
        std::this_thread::sleep_for(20ms);
    ASSERT_NE(waiting->logText().find("Retrying"), std::string::npos) << waiting->logText();
    EXPECT_EQ(waiting->terminate(10s), 0) << waiting->logText();
    EXPECT_NE(waiting->logText().find("stopped while waiting for PostgreSQL"), std::string::npos) << waiting->logText();
}

TEST_F(PostgresBroker, AServerThatComesUpDuringTheWaitIsUsed)
{
    // A server of this test alone, stopped while the broker starts, started again while it waits.
    StartedPostgres late;
    ASSERT_EQ(late.start(), "");
    ASSERT_EQ(late.exec("CREATE DATABASE late"), "");
    late.stop("fast");
    auto daemon = startPaddockd(brokerToml("url = \"host=" + late.socketDir().string()
                                           + " dbname=late user=paddock\"\nconnect_wait_ms = 60000\n"));
    ASSERT_TRUE(daemon) << daemon.error().message;
    m_broker = std::make_unique<Daemon>(std::move(*daemon));
    for (int i = 0; i < 500 && m_broker->logText().find("Retrying") == std::string::npos; ++i)
        std::this_thread::sleep_for(20ms);
    ASSERT_NE(m_broker->logText().find("Retrying"), std::string::npos) << m_broker->logText();
    ASSERT_EQ(late.start(), "");
    auto healthy = waitForHealthy(socketAddress(), 60s, m_broker.get());
    ASSERT_TRUE(healthy) << healthy.error().message;
    EXPECT_NE(m_broker->logText().find("answered at attempt"), std::string::npos) << m_broker->logTail();
    EXPECT_EQ(cli({"ls"}).exitCode, 0);
    EXPECT_EQ(m_broker->terminate(), 0);
    m_broker.reset();   // before `late` stops
}

// The database crashes (pg_ctl stop -m immediate) while sessions are mid-command, and comes back a
// few seconds later: the broker says the database is away, waits, and goes on; every session
// succeeds, with dense seqs and no command run twice.
TEST_F(PostgresBroker, ADatabaseThatGoesAwayMidRunIsWaitedForAndNothingIsLost)
{
    StartedPostgres db;   // this test's own: it stops it
    ASSERT_EQ(db.start(), "");
    ASSERT_EQ(db.exec("CREATE DATABASE midrun"), "");
    startServing(brokerToml("url = \"host=" + db.socketDir().string() + " dbname=midrun user=paddock\"\n"));
    ASSERT_FALSE(HasFatalFailure());
    constexpr int kSessions = 6, kSteps = 3;
    const auto playbook = *m_dir / "midrun.toml";
    std::ofstream(playbook) << markerPlaybook("midrun", kSteps, 2);
    std::vector<std::string> ids;
    for (int i = 0; i < kSessions; ++i) {
        const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        ids.push_back(nlohmann::json::parse(submitted.out)["id"].get<std::string>());
    }
    // Mid-command: the first step's call is recorded in every session.
    auto steps = [&](const std::string &id) {
        const CliResult shown = cli({"show", id, "--output", "json"});
        auto row = nlohmann::json::parse(shown.out, nullptr, false);
        return shown.exitCode == 0 && row.is_object() ? row : nlohmann::json::object();
    };
    for (int round = 0; round < 600; ++round) {
        if (std::all_of(ids.begin(), ids.end(), [&](const auto &id) {
                return steps(id).value("last_event_kind", std::string()) == "tool.call";
            }))
            break;
        std::this_thread::sleep_for(50ms);
    }
    db.stop("immediate");
    std::this_thread::sleep_for(3s);
    ASSERT_EQ(db.start(), "");

    std::vector<std::string> problems;
    for (const auto &id : ids) {
        std::string status;
        for (int round = 0; round < 1200; ++round) {
            status = steps(id).value("status", std::string());
            if (status == "succeeded" || status == "failed" || status == "cancelled")
                break;
            std::this_thread::sleep_for(100ms);
        }
        EXPECT_EQ(status, "succeeded") << id;
        const CliResult events = cli({"events", id, "--output", "json"});
        ASSERT_EQ(events.exitCode, 0) << events.err;
        std::vector<nlohmann::json> log;
        for (const auto &line : splitLines(events.out))
            log.push_back(nlohmann::json::parse(line, nullptr, false));
        checkMarkedLog(id, log, kSteps, 1, problems);
    }
    std::string shown;
    for (const auto &problem : problems)
        shown += "  " + problem + "\n";
    EXPECT_TRUE(problems.empty()) << shown;
    EXPECT_NE(m_broker->logText().find(db.socketDir().string()), std::string::npos)
        << "the broker's log never named the database that went away:\n" << m_broker->logTail();
    EXPECT_EQ(m_broker->terminate(), 0);
    m_broker.reset();   // before `db` stops
}

TEST_F(PostgresBroker, ASchemaFromANewerPaddockdIsRefused)
{
    startServing(brokerToml("url = \"" + url() + "\"\npassword_file = \"db.password\"\n"));
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(m_broker->terminate(), 0);
    m_broker.reset();
    ASSERT_EQ(m_server->exec("UPDATE paddock_schema SET version = 99", m_database), "");
    const auto [exit, log] = startFailing(brokerToml("url = \"" + url() + "\"\npassword_file = \"db.password\"\n"));
    EXPECT_EQ(exit, 3) << log;
    EXPECT_NE(log.find("has schema version 99, written by a newer Paddock; this build reads up to version"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("Upgrade Paddock"), std::string::npos) << log;
}

TEST_F(PostgresBroker, MigrateMovesASqliteBrokersHistory)
{
    // A broker on SQLite (the default) with a finished session.
    auto sqliteBroker = startPaddockd(brokerToml(""));
    ASSERT_TRUE(sqliteBroker) << sqliteBroker.error().message;
    m_broker = std::make_unique<Daemon>(std::move(*sqliteBroker));
    ASSERT_TRUE(waitForHealthy(socketAddress(), 60s, m_broker.get()));
    const std::string id = submitAndFollow("hello-c");
    ASSERT_FALSE(id.empty());
    const CliResult before = cli({"events", id, "--output", "json"});
    ASSERT_EQ(before.exitCode, 0) << before.err;
    EXPECT_EQ(m_broker->terminate(), 0);
    m_broker.reset();

    const auto source = (*m_dir / "broker" / "broker.db").string();
    const auto password = (*m_dir / "db.password").string();
    const auto [exit, out] = migrate({"--from", source, "--to", url(), "--password-file", password});
    ASSERT_EQ(exit, 0) << out;
    EXPECT_NE(out.find("1 of 1 sessions copied"), std::string::npos) << out;
    EXPECT_NE(out.find("copied " + source + " into " + m_role + "@"), std::string::npos) << out;
    const auto events = splitLines(before.out).size();
    EXPECT_NE(out.find("events per session: 1 sessions checked (count, last seq, first and last time, cost): equal"),
              std::string::npos)
        << out;
    EXPECT_EQ(eventsInDatabase(id), static_cast<int64_t>(events));

    // The broker on PostgreSQL (--store over a config whose [store] has only the password) serves
    // the same log, event for event.
    startServing(brokerToml("password_file = \"db.password\"\n"), {"--store", url()});
    ASSERT_FALSE(HasFatalFailure());
    const CliResult after = cli({"events", id, "--output", "json"});
    ASSERT_EQ(after.exitCode, 0) << after.err;
    EXPECT_EQ(after.out, before.out);
    EXPECT_EQ(m_broker->terminate(), 0);
    m_broker.reset();

    // Into a database that now holds it: refused, nothing changed.
    const auto [again, againOut] = migrate({"--from", source, "--to", url(), "--password-file", password});
    EXPECT_EQ(again, 3) << againOut;
    EXPECT_NE(againOut.find("already holds rows"), std::string::npos) << againOut;
    EXPECT_NE(againOut.find("--merge"), std::string::npos) << againOut;
    EXPECT_EQ(eventsInDatabase(id), static_cast<int64_t>(events));
}

TEST_F(PostgresBroker, MigrateRefusesBadInputNamingIt)
{
    const std::string withPassword = "postgresql://" + m_role + ":" + kPassword + "@/" + m_database
        + "?host=" + m_server->socketDir().string();
    const auto [exit, out] = migrate({"--from", (*m_dir / "missing.db").string(), "--to", withPassword});
    EXPECT_EQ(exit, 3) << out;
    EXPECT_NE(out.find("--to: the store url carries a password"), std::string::npos) << out;
    // The harness's first line is the command line, which holds it; paddockd must not repeat it.
    EXPECT_EQ(out.substr(out.find('\n')).find(kPassword), std::string::npos) << out;

    const auto [missing, missingOut] = migrate({"--from", (*m_dir / "missing.db").string(), "--to", url(),
                                                "--password-file", (*m_dir / "db.password").string()});
    EXPECT_EQ(missing, 3) << missingOut;
    EXPECT_NE(missingOut.find("missing.db is not a file"), std::string::npos) << missingOut;

    writePrivate("wrong.password", "nope\n");
    writePrivate("empty.db", "");
    const auto [wrong, wrongOut] = migrate({"--from", (*m_dir / "empty.db").string(), "--to", url(), "--password-file",
                                            (*m_dir / "wrong.password").string()});
    EXPECT_EQ(wrong, 3) << wrongOut;
    EXPECT_NE(wrongOut.find("password authentication failed for user \"" + m_role + "\""), std::string::npos)
        << wrongOut;
    EXPECT_NE(wrongOut.find("--password-file"), std::string::npos) << wrongOut;
}

} // namespace
} // namespace paddock::test
