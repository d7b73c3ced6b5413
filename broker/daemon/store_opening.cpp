#include "broker/daemon/store_opening.h"

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"
#include "broker/store/store_url.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace paddock::daemon {

namespace {

constexpr std::chrono::milliseconds kRetryInterval{1000};
constexpr int kLogEveryAttempts = 5;

// A refused login, with what paddockd did about the password and how to give the right one.
Error loginRefused(const broker_config::BrokerConfig &config, const Error &error)
{
    const auto &store = config.store;
    const std::string user = store::postgresUser(store.url);
    const std::string file = config.configFile.empty() ? std::string("broker.toml") : config.configFile.string();
    return {ErrorCode::PermissionDenied,
            "authentication failed for user " + user + ": " + connectionFailure(error.message)
                + ". paddockd took the password from " + broker_config::passwordSource(store) + ": put user " + user
                + "'s password there, or point [store] in " + file
                + " at it with password_file = \"FILE\" (the password on one line, mode 0600) or password_env = "
                  "\"VARIABLE\" (set in paddockd's environment); the password never goes in broker.toml or the url"};
}

} // namespace

std::string connectionFailure(const std::string &storeMessage)
{
    // pg_handle.cpp's advice after libpq's reason; the message is kept whole if it changes.
    for (const char *advice : {". Check the user and its password", ". Start the server, or fix the host"}) {
        if (const auto at = storeMessage.find(advice); at != std::string::npos)
            return storeMessage.substr(0, at);
    }
    return storeMessage;
}

StartWait sleepingStartWait()
{
    return [](std::chrono::milliseconds duration) {
        std::this_thread::sleep_for(duration);
        return true;
    };
}

Result<std::unique_ptr<store::EventStore>> openBrokerStore(const broker_config::BrokerConfig &config,
                                                           const StartWait &wait, const std::string &applicationName)
{
    const auto &settings = config.store;
    if (!settings.postgres())
        return store::openSqliteEventStore(config.dataDir / "broker.db");

    const std::string at = settings.where.empty() ? std::string() : settings.where + ": ";
    auto conninfo = broker_config::storeConnectionString(settings);
    if (!conninfo)
        return fail(conninfo.error().code, at + conninfo.error().message);
    const std::string target = store::describePostgresUrl(settings.url);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(settings.connectWaitMs);
    for (int attempt = 1;; ++attempt) {
        store::PostgresOptions options;
        options.applicationName = applicationName;
        auto opened = store::openPostgresEventStore(*conninfo, options);
        if (opened) {
            if (attempt > 1)
                spdlog::info("store: PostgreSQL at {} answered at attempt {}", target, attempt);
            return opened;
        }
        const Error &error = opened.error();
        if (error.code == ErrorCode::PermissionDenied)
            return std::unexpected(loginRefused(config, error));
        if (error.code != ErrorCode::Unavailable)
            return std::unexpected(error);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return fail(ErrorCode::Unavailable,
                        connectionFailure(error.message) + ". paddockd waited " + std::to_string(settings.connectWaitMs / 1000)
                            + " s for it (connect_wait_ms in [store]) and gives up: start the server, fix the host "
                              "and port of [store] url, or raise connect_wait_ms for a server that starts slowly");
        if (attempt % kLogEveryAttempts == 1)
            spdlog::warn("store: {}. Retrying every {} s for up to {} s more (connect_wait_ms in [store])",
                         connectionFailure(error.message), kRetryInterval.count() / 1000, (left.count() + 999) / 1000);
        if (!wait(std::min(kRetryInterval, left)))
            return fail(ErrorCode::Cancelled, "stopped while waiting for PostgreSQL at " + target);
    }
}

} // namespace paddock::daemon
