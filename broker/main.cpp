// paddockd: the Paddock broker. Reads its config, starts serving, and on SIGTERM or SIGINT shuts
// down in order (stop accepting, drain, join, commit, checkpoint). `paddockd migrate` copies a
// SQLite store into PostgreSQL (broker/daemon/migrate_command.h).

#include "broker/daemon/broker.h"
#include "broker/daemon/migrate_command.h"
#include "broker/config/config_check.h"
#include "broker/store/store_url.h"
#include "common/log.h"
#include "common/paths.h"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <pthread.h>

using namespace paddock;

namespace {

constexpr int kExitRuntimeError = 1;
constexpr int kExitConfigError = 3;

// The command line as given; each set flag overrides the config file.
struct Flags {
    std::string configFile;
    std::string dataDir;
    std::string socketPath;
    std::vector<std::string> pools;
    std::string playbookDir;
    bool allowLocal = false;
    int workers = 0;
    std::string logLevel;
    std::string store;
    bool checkConfig = false;
    CLI::App *migrate = nullptr;
    daemon::MigrateRequest migrateRequest;
};

void addFlags(CLI::App &app, Flags &flags)
{
    app.set_version_flag("--version", std::string("paddockd ") + PADDOCK_VERSION);
    app.add_option("--config", flags.configFile,
                   "Config file (TOML). Default: $XDG_CONFIG_HOME/paddock/broker.toml if it exists, otherwise the "
                   "embedded default (one local pool on 127.0.0.1:7701, local execution allowed)");
    app.add_option("--data-dir", flags.dataDir, "Where the database (broker.db) lives. Default: $XDG_DATA_HOME/paddock");
    app.add_option("--socket", flags.socketPath, "Unix socket to listen on. Default: $XDG_RUNTIME_DIR/paddock/broker.sock");
    app.add_option("--pool", flags.pools, "A pool as NAME=HOST:PORT; repeatable; replaces the config's pools");
    app.add_option("--playbook-dir", flags.playbookDir, "Where the scripted model finds playbooks by name");
    app.add_flag("--allow-local-execution", flags.allowLocal,
                 "Allow pools on this machine (development only: agents' commands then run here)");
    app.add_option("--workers", flags.workers, "Step workers")->check(CLI::Range(1, 256));
    app.add_option("--log-level", flags.logLevel, "trace, debug, info, warn or error")
        ->check(CLI::IsMember(logLevels()));
    app.add_option("--store", flags.store,
                   "Overrides [store] url: the PostgreSQL database to keep the sessions' logs in, "
                   "postgresql://USER@HOST:PORT/DATABASE or a libpq connection string, without a password (it comes "
                   "from [store] password_file or password_env). Default: SQLite in the data directory");
    app.add_flag("--check-config", flags.checkConfig,
                 "Load the config as a start would (file or embedded default, flags applied), check it without "
                 "starting (keys, values, pools, TLS and token files, principals, policy file, playbook dir), print "
                 "each problem with file:line and the fix, or \"config OK\" and a summary; exit 0 or 3");
    app.footer("Exit codes: 0 stopped cleanly (or --check-config found no problem), 1 runtime error, 2 usage error, "
               "3 configuration error.\nConfiguration keys: docs/configuration.md.");

    // The top-level options (--config, --log-level, --store) work after the subcommand too.
    app.fallthrough();
    auto *migrate = app.add_subcommand(
        "migrate", "Copy a SQLite store (broker.db) with its whole history into a PostgreSQL database, check the "
                   "counts of every table and each session's events, and commit only if they are equal. Run it with "
                   "the brokers of both stopped");
    migrate->footer("Exit codes: 0 copied and checked, 1 the copy failed or a count differed (nothing was committed), "
                    "2 usage error, 3 bad input (no source, a url with a password, a refused login, a target that "
                    "already holds rows without --merge).\nSee docs/deployment.md, \"A team on PostgreSQL\".");
    auto &request = flags.migrateRequest;
    migrate->add_option("--from", request.from, "The SQLite store to copy: <data_dir>/broker.db")->required();
    migrate->add_option("--to", request.to,
                        "The PostgreSQL database: postgresql://USER@HOST:PORT/DATABASE (no password in it). Default: "
                        "[store] url of the config");
    migrate->add_option("--password-file", request.passwordFile,
                        "A file (mode 0600) holding the target's password. Default: [store] password_file");
    migrate->add_option("--password-env", request.passwordEnv,
                        "The environment variable holding the target's password. Default: [store] password_env");
    migrate->add_flag("--merge", request.merge,
                      "Add this store's sessions to a database that already holds some (otherwise a target with "
                      "rows is refused); a session, agent or token both hold fails the copy, naming it");
    flags.migrate = migrate;
}

// The flags applied over the config they override; problems found go to problems.
void applyFlags(const Flags &flags, broker_config::BrokerConfig &config, ConfigProblems &problems)
{
    if (!flags.dataDir.empty())
        config.dataDir = flags.dataDir;
    if (!flags.socketPath.empty())
        config.socketPath = flags.socketPath;
    if (!flags.playbookDir.empty())
        config.models.playbookDir = flags.playbookDir;
    if (flags.allowLocal)
        config.allowLocalExecution = true;
    if (flags.workers > 0)
        config.workers = flags.workers;
    if (!flags.store.empty()) {
        config.store.url = flags.store;
        if (config.store.where.empty())   // else it names [store], where the password settings are
            config.store.where = "--store";
        if (auto checked = store::checkPostgresUrl(flags.store); !checked)
            problems.add(checked.error().code, "--store: " + checked.error().message);
    }
    if (!flags.logLevel.empty())
        config.logLevel = flags.logLevel;
    if (!flags.pools.empty()) {
        config.pools.clear();
        for (const auto &flag : flags.pools) {
            auto pool = broker_config::parsePoolFlag(flag);
            if (!pool)
                problems.add(pool.error());
            else
                config.pools.push_back(*pool);
        }
    }
}

// --check-config: every problem with its fix and exit 3, or "config OK" and a summary.
int checkOnly(const broker_config::BrokerConfig &config, ConfigProblems &problems, const std::filesystem::path &file)
{
    const std::string summary = broker_config::checkBrokerConfig(config, problems);
    if (!problems.empty()) {
        printProblems(problems, "paddockd");
        std::fprintf(stderr, "paddockd: %zu configuration problem%s in %s\n", problems.size(),
                     problems.size() == 1 ? "" : "s", file.empty() ? "the embedded default" : file.c_str());
        return kExitConfigError;
    }
    std::printf("config OK: %s\n", summary.c_str());
    return 0;
}

// Runs the broker until SIGTERM or SIGINT; the exit code.
int serve(broker_config::BrokerConfig config)
{
    setupLogging("paddockd", config.logLevel);

    // Signals are taken by sigwait on this thread: blocked here before any thread starts, so every
    // thread inherits the mask and no handler runs in the middle of anything.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    daemon::Broker broker(std::move(config));
    // While the start waits for a PostgreSQL store, SIGTERM and SIGINT end the wait.
    broker.setStartWait([&signals](std::chrono::milliseconds duration) {
        const timespec timeout{static_cast<time_t>(duration.count() / 1000),
                               static_cast<long>(duration.count() % 1000) * 1000000L};
        return sigtimedwait(&signals, nullptr, &timeout) < 0;
    });
    if (auto started = broker.start(); !started) {
        if (started.error().code == ErrorCode::Cancelled) {
            spdlog::info("{}; exiting", started.error().message);
            return 0;
        }
        spdlog::error("{}", started.error().message);
        // A refused database login is fixed in the configuration, like the other problems.
        const bool configProblem = started.error().code == ErrorCode::InvalidArgument
            || started.error().code == ErrorCode::FailedPrecondition
            || started.error().code == ErrorCode::PermissionDenied;
        return configProblem ? kExitConfigError : kExitRuntimeError;
    }
    int received = 0;
    sigwait(&signals, &received);
    spdlog::info("received {}, shutting down", received == SIGTERM ? "SIGTERM" : "SIGINT");
    broker.stop();
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    CLI::App app{"paddockd: the Paddock broker. Keeps every agent session's durable log, runs the agent loop one "
                 "step at a time, and sends execution to sandboxes on paddock-pool hosts."};
    Flags flags;
    addFlags(app, flags);
    CLI11_PARSE(app, argc, argv);

    ConfigProblems problems;
    broker_config::BrokerConfig config = broker_config::defaultBrokerConfig();
    std::filesystem::path file = flags.configFile;
    if (file.empty() && std::filesystem::exists(defaultConfigDir() / "broker.toml"))
        file = defaultConfigDir() / "broker.toml";
    if (!file.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(file, ec)) {
            std::fprintf(stderr, "paddockd: config file %s does not exist or is not a file: pass an existing file to "
                                 "--config, or leave --config out for the embedded default\n", file.c_str());
            return kExitConfigError;
        }
        config = broker_config::loadBrokerConfig(file, config, problems);
    }
    applyFlags(flags, config, problems);
    if (flags.checkConfig)
        return checkOnly(config, problems, file);
    if (!problems.empty()) {
        printProblems(problems, "paddockd");
        return kExitConfigError;
    }
    if (flags.migrate->parsed()) {
        setupLogging("paddockd", flags.logLevel.empty() ? "warn" : flags.logLevel);
        return daemon::runMigrate(flags.migrateRequest, config);
    }
    return serve(std::move(config));
}
