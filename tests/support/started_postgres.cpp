#include "tests/support/started_postgres.h"

#include "broker/store/store_url.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

namespace paddock::test {

namespace {

#ifdef PADDOCK_PG_BINDIR_DEFAULT
constexpr const char *kDefaultBinDir = PADDOCK_PG_BINDIR_DEFAULT;   // pg_config --bindir at configure time
#else
constexpr const char *kDefaultBinDir = "";
#endif
constexpr const char *kServerUser = "nobody";
constexpr int kStartTimeoutMs = 30'000;
constexpr int kStopTimeoutMs = 30'000;

bool waitForExit(pid_t pid, int timeoutMs, int *status)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(pid, status, WNOHANG) == pid)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

} // namespace

StartedPostgres::~StartedPostgres()
{
    stop("immediate");   // nothing of a test's data is worth a shutdown checkpoint
    std::error_code ec;
    if (!m_dir.empty())
        std::filesystem::remove_all(m_dir, ec);
}

std::filesystem::path StartedPostgres::binDir()
{
    if (const char *dir = std::getenv("PADDOCK_PG_BINDIR"); dir && *dir)
        return dir;
    return kDefaultBinDir;
}

std::string StartedPostgres::missingBinary()
{
    if (binDir().empty())
        return "PostgreSQL is not installed: pg_config was not found when the build was configured. Run "
               "scripts/setup-deps (Debian's postgresql-15 and libpq-dev), or set PADDOCK_PG_BINDIR to the directory "
               "holding initdb and postgres";
    for (const char *name : {"initdb", "postgres"}) {
        const auto path = binDir() / name;
        if (::access(path.c_str(), X_OK) != 0)
            return "PostgreSQL is not installed: " + path.string()
                + " is missing. Run scripts/setup-deps (Debian's postgresql-15), or set PADDOCK_PG_BINDIR to the "
                  "directory holding initdb and postgres";
    }
    if (::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) != 0)
        return "setpriv (util-linux) is missing: as root the test runs PostgreSQL as nobody through it";
    return {};
}

std::string StartedPostgres::runAsServerUser(const std::vector<std::string> &args, bool wait) const
{
    std::vector<std::string> full;
    if (m_asNobody) {
        // The server dies with the test, even if the test is killed: setpriv sets the signal after
        // dropping to nobody (a change of uid clears one set before).
        full = {"/usr/bin/setpriv", "--reuid=" + std::to_string(m_uid), "--regid=" + std::to_string(m_gid),
                "--clear-groups", "--pdeathsig", "QUIT"};
    }
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &arg : full)
        argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string logPath = (m_dir / "postgres.log").string();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!m_asNobody)
            ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
        if (::getppid() != parent)
            ::_exit(127);
        const int log = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    if (pid < 0)
        return "fork failed";
    if (!wait) {
        const_cast<StartedPostgres *>(this)->m_pid = pid;
        return {};
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return {};
    return full[m_asNobody ? 6 : 0] + " failed (status " + std::to_string(status) + "); its output:\n" + log();
}

std::string StartedPostgres::initdb()
{
    char dirTemplate[] = "/tmp/paddock-pg-XXXXXX";   // short: a socket path must fit in 107 bytes
    if (!::mkdtemp(dirTemplate))
        return "cannot make a temporary directory for PostgreSQL";
    m_dir = dirTemplate;
    m_asNobody = ::geteuid() == 0;
    if (m_asNobody) {
        const passwd *user = ::getpwnam(kServerUser);
        if (!user)
            return std::string("as root the test runs PostgreSQL as ") + kServerUser + ", and there is no such user";
        m_uid = user->pw_uid;
        m_gid = user->pw_gid;
        if (::chown(m_dir.c_str(), m_uid, m_gid) != 0)
            return "cannot chown " + m_dir.string() + " to " + kServerUser;
    }
    ::chmod(m_dir.c_str(), 0755);
    const std::string data = (m_dir / "data").string();
    if (auto failed = runAsServerUser({(binDir() / "initdb").string(), "-D", data, "-U", kSuperuser, "--auth=trust",
                                       "--no-sync", "-E", "UTF8", "--locale=C"},
                                      /*wait=*/true);
        !failed.empty())
        return failed;
    std::ofstream conf(m_dir / "data" / "postgresql.conf", std::ios::app);
    conf << "\n# tests/support/started_postgres.h: unix socket only, no durability\n"
         << "listen_addresses = ''\n"
         << "unix_socket_directories = '" << m_dir.string() << "'\n"
         << "port = " << kPort << "\n"
         // fsync off only: a commit acknowledged must still survive the server being killed (tests do that)
         << "fsync = off\nfull_page_writes = off\n"
         << "max_connections = 100\nshared_buffers = 32MB\n";
    // Password roles first: the first matching line decides.
    std::ofstream hba(m_dir / "data" / "pg_hba.conf", std::ios::trunc);
    hba << "local all +password_login scram-sha-256\n"
        << "local all all trust\n";
    return {};
}

std::string StartedPostgres::start()
{
    if (running())
        return {};
    if (auto missing = missingBinary(); !missing.empty())
        return missing;
    if (m_dir.empty()) {
        if (auto failed = initdb(); !failed.empty())
            return failed;
    }
    if (auto failed = runAsServerUser({(binDir() / "postgres").string(), "-D", (m_dir / "data").string()}, false);
        !failed.empty())
        return failed;
    const std::string probe = connectionString("postgres");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartTimeoutMs);
    while (std::chrono::steady_clock::now() < deadline) {
        if (PQping(probe.c_str()) == PQPING_OK) {
            if (exec("SELECT 1").empty())
                break;
        }
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_pid = -1;
            return "postgres exited at start (status " + std::to_string(status) + "); its log:\n" + log();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (PQping(probe.c_str()) != PQPING_OK) {
        stop("immediate");
        return "postgres did not accept connections within " + std::to_string(kStartTimeoutMs / 1000)
            + " s; its log:\n" + log();
    }
    // The group a role joins to log in with a password (pg_hba.conf's +password_login).
    (void)exec("DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'password_login') THEN "
               "CREATE ROLE password_login NOLOGIN; END IF; END$$");
    return {};
}

void StartedPostgres::stop(const char *mode)
{
    if (m_pid <= 0)
        return;
    // What pg_ctl stop -m MODE sends the postmaster.
    const std::string how = mode;
    const int signal = how == "immediate" ? SIGQUIT : how == "smart" ? SIGTERM : SIGINT;
    ::kill(m_pid, signal);
    int status = 0;
    if (!waitForExit(m_pid, kStopTimeoutMs, &status)) {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, &status, 0);
    }
    m_pid = -1;
}

std::string StartedPostgres::connectionString(const std::string &db, const std::string &user) const
{
    return "host=" + store::conninfoQuoted(m_dir.string()) + " port=" + std::to_string(kPort) + " dbname=" + store::conninfoQuoted(db)
        + " user=" + store::conninfoQuoted(user) + " connect_timeout=10";
}

std::string StartedPostgres::exec(const std::string &sql, const std::string &db) const
{
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(connectionString(db).c_str()), &PQfinish);
    if (PQstatus(conn.get()) != CONNECTION_OK)
        return std::string("cannot connect: ") + PQerrorMessage(conn.get());
    std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(conn.get(), sql.c_str()), &PQclear);
    const auto status = PQresultStatus(result.get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        return {};
    return PQresultErrorMessage(result.get());
}

std::string StartedPostgres::freshDatabase(const std::string &prefix, std::string *error)
{
    const std::string name = prefix + "_" + std::to_string(++m_databases);
    const std::string failed = exec("CREATE DATABASE " + name + " TEMPLATE template0");
    if (!failed.empty()) {
        if (error)
            *error = "CREATE DATABASE " + name + ": " + failed;
        return {};
    }
    return name;
}

std::string StartedPostgres::addPasswordRole(const std::string &role, const std::string &password,
                                             const std::string &db)
{
    // The password travels only to the server, inside this statement; SCRAM stores its verifier.
    std::string sql = "CREATE ROLE " + role + " LOGIN IN ROLE password_login PASSWORD '" + password + "'";
    if (auto failed = exec(sql); !failed.empty())
        return failed;
    return exec("ALTER DATABASE " + db + " OWNER TO " + role);
}

std::string StartedPostgres::log() const
{
    std::ifstream in(m_dir / "postgres.log");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

namespace {

class PostgresEnvironment : public ::testing::Environment {
public:
    void TearDown() override { server.reset(); }
    std::unique_ptr<StartedPostgres> server;
    std::string failure;
    bool tried = false;
};

PostgresEnvironment *environment()
{
    // gtest owns the environment and tears it down after the last test.
    static auto *env = static_cast<PostgresEnvironment *>(
        ::testing::AddGlobalTestEnvironment(new PostgresEnvironment));
    return env;
}

} // namespace

StartedPostgres *sharedPostgres(std::string *why)
{
    auto *env = environment();
    if (!env->tried) {
        env->tried = true;
        env->server = std::make_unique<StartedPostgres>();
        env->failure = env->server->start();
        if (!env->failure.empty())
            env->server.reset();
    }
    if (why)
        *why = env->failure;
    return env->server.get();
}

} // namespace paddock::test
