#pragma once
// A throwaway PostgreSQL 15 for tests: initdb into a temporary directory, the server listening on a
// unix socket in that directory only (listen_addresses = ''), fsync off (a test's data need not
// survive the machine). Stopped, and its directory removed, with the object; it also dies with the
// test process (the parent-death signal is SIGQUIT, PostgreSQL's immediate shutdown), so a killed
// test leaves no server behind. Nothing depends on a server already running.
//
// initdb and postgres refuse to run as root: when the test runs as root, the server runs as
// `nobody` (setpriv from util-linux drops to it; the directory is chowned to it). The test process
// connects as the database superuser `paddock` (trust over the socket), except the role made by
// addPasswordRole, which must give its password (scram-sha-256), for the wrong-password tests.
//
// The binaries come from $PADDOCK_PG_BINDIR, else pg_config's bindir found when the build was
// configured (Debian's postgresql-15, which scripts/setup-deps installs, puts them there). When they are missing, start() says so and names the package: tests GTEST_SKIP
// with that message (sharedPostgres() does it for them).
//
// Under ctest every test case is a process of its own, so "one server per test binary" is one
// server per test process: sharedPostgres() starts it at the first use and a gtest Environment
// stops it at the end. Each test gets a database of its own (freshDatabase), cheap to create.
//
// Threads: the test's main thread (stop/start from the thread that started it: the parent-death
// signal follows the thread that forked the server).

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>

#include <string>
#include <vector>

namespace paddock::test {

class StartedPostgres {
public:
    static constexpr const char *kSuperuser = "paddock";
    static constexpr int kPort = 5432;   // only names the socket file: .s.PGSQL.5432 in socketDir()

    StartedPostgres() = default;
    ~StartedPostgres();
    StartedPostgres(const StartedPostgres &) = delete;
    StartedPostgres &operator=(const StartedPostgres &) = delete;

    // Where initdb and postgres are: $PADDOCK_PG_BINDIR, else pg_config --bindir at configure time.
    static std::filesystem::path binDir();
    // "" when every binary the fixture runs is there, else a message naming the missing one and the fix.
    static std::string missingBinary();

    // initdb (the first time) and start the server: "" when it accepts connections, else what went
    // wrong, with the server's log.
    std::string start();
    // Stops the server: "immediate" is a crash (no shutdown checkpoint; recovery at the next start),
    // "fast" a clean shutdown. The data directory stays, so start() brings the same cluster back.
    void stop(const char *mode = "fast");
    bool running() const { return m_pid > 0; }

    const std::filesystem::path &socketDir() const { return m_dir; }
    // libpq key=value connection string to database db as user (the superuser by default).
    std::string connectionString(const std::string &db, const std::string &user = kSuperuser) const;
    // Runs sql as the superuser on database db (autocommit): "" on success, else the server's message.
    std::string exec(const std::string &sql, const std::string &db = "postgres") const;
    // A new empty database, made from template0, named after prefix and a counter; "" on failure
    // (the reason is in *error).
    std::string freshDatabase(const std::string &prefix, std::string *error = nullptr);
    // A role that logs in with a password (scram-sha-256 over the socket), owning database db.
    std::string addPasswordRole(const std::string &role, const std::string &password, const std::string &db);

    std::string log() const;

private:
    std::string initdb();
    std::string runAsServerUser(const std::vector<std::string> &args, bool wait) const;

    std::filesystem::path m_dir;   // socket directory; the cluster is in m_dir / "data"
    pid_t m_pid = -1;              // the postmaster, a child of this process
    bool m_asNobody = false;
    uid_t m_uid = 0;
    gid_t m_gid = 0;
    int m_databases = 0;
};

// The server of this test process, started at the first call; nullptr when it could not start,
// with the reason in *why (the caller GTEST_SKIPs with it when PostgreSQL is not installed, and
// fails otherwise). Stopped by a gtest Environment when the tests end.
StartedPostgres *sharedPostgres(std::string *why);

// A fixture whose tests each get a fresh database on the shared server (named from prefix):
// skipped when PostgreSQL is not installed, failed when it is and cannot start.
class FreshPostgresTest : public ::testing::Test {
protected:
    explicit FreshPostgresTest(std::string prefix) : m_prefix(std::move(prefix)) {}
    void SetUp() override
    {
        std::string why;
        m_server = sharedPostgres(&why);
        if (!m_server) {
            if (!StartedPostgres::missingBinary().empty())
                GTEST_SKIP() << why;
            FAIL() << why;
        }
        std::string error;
        m_database = m_server->freshDatabase(m_prefix, &error);
        ASSERT_FALSE(m_database.empty()) << error;
    }
    std::string conninfo() const { return m_server->connectionString(m_database); }

    StartedPostgres *m_server = nullptr;
    std::string m_database;

private:
    std::string m_prefix;
};

} // namespace paddock::test
