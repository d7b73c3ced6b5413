#include "cli/auth_commands.h"

#include "cli/exit_codes.h"
#include "cli/format.h"
#include "common/clock.h"

#include <charconv>

namespace paddock::cli {

namespace {

std::string whenOrDash(int64_t unixMs, int64_t now)
{
    return unixMs > 0 ? formatAge(unixMs, now) + (unixMs > now ? "" : " ago") : "-";
}

nlohmann::json tokenToJson(const v1::TokenInfo &info)
{
    return {{"id", info.id()},
            {"principal", info.principal()},
            {"description", info.description()},
            {"created_unix_ms", info.created_unix_ms()},
            {"expires_unix_ms", info.expires_unix_ms()},
            {"last_used_unix_ms", info.last_used_unix_ms()},
            {"revoked", info.revoked()}};
}

int runWhoami(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::Principal me;
    if (auto status = call.unary(&AccessStub::WhoAmI, {}, me); !status.ok())
        return call.fail(err, "cannot ask the broker who you are", status);
    if (inv.output == OutputFormat::Json) {
        out << nlohmann::json{{"name", me.name()},
                              {"role", me.role()},
                              {"via", me.via()},
                              {"permitted_methods", std::vector<std::string>(me.permitted_methods().begin(),
                                                                             me.permitted_methods().end())}}
                   .dump(2)
            << "\n";
        return toInt(ExitCode::Ok);
    }
    out << "principal  " << me.name() << "\nrole       " << me.role() << "\nvia        "
        << (me.via() == "unix" ? "unix socket (peer credentials)" : me.via() == "token" ? "bearer token" : me.via())
        << "\nmay call   ";
    for (int i = 0; i < me.permitted_methods_size(); ++i)
        out << (i ? ", " : "") << me.permitted_methods(i);
    out << "\n";
    return toInt(ExitCode::Ok);
}

int runTokensCreate(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::CreateTokenRequest request;
    request.set_principal(inv.tokenPrincipal);
    request.set_description(inv.tokenDescription);
    if (!inv.tokenTtl.empty()) {
        auto seconds = parseDurationSeconds(inv.tokenTtl);
        if (!seconds) {
            err << "paddockctl tokens create: " << seconds.error().message << "\n";
            return toInt(ExitCode::Usage);
        }
        request.set_ttl_seconds(*seconds);
    }
    v1::CreatedToken created;
    if (auto status = call.unary(&AccessStub::CreateToken, request, created); !status.ok())
        return call.fail(err, "cannot create a token for " + inv.tokenPrincipal, status);
    if (inv.output == OutputFormat::Json) {
        out << nlohmann::json{{"token", created.token()}, {"info", tokenToJson(created.info())}}.dump(2) << "\n";
    } else {
        // The token alone on stdout, so `paddockctl tokens create ci > ci.token` works; the rest on stderr.
        out << created.token() << "\n";
        err << "token " << created.info().id() << " for " << created.info().principal()
            << (created.info().expires_unix_ms() ? ", expires in " + formatAge(nowUnixMs(), created.info().expires_unix_ms())
                                                 : std::string(", no expiry"))
            << ". It is shown this once: keep it in a file only you can read (chmod 600) and pass it with "
               "--token-file\n";
    }
    return toInt(ExitCode::Ok);
}

int runTokensList(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::ListTokensResponse response;
    if (auto status = call.unary(&AccessStub::ListTokens, {}, response); !status.ok())
        return call.fail(err, "cannot list tokens", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &info : response.tokens())
            list.push_back(tokenToJson(info));
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    const int64_t now = nowUnixMs();
    std::vector<std::vector<std::string>> rows;
    for (const auto &info : response.tokens()) {
        const bool expired = info.expires_unix_ms() > 0 && info.expires_unix_ms() <= now;
        rows.push_back({info.id(), info.principal(), info.revoked() ? "revoked" : expired ? "expired" : "active",
                        whenOrDash(info.created_unix_ms(), now),
                        info.expires_unix_ms() ? (expired ? whenOrDash(info.expires_unix_ms(), now)
                                                          : "in " + formatAge(now, info.expires_unix_ms()))
                                               : "never",
                        whenOrDash(info.last_used_unix_ms(), now), info.description()});
    }
    out << renderTable({"ID", "PRINCIPAL", "STATE", "CREATED", "EXPIRES", "LAST USED", "DESCRIPTION"}, rows);
    return toInt(ExitCode::Ok);
}

int runTokensRevoke(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::RevokeTokenRequest request;
    request.set_id(inv.tokenId);
    v1::TokenInfo info;
    if (auto status = call.unary(&AccessStub::RevokeToken, request, info); !status.ok())
        return call.fail(err, "cannot revoke token " + inv.tokenId, status);
    if (inv.output == OutputFormat::Json)
        out << tokenToJson(info).dump(2) << "\n";
    else
        out << "revoked " << info.id() << " (" << info.principal() << ")\n";
    return toInt(ExitCode::Ok);
}

int runAudit(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::ListAuditRequest request;
    request.set_principal(inv.auditPrincipal);
    request.set_method(inv.auditMethod);
    if (!inv.auditSince.empty()) {
        auto seconds = parseDurationSeconds(inv.auditSince);
        if (!seconds) {
            err << "paddockctl audit: --since: " << seconds.error().message << "\n";
            return toInt(ExitCode::Usage);
        }
        request.set_from_unix_ms(nowUnixMs() - *seconds * 1000);
    }
    request.set_page_size(inv.limit > 0 ? inv.limit : 100);
    v1::ListAuditResponse response;
    if (auto status = call.unary(&AccessStub::ListAudit, request, response); !status.ok())
        return call.fail(err, "cannot read the audit log", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &r : response.records())
            list.push_back({{"id", r.id()}, {"time_unix_ms", r.time_unix_ms()}, {"principal", r.principal()},
                            {"role", r.role()}, {"method", r.method()}, {"target", r.target()},
                            {"result", r.result()}, {"detail", r.detail()}});
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &r : response.records())
        rows.push_back({formatIsoTime(r.time_unix_ms()), r.principal(), r.role(), r.method(), r.target(), r.result(),
                        truncateText(r.detail(), 80)});
    out << renderTable({"TIME", "PRINCIPAL", "ROLE", "METHOD", "TARGET", "RESULT", "DETAIL"}, rows);
    if (!response.next_page_token().empty())
        err << "(older records: pass --limit N or --since)\n";
    return toInt(ExitCode::Ok);
}

} // namespace

Result<int64_t> parseDurationSeconds(std::string_view text)
{
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
    int64_t scale = 0;
    if (unit.empty() || unit == "s") scale = 1;
    else if (unit == "m") scale = 60;
    else if (unit == "h") scale = 3600;
    else if (unit == "d") scale = 86400;
    else if (unit == "w") scale = 7 * 86400;
    if (ec != std::errc() || value <= 0 || scale == 0 || value > (int64_t{1} << 40) / scale)
        return fail(ErrorCode::InvalidArgument, "'" + std::string(text)
                                                    + "' is not a duration; write a positive number with s, m, h, d or w "
                                                      "(e.g. 90s, 15m, 12h, 30d)");
    return value * scale;
}

AuthSubcommands addAuthCommands(CLI::App &app, Invocation &inv)
{
    AuthSubcommands commands;
    commands.whoami = app.add_subcommand("whoami", "Who the broker says you are: principal, role, and what you may call");
    auto *tokens = app.add_subcommand("tokens", "Bearer tokens for callers over TCP (admin)");
    tokens->require_subcommand(1);
    commands.tokensCreate = tokens->add_subcommand(
        "create", "Create a token for PRINCIPAL; the token is printed once, on stdout");
    commands.tokensCreate->add_option("PRINCIPAL", inv.tokenPrincipal, "A [[principal]] of the broker's config")
        ->required();
    commands.tokensCreate->add_option("--description", inv.tokenDescription, "What it is for (shown by tokens ls)");
    commands.tokensCreate->add_option("--ttl", inv.tokenTtl, "Expire after this long: 90s, 15m, 12h, 30d, 2w; "
                                                             "default: never");
    commands.tokensList = tokens->add_subcommand("ls", "List tokens (never the tokens themselves)");
    commands.tokensRevoke = tokens->add_subcommand("revoke", "Revoke a token: calls with it fail from now on");
    commands.tokensRevoke->add_option("ID", inv.tokenId, "Token id (tok-..., from tokens ls)")->required();
    commands.audit = app.add_subcommand("audit", "The audit log, newest first (operator, admin)");
    commands.audit->add_option("--principal", inv.auditPrincipal, "Only this principal's calls");
    commands.audit->add_option("--method", inv.auditMethod, "Only this method (e.g. CancelSession)");
    commands.audit->add_option("--since", inv.auditSince, "Only the last 90s, 15m, 12h, 30d, ...");
    commands.audit->add_option("--limit", inv.limit, "At most N records (default 100)")->check(CLI::PositiveNumber);
    return commands;
}

std::optional<Command> parsedAuthCommand(const AuthSubcommands &commands)
{
    if (commands.whoami->parsed()) return Command::Whoami;
    if (commands.tokensCreate->parsed()) return Command::TokensCreate;
    if (commands.tokensList->parsed()) return Command::TokensList;
    if (commands.tokensRevoke->parsed()) return Command::TokensRevoke;
    if (commands.audit->parsed()) return Command::Audit;
    return std::nullopt;
}

int runAuthCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    switch (inv.command) {
    case Command::Whoami: return runWhoami(inv, call, out, err);
    case Command::TokensCreate: return runTokensCreate(inv, call, out, err);
    case Command::TokensList: return runTokensList(inv, call, out, err);
    case Command::TokensRevoke: return runTokensRevoke(inv, call, out, err);
    case Command::Audit: return runAudit(inv, call, out, err);
    default: return toInt(ExitCode::Error);
    }
}

} // namespace paddock::cli
