// paddock-pool: the pool agent. Wires config, the sandbox pool and the gRPC server; nothing else.

#include "common/log.h"
#include "common/paths.h"
#include "pool/core/pool_check.h"
#include "pool/core/pool_config.h"
#include "pool/core/sandbox_pool.h"
#include "pool/server/pool_auth.h"
#include "pool/server/pool_metrics_endpoint.h"
#include "pool/server/pool_service.h"
#include "rpc/limits.h"

#include <CLI/CLI.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

namespace {

constexpr int kCloseGraceMs = 200;    // for calls answered after the sandboxes were released

volatile std::sig_atomic_t g_stop = 0;

void onSignal(int) { g_stop = 1; }

constexpr int kExitConfigError = 2;     // a bad config file at start
constexpr int kExitCheckProblems = 3;   // --check-config found problems (as paddockd --check-config)

} // namespace

namespace paddock {
namespace {

// Everything the command line can set; a flag given wins over the config file.
struct PoolFlags {
    std::string configFile, listen, stateDir, logLevel, initPath;
    int warm = -1;
    bool checkConfig = false;
    pool::PoolTlsOptions tlsOptions;
};

void addOptions(CLI::App &app, PoolFlags &flags)
{
    pool::PoolTlsOptions &tlsOptions = flags.tlsOptions;
    app.set_version_flag("--version", std::string("paddock-pool ") + PADDOCK_VERSION);
    app.add_option("--config", flags.configFile, "TOML config (default: $XDG_CONFIG_HOME/paddock/pool.toml)");
    app.add_option("--listen", flags.listen, "address to serve on (default 127.0.0.1:7701)");
    app.add_option("--state-dir", flags.stateDir, "where sandbox workspaces live (default $XDG_DATA_HOME/paddock/pool)");
    app.add_option("--warm", flags.warm, "warm sandboxes kept for the lite tier (default 2)")->check(CLI::Range(0, 10000));
    app.add_option("--init-path", flags.initPath,
                   "paddock-sandbox-init binary (default: ../libexec/paddock/ from paddock-pool when installed, else "
                   "next to it)");
    app.add_option("--log-level", flags.logLevel, "trace, debug, info, warn or error (default info)")
        ->check(CLI::IsMember(logLevels()));
    app.add_option("--tls-cert", tlsOptions.certFile,
                   "serve TLS with this PEM certificate chain (its subjectAltName must name the address the broker "
                   "dials); needs --tls-key")->check(CLI::ExistingFile);
    app.add_option("--tls-key", tlsOptions.keyFile, "the PEM private key of --tls-cert")->check(CLI::ExistingFile);
    app.add_option("--tls-client-ca", tlsOptions.clientCaFile,
                   "mutual TLS: require a client certificate signed by this PEM CA")->check(CLI::ExistingFile);
    app.add_option("--token-file", tlsOptions.tokenFile,
                   "require 'authorization: Bearer <token>' on every call, the token being this file's one line "
                   "(needs TLS)")->check(CLI::ExistingFile);
    app.add_flag("--check-config", flags.checkConfig,
                 "Load the config as a start would (flags applied), check it without starting (keys, values, "
                 "tiers, runtimes on PATH, the sandbox init, directories, listen address, TLS files), print each "
                 "problem with file:line and the fix, or \"config OK\" and a summary; exit 0 or 3");
    app.footer("Exit codes: 0 stopped cleanly (or --check-config found no problem), 1 cannot start, 2 bad config "
               "file, 3 --check-config found problems.\nConfiguration keys: docs/configuration.md.");
}

void applyFlags(const PoolFlags &flags, pool::PoolConfig &config)
{
    if (!flags.listen.empty())
        config.listen = flags.listen;
    if (!flags.stateDir.empty())
        config.stateDir = flags.stateDir;
    if (!flags.logLevel.empty())
        config.logLevel = flags.logLevel;
    if (!flags.initPath.empty())
        config.initPath = flags.initPath;
    pool::applyPoolDefaults(config);
    if (flags.warm >= 0) {
        if (auto *lite = config.findTier("lite")) {
            lite->warmCount = flags.warm;
            lite->maxCount = std::max(lite->maxCount, flags.warm);
        }
    }
}

// --check-config: each problem with its fix, or "config OK" and a summary. Returns the exit code.
int reportConfigCheck(const PoolFlags &flags, const pool::PoolConfig &config, ConfigProblems &problems,
                      const std::filesystem::path &file)
{
    if (auto problem = pool::checkListenAddress(flags.listen); !flags.listen.empty() && !problem.empty())
        problems.add(ErrorCode::InvalidArgument, "--listen: " + problem);
    const std::string summary = pool::checkPoolConfig(config, problems);
    if (auto credentials = pool::makePoolServerCredentials(flags.tlsOptions); !credentials)
        problems.add(credentials.error());
    if (auto problem = pool::checkPoolMetrics(config, flags.tlsOptions); !problem.empty())
        problems.add(ErrorCode::InvalidArgument, problem);
    if (!problems.empty()) {
        printProblems(problems, "paddock-pool");
        std::fprintf(stderr, "paddock-pool: %zu configuration problem%s in %s\n", problems.size(),
                     problems.size() == 1 ? "" : "s", file.c_str());
        return kExitCheckProblems;
    }
    std::printf("config OK: %s\n", summary.c_str());
    return 0;
}

// The gRPC server, listening; nullptr (after saying why) when the address cannot be bound.
std::unique_ptr<grpc::Server> startServer(const pool::PoolConfig &config, pool::PoolService &service,
                                          const std::shared_ptr<grpc::ServerCredentials> &credentials, int &port)
{
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    // Without this a second pool could share the port (SO_REUSEPORT) instead of failing.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetMaxReceiveMessageSize(rpc::kMaxPoolMessageBytes);   // a checkpoint's manifest (rpc/limits.h)
    builder.AddListeningPort(config.listen, credentials, &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        std::fprintf(stderr,
                     "paddock-pool: cannot listen on %s: the port is taken or the address is invalid; "
                     "stop the other process or pass --listen HOST:PORT with a free port\n",
                     config.listen.c_str());
        return nullptr;
    }
    return server;
}

// Stop accepting (new calls get UNAVAILABLE), let running calls finish for drain_timeout_ms, then
// release every sandbox (which ends execs still running) and close the server. gRPC's own
// Shutdown(deadline) would wait out the whole deadline while any client keeps its connection open,
// so the drain is counted here instead.
void drainAndStop(const pool::PoolConfig &config, pool::PoolService &service, pool::SandboxPool &sandboxPool,
                  grpc::Server &server)
{
    spdlog::info("shutting down: draining {} calls for up to {} ms", service.inFlight(), config.drainTimeoutMs);
    service.beginDrain();
    const auto drainUntil = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.drainTimeoutMs);
    while (service.inFlight() > 0 && std::chrono::steady_clock::now() < drainUntil)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (service.inFlight() > 0)
        spdlog::warn("{} calls still running after the drain window; releasing their sandboxes", service.inFlight());
    sandboxPool.shutdown();
    server.Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(kCloseGraceMs));
    service.stop();
}

// Serves until SIGTERM or SIGINT, then shuts down in order. Returns the exit code.
int serve(const PoolFlags &flags, const pool::PoolConfig &config)
{
    const pool::PoolTlsOptions &tlsOptions = flags.tlsOptions;
    // Before any thread: a private mount namespace, so the workspace filesystem that holds the
    // tiers' disk limits leaves no mount behind on the host when the pool dies (workspace_fs.h).
    const std::string mountNamespace = pool::WorkspaceFs::enterPrivateMountNamespace();
    setupLogging("paddock-pool", config.logLevel);
    if (!mountNamespace.empty())
        spdlog::info("no private mount namespace ({}): the workspace filesystem is mounted in the host's", mountNamespace);

    auto credentials = pool::makePoolServerCredentials(tlsOptions);
    if (!credentials) {
        std::fprintf(stderr, "paddock-pool: %s\n", credentials.error().message.c_str());
        return kExitConfigError;
    }
    if (auto problem = pool::checkPoolMetrics(config, tlsOptions); !problem.empty()) {
        std::fprintf(stderr, "paddock-pool: %s\n", problem.c_str());
        return kExitConfigError;
    }

    auto created = pool::SandboxPool::create(config);
    if (!created) {
        std::fprintf(stderr, "paddock-pool: %s\n", created.error().message.c_str());
        return 1;
    }
    auto &sandboxPool = **created;

    std::unique_ptr<pool::PoolMetricsEndpoint> metrics;
    if (!config.metricsListen.empty()) {
        auto started = pool::PoolMetricsEndpoint::start(config, tlsOptions, sandboxPool);
        if (!started) {
            std::fprintf(stderr, "paddock-pool: %s\n", started.error().message.c_str());
            return 1;
        }
        metrics = std::move(*started);
    }

    pool::PoolService service(sandboxPool);
    int port = 0;
    std::unique_ptr<grpc::Server> server = startServer(config, service, *credentials, port);
    if (!server)
        return 1;

    std::signal(SIGTERM, onSignal);
    std::signal(SIGINT, onSignal);
    std::signal(SIGPIPE, SIG_IGN);

    sandboxPool.start();
    spdlog::info("paddock-pool '{}' listening on {} (port {}, {}{}), state in {}, init {}", config.poolId, config.listen,
                 port, tlsOptions.certFile.empty() ? "plaintext" : tlsOptions.clientCaFile.empty() ? "TLS" : "mutual TLS",
                 tlsOptions.tokenFile.empty() ? "" : ", bearer token required", config.stateDir.string(),
                 config.initPath.string());
    for (const auto &t : config.tiers)
        spdlog::info("tier '{}': runtime {}, warm {}, max {}", t.name, t.runtime, t.warmCount, t.maxCount);
    if (metrics)
        spdlog::info("metrics at {}{}", metrics->url(), tlsOptions.tokenFile.empty() ? "" : " (bearer token required)");

    while (!g_stop)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));

    if (metrics)
        metrics->stop();
    drainAndStop(config, service, sandboxPool, *server);
    spdlog::info("stopped");
    return 0;
}

} // namespace
} // namespace paddock

int main(int argc, char **argv)
{
    using namespace paddock;
    CLI::App app{"paddock-pool: the Paddock pool agent (warm sandboxes, served over gRPC)"};
    PoolFlags flags;
    addOptions(app, flags);
    CLI11_PARSE(app, argc, argv);

    const bool explicitConfig = !flags.configFile.empty();
    const auto file = explicitConfig ? std::filesystem::path(flags.configFile) : defaultConfigDir() / "pool.toml";
    ConfigProblems problems;
    pool::PoolConfig config = pool::loadPoolConfig(file, explicitConfig, problems);
    if (!problems.empty() && !flags.checkConfig) {
        printProblems(problems, "paddock-pool");
        return kExitConfigError;
    }
    applyFlags(flags, config);
    if (flags.checkConfig)
        return reportConfigCheck(flags, config, problems, file);
    return serve(flags, config);
}
