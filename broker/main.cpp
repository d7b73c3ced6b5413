// paddockd: the Paddock broker. Reads its config, starts serving, and on SIGTERM or SIGINT shuts
// down in order (stop accepting, drain, join, commit, checkpoint).

#include "broker/daemon/broker.h"
#include "broker/config/config_check.h"
#include "common/log.h"
#include "common/paths.h"

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <pthread.h>

namespace {

constexpr int kExitRuntimeError = 1;
constexpr int kExitConfigError = 3;

} // namespace

int main(int argc, char **argv)
{
    using namespace paddock;

    CLI::App app{"paddockd: the Paddock broker. Keeps every agent session's durable log, runs the agent loop one "
                 "step at a time, and sends execution to sandboxes on paddock-pool hosts."};
    std::string configFile;
    std::string dataDir;
    std::string socketPath;
    std::vector<std::string> poolFlags;
    std::string playbookDir;
    bool allowLocal = false;
    int workers = 0;
    std::string logLevel;
    bool checkConfig = false;
    app.set_version_flag("--version", std::string("paddockd ") + PADDOCK_VERSION);
    app.add_option("--config", configFile,
                   "Config file (TOML). Default: $XDG_CONFIG_HOME/paddock/broker.toml if it exists, otherwise the "
                   "embedded default (one local pool on 127.0.0.1:7701, local execution allowed)");
    app.add_option("--data-dir", dataDir, "Where the database (broker.db) lives. Default: $XDG_DATA_HOME/paddock");
    app.add_option("--socket", socketPath, "Unix socket to listen on. Default: $XDG_RUNTIME_DIR/paddock/broker.sock");
    app.add_option("--pool", poolFlags, "A pool as NAME=HOST:PORT; repeatable; replaces the config's pools");
    app.add_option("--playbook-dir", playbookDir, "Where the scripted model finds playbooks by name");
    app.add_flag("--allow-local-execution", allowLocal,
                 "Allow pools on this machine (development only: agents' commands then run here)");
    app.add_option("--workers", workers, "Step workers")->check(CLI::Range(1, 256));
    app.add_option("--log-level", logLevel, "trace, debug, info, warn or error")
        ->check(CLI::IsMember(logLevels()));
    app.add_flag("--check-config", checkConfig,
                 "Load the config as a start would (file or embedded default, flags applied), check it without "
                 "starting (keys, values, pools, TLS and token files, principals, policy file, playbook dir), print "
                 "each problem with file:line and the fix, or \"config OK\" and a summary; exit 0 or 3");
    app.footer("Exit codes: 0 stopped cleanly (or --check-config found no problem), 1 runtime error, 2 usage error, "
               "3 configuration error.\nConfiguration keys: docs/configuration.md.");
    CLI11_PARSE(app, argc, argv);

    ConfigProblems problems;
    server::BrokerConfig config = server::defaultBrokerConfig();
    std::filesystem::path file = configFile;
    if (file.empty() && std::filesystem::exists(defaultConfigDir() / "broker.toml"))
        file = defaultConfigDir() / "broker.toml";
    if (!file.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(file, ec)) {
            std::fprintf(stderr, "paddockd: config file %s does not exist or is not a file: pass an existing file to "
                                 "--config, or leave --config out for the embedded default\n", file.c_str());
            return kExitConfigError;
        }
        config = server::loadBrokerConfig(file, config, problems);
    }
    if (!dataDir.empty())
        config.dataDir = dataDir;
    if (!socketPath.empty())
        config.socketPath = socketPath;
    if (!playbookDir.empty())
        config.models.playbookDir = playbookDir;
    if (allowLocal)
        config.allowLocalExecution = true;
    if (workers > 0)
        config.workers = workers;
    if (!logLevel.empty())
        config.logLevel = logLevel;
    if (!poolFlags.empty()) {
        config.pools.clear();
        for (const auto &flag : poolFlags) {
            auto pool = server::parsePoolFlag(flag);
            if (!pool)
                problems.add(pool.error());
            else
                config.pools.push_back(*pool);
        }
    }
    if (checkConfig) {
        const std::string summary = server::checkBrokerConfig(config, problems);
        if (!problems.empty()) {
            printProblems(problems, "paddockd");
            std::fprintf(stderr, "paddockd: %zu configuration problem%s in %s\n", problems.size(),
                         problems.size() == 1 ? "" : "s",
                         file.empty() ? "the embedded default" : file.c_str());
            return kExitConfigError;
        }
        std::printf("config OK: %s\n", summary.c_str());
        return 0;
    }
    if (!problems.empty()) {
        printProblems(problems, "paddockd");
        return kExitConfigError;
    }
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
    if (auto started = broker.start(); !started) {
        spdlog::error("{}", started.error().message);
        const bool configProblem = started.error().code == ErrorCode::InvalidArgument
            || started.error().code == ErrorCode::FailedPrecondition;
        return configProblem ? kExitConfigError : kExitRuntimeError;
    }
    int received = 0;
    sigwait(&signals, &received);
    spdlog::info("received {}, shutting down", received == SIGTERM ? "SIGTERM" : "SIGINT");
    broker.stop();
    return 0;
}
