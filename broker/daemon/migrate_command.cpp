#include "broker/daemon/migrate_command.h"

#include "broker/daemon/store_opening.h"
#include "broker/store/store_migration.h"
#include "broker/store/store_url.h"

#include <chrono>
#include <cstdio>

namespace paddock::daemon {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 3;
constexpr auto kProgressInterval = std::chrono::seconds(1);

int refuse(const std::string &message)
{
    std::fprintf(stderr, "paddockd migrate: %s\n", message.c_str());
    return kExitBadInput;
}

bool isBadInput(ErrorCode code)
{
    return code == ErrorCode::InvalidArgument || code == ErrorCode::FailedPrecondition
        || code == ErrorCode::PermissionDenied;
}

// The target's settings: --to with the flags' password, else [store] with the flags' password
// over the file's.
Result<broker_config::StoreConfig> targetSettings(const MigrateRequest &request,
                                                  const broker_config::BrokerConfig &config)
{
    broker_config::StoreConfig target = config.store;
    if (!request.to.empty()) {
        target = {};
        target.url = request.to;
        target.where = "--to";
    }
    if (!target.postgres())
        return fail(ErrorCode::InvalidArgument,
                    "name the database to copy into: --to postgresql://USER@HOST/DATABASE, or [store] url in "
                    "broker.toml (" + (config.configFile.empty() ? std::string("no config file was read")
                                                                 : config.configFile.string() + " has none") + ")");
    if (!request.passwordFile.empty() && !request.passwordEnv.empty())
        return fail(ErrorCode::InvalidArgument,
                    "--password-file and --password-env both given: pass the one that holds the password");
    if (!request.passwordFile.empty()) {
        target.passwordFile = request.passwordFile;
        target.passwordEnv.clear();
    } else if (!request.passwordEnv.empty()) {
        target.passwordEnv = request.passwordEnv;
        target.passwordFile.clear();
    }
    if (auto checked = store::checkPostgresUrl(target.url); !checked)
        return fail(ErrorCode::InvalidArgument,
                    (target.where.empty() ? std::string() : target.where + ": ") + checked.error().message
                        + " (or pass --password-file / --password-env)");
    return target;
}

void printCounts(const store::MigrationReport &report)
{
    std::printf("%s %s into %s in %.1f s\n", report.committed ? "copied" : "NOT copied", report.source.c_str(),
                report.target.c_str(), static_cast<double>(report.elapsedMs) / 1000.0);
    if (report.merge)
        std::printf("  %-16s %12s %12s %12s\n", "table", "source", "target had", "target has");
    else
        std::printf("  %-16s %12s %12s\n", "table", "source", "target");
    for (const auto &table : report.tables) {
        if (report.merge)
            std::printf("  %-16s %12lld %12lld %12lld\n", table.table.c_str(), static_cast<long long>(table.source),
                        static_cast<long long>(table.targetBefore), static_cast<long long>(table.targetAfter));
        else
            std::printf("  %-16s %12lld %12lld\n", table.table.c_str(), static_cast<long long>(table.source),
                        static_cast<long long>(table.targetAfter));
    }
    std::printf("  events per session: %lld sessions checked (count, last seq, first and last time, cost): %s\n",
                static_cast<long long>(report.sessionsChecked), report.mismatches.empty() ? "equal" : "see below");
    std::fflush(stdout);
}

} // namespace

int runMigrate(const MigrateRequest &request, const broker_config::BrokerConfig &config)
{
    auto target = targetSettings(request, config);
    if (!target)
        return refuse(target.error().message);
    auto conninfo = broker_config::storeConnectionString(*target);
    if (!conninfo)
        return refuse(conninfo.error().message);

    store::MigrationOptions options;
    options.from = request.from;
    options.toConninfo = std::move(*conninfo);
    options.merge = request.merge;
    auto lastPrinted = std::chrono::steady_clock::now();
    bool printedDone = false;
    options.progress = [&lastPrinted, &printedDone](const store::MigrationProgress &progress) {
        const auto now = std::chrono::steady_clock::now();
        const bool done = progress.sessionsCopied >= progress.sessionsTotal;
        if (done ? printedDone : now - lastPrinted < kProgressInterval)
            return;
        lastPrinted = now;
        printedDone = done;
        std::fprintf(stderr, "paddockd migrate: %lld of %lld sessions copied (%lld of %lld events)\n",
                     static_cast<long long>(progress.sessionsCopied), static_cast<long long>(progress.sessionsTotal),
                     static_cast<long long>(progress.eventsCopied), static_cast<long long>(progress.eventsTotal));
    };
    std::fprintf(stderr, "paddockd migrate: copying %s into %s%s\n", request.from.c_str(),
                 store::describePostgresUrl(target->url).c_str(), request.merge ? " (merging)" : "");

    auto report = store::migrateToPostgres(options);
    if (!report) {
        if (report.error().code == ErrorCode::PermissionDenied)
            return refuse("authentication failed for user " + store::postgresUser(target->url) + ": "
                          + connectionFailure(report.error().message) + ". migrate took the password from "
                          + broker_config::passwordSource(*target)
                          + ": pass --password-file FILE (the password on one line, mode 0600) or --password-env "
                            "VARIABLE");
        std::fprintf(stderr, "paddockd migrate: %s\n", report.error().message.c_str());
        return isBadInput(report.error().code) ? kExitBadInput : kExitFailed;
    }
    printCounts(*report);
    if (!report->mismatches.empty()) {
        for (const auto &mismatch : report->mismatches)
            std::fprintf(stderr, "paddockd migrate: MISMATCH %s\n", mismatch.c_str());
        std::fprintf(stderr, "paddockd migrate: the copy was rolled back: %s is as it was. Run migrate again; if it "
                             "differs again, report it with these lines\n",
                     report->target.c_str());
        return kExitFailed;
    }
    return kExitOk;
}

} // namespace paddock::daemon
