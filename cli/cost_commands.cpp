#include "cli/cost_commands.h"

#include "cli/auth_commands.h"
#include "cli/exit_codes.h"
#include "common/clock.h"

#include <cmath>
#include <ctime>

namespace paddock::cli {

namespace {

// Micro-dollars with six decimals: costs of single steps are fractions of a cent.
std::string exactCost(int64_t micros)
{
    char text[32];
    std::snprintf(text, sizeof text, "$%.6f", static_cast<double>(micros) / 1e6);
    return text;
}

int runCost(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::GetCostSummaryRequest request;
    request.set_group_by(inv.costBy);
    request.set_session_id(inv.sessionId);
    request.set_agent(inv.agent);
    if (!inv.since.empty()) {
        auto since = parseSince(inv.since, nowUnixMs());
        if (!since) {
            err << "paddockctl cost: --since " << inv.since
                << " is neither a duration (30m, 24h, 7d) nor a UTC date (2026-11-30)\n";
            return toInt(ExitCode::Usage);
        }
        request.set_from_unix_ms(*since);
    }
    if (!inv.bucket.empty()) {
        auto bucket = parseDurationMs(inv.bucket);
        if (!bucket) {
            err << "paddockctl cost: --bucket " << inv.bucket << " is not a duration such as 15m, 1h or 1d\n";
            return toInt(ExitCode::Usage);
        }
        request.set_bucket_ms(*bucket);
    }
    v1::CostSummary response;
    const grpc::Status status = call.unary(&GovernanceStub::GetCostSummary, request, response);
    if (!status.ok())
        return call.fail(err, "cannot read costs", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json lines = nlohmann::json::array();
        for (const auto &line : response.lines()) {
            nlohmann::json j{{"key", line.key()}, {"cost_micros", line.cost_micros()}};
            if (request.bucket_ms() > 0)
                j["bucket_start_unix_ms"] = line.bucket_start_unix_ms();
            lines.push_back(std::move(j));
        }
        out << nlohmann::json{{"group_by", inv.costBy}, {"lines", lines}, {"total_micros", response.total_micros()}}
                   .dump(2)
            << "\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &line : response.lines()) {
        std::vector<std::string> row;
        if (request.bucket_ms() > 0)
            row.push_back(formatIsoTime(line.bucket_start_unix_ms()));
        row.push_back(line.key().empty() ? "(none)" : line.key());
        row.push_back(exactCost(line.cost_micros()));
        rows.push_back(std::move(row));
    }
    std::vector<std::string> header;
    if (request.bucket_ms() > 0)
        header.push_back("FROM");
    std::string key = inv.costBy;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::toupper(c); });
    header.push_back(key);
    header.push_back("COST");
    if (rows.empty())
        out << "no costs recorded" << (inv.since.empty() ? "" : " since " + inv.since) << "\n";
    else
        out << renderTable(header, rows, {header.size() - 1});
    out << "total " << exactCost(response.total_micros()) << "\n";
    return toInt(ExitCode::Ok);
}

int runBudgets(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::ListBudgetsResponse response;
    const grpc::Status status = call.unary(&GovernanceStub::ListBudgets, v1::ListBudgetsRequest{}, response);
    if (!status.ok())
        return call.fail(err, "cannot list budgets", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &b : response.budgets())
            list.push_back({{"agent", b.agent()}, {"per_day_micros", b.per_day_micros()},
                            {"spent_today_micros", b.spent_today_micros()},
                            {"per_session_micros", b.per_session_micros()},
                            {"burn_micros_per_hour", b.burn_micros_per_hour()},
                            {"paused_sessions", b.paused_sessions()}});
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    if (response.budgets().empty()) {
        out << "no agent has spent anything today\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &b : response.budgets()) {
        std::string used = "-";
        if (b.per_day_micros() > 0)
            used = std::to_string(b.spent_today_micros() * 100 / b.per_day_micros()) + "%";
        rows.push_back({b.agent(), exactCost(b.spent_today_micros()),
                        b.per_day_micros() ? exactCost(b.per_day_micros()) : "none", used,
                        b.per_session_micros() ? exactCost(b.per_session_micros()) : "none",
                        exactCost(b.burn_micros_per_hour()) + "/h", std::to_string(b.paused_sessions())});
    }
    out << renderTable({"AGENT", "TODAY", "PER DAY", "USED", "PER SESSION", "BURN (LAST HOUR)", "PAUSED"}, rows,
                       {1, 2, 3, 4, 5, 6});
    return toInt(ExitCode::Ok);
}

} // namespace

std::optional<int64_t> parseDurationMs(const std::string &text)
{
    // The unit is required here: a bare number is not a duration but the start of a date.
    if (text.empty() || text.back() < 'a' || text.back() > 'z')
        return std::nullopt;
    auto seconds = parseDurationSeconds(text);
    return seconds ? std::optional<int64_t>(*seconds * 1000) : std::nullopt;
}

std::optional<int64_t> parseSince(const std::string &text, int64_t nowUnixMs)
{
    if (auto duration = parseDurationMs(text))
        return nowUnixMs - *duration;
    std::tm tm{};
    const char *end = strptime(text.c_str(), "%Y-%m-%d", &tm);
    if (!end || *end != '\0')
        return std::nullopt;
    return static_cast<int64_t>(timegm(&tm)) * 1000;
}

std::optional<int64_t> parseDollars(const std::string &text)
{
    std::string number = text.starts_with("$") ? text.substr(1) : text;
    if (number.empty())
        return std::nullopt;
    size_t used = 0;
    double value = 0;
    try {
        value = std::stod(number, &used);
    } catch (const std::exception &) {
        return std::nullopt;
    }
    if (used != number.size() || value < 0 || !std::isfinite(value) || value > 1e9)
        return std::nullopt;
    return static_cast<int64_t>(std::llround(value * 1e6));
}

CostSubcommands addCostCommands(CLI::App &app, Invocation &inv)
{
    CostSubcommands commands;
    commands.cost = app.add_subcommand("cost", "Spend from the broker's cost ledger, summed per session, agent, tier, "
                                               "model, day or kind");
    commands.cost->add_option("--by", inv.costBy, "Group by: session (default), agent, tier, model, day or kind")
        ->check(CLI::IsMember({"session", "agent", "tier", "model", "day", "kind"}));
    commands.cost->add_option("--since", inv.since, "Only costs since: a duration back from now (30m, 24h, 7d) or a "
                                                    "UTC date (2026-11-30)");
    commands.cost->add_option("--session", inv.sessionId, "Only this session's costs");
    commands.cost->add_option("--agent", inv.agent, "Only this agent's costs");
    commands.cost->add_option("--bucket", inv.bucket, "Spend over time: one line per key and bucket (15m, 1h, 1d)");
    commands.budgets = app.add_subcommand("budgets", "Agents' budgets, today's spend and the burn rate of the last hour");
    return commands;
}

std::optional<Command> parsedCostCommand(const CostSubcommands &commands)
{
    if (commands.cost && commands.cost->parsed())
        return Command::Cost;
    if (commands.budgets && commands.budgets->parsed())
        return Command::Budgets;
    return std::nullopt;
}

int runCostCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    return inv.command == Command::Budgets ? runBudgets(inv, call, out, err) : runCost(inv, call, out, err);
}

} // namespace paddock::cli
