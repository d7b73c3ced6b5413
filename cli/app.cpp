#include "cli/app.h"

#include "cli/address.h"
#include "cli/auth_commands.h"
#include "cli/exit_codes.h"
#include "cli/operator_commands.h"
#include "cli/agents_commands.h"
#include "cli/decisions_commands.h"
#include "cli/override_command.h"
#include "cli/cost_commands.h"
#include "cli/review_commands.h"
#include "cli/secrets_commands.h"
#include "common/clock.h"
#include "rpc/broker_stubs.h"

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

#ifndef PADDOCK_VERSION
#define PADDOCK_VERSION "unknown"
#endif

namespace paddock::cli {
namespace {

namespace v1 = paddock::v1;
using nlohmann::json;

constexpr auto kInterruptPoll = std::chrono::milliseconds(50);
constexpr int kMaxPageSize = 1000;

// One broker connection for the life of a command.
class BrokerConnection {
public:
    // credentials: insecure for the unix socket; TLS (and a bearer token) for TCP.
    BrokerConnection(BrokerAddress address, std::string shown, double timeoutS,
                     std::shared_ptr<grpc::ChannelCredentials> credentials)
        : m_address(std::move(address))
        , m_shown(std::move(shown))
        , m_timeoutS(timeoutS)
        , m_channel(grpc::CreateChannel(m_address.target, std::move(credentials)))
        , m_stubs(std::make_unique<rpc::BrokerStubs>(m_channel))
    {
    }

    rpc::BrokerStubs &stubs() { return *m_stubs; }
    const std::string &shown() const { return m_shown; }

    // Every call that is not a follow gets a deadline: a broker that hangs must not hang scripts.
    void setDeadline(grpc::ClientContext &context) const
    {
        context.set_deadline(std::chrono::system_clock::now()
                             + std::chrono::milliseconds(static_cast<int64_t>(m_timeoutS * 1000)));
    }

    // Whether calls reach the broker. A status the broker itself returned leaves the channel READY;
    // a refused or lost connection does not.
    bool connected() const { return m_channel->GetState(false) == GRPC_CHANNEL_READY; }

private:
    BrokerAddress m_address;
    std::string m_shown;
    double m_timeoutS;
    std::shared_ptr<grpc::Channel> m_channel;
    std::unique_ptr<rpc::BrokerStubs> m_stubs;
};

struct CommandContext {
    const Invocation &inv;
    const Environment &env;
    BrokerConnection &broker;
    std::ostream &out;
    std::ostream &err;

    bool interrupted() const { return env.interrupted && env.interrupted(); }

    int fail(std::string_view action, const grpc::Status &status, std::string_view hint = {}) const
    {
        const bool isConnected = broker.connected();
        err << "paddockctl: " << describeFailure(action, status, isConnected, broker.shown(), hint) << "\n";
        return toInt(exitCodeFor(status.error_code(), isConnected));
    }

    int failWith(ExitCode code, const std::string &message) const
    {
        err << "paddockctl: " << message << "\n";
        return toInt(code);
    }
};

std::string listSessionsHint() { return "`paddockctl ls` lists the sessions this broker knows"; }

std::string sessionHint(const grpc::Status &status, Command command, const std::string &id)
{
    switch (status.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
        return "check the id; " + listSessionsHint();
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
        if (command == Command::Resume)
            return "only a paused session can be resumed; `paddockctl show " + id + "` shows its status";
        if (command == Command::Cancel || command == Command::Pause)
            return "a session that has ended has nothing left to stop; `paddockctl show " + id + "` shows its status";
        return "`paddockctl show " + id + "` shows its status";
    default:
        return {};
    }
}

// The broker parses submitted playbook text under a placeholder name; the user knows it as a file.
grpc::Status nameThePlaybookFile(const grpc::Status &status, const std::string &file, bool *named)
{
    *named = false;
    if (file.empty())
        return status;
    std::string message = status.error_message();
    for (const std::string placeholder : {"<submitted playbook>", "<submitted>"}) {
        for (auto at = message.find(placeholder); at != std::string::npos; at = message.find(placeholder)) {
            message.replace(at, placeholder.size(), file);
            *named = true;
        }
    }
    return grpc::Status(status.error_code(), message, status.error_details());
}

void printSession(const CommandContext &c, const v1::Session &session)
{
    if (c.inv.output == OutputFormat::Json)
        c.out << sessionToJson(session).dump(2) << "\n";
    else
        c.out << formatSessionDetail(session, nowUnixMs());
}

// Streams a session's events to out. follow: until the session ends, then exit with its outcome.
int streamEvents(const CommandContext &c, const std::string &id, int64_t fromSeq, bool follow)
{
    const std::string action = "cannot read the events of session " + id;
    if (fromSeq < 0) {
        return c.failWith(ExitCode::InvalidArgument, action + ": --from " + std::to_string(fromSeq)
                                                         + " is negative; seqs start at 1");
    }
    v1::StreamEventsRequest request;
    request.set_session_id(id);
    request.set_from_seq(std::max<int64_t>(fromSeq, 1));
    request.set_follow(follow);

    grpc::ClientContext context;
    if (!follow)
        c.broker.setDeadline(context);

    // Ctrl-C: the handler only sets a flag; this thread turns it into a clean cancel of the call.
    struct InterruptScope {
        const Environment &env;
        bool active;
        InterruptScope(const Environment &e, bool on) : env(e), active(on && e.catchInterrupts)
        {
            if (active)
                env.catchInterrupts(true);
        }
        ~InterruptScope()
        {
            if (active)
                env.catchInterrupts(false);
        }
    } interruptScope(c.env, follow);
    std::jthread watcher;
    if (follow && c.env.interrupted) {
        watcher = std::jthread([&](std::stop_token stop) {
            while (!stop.stop_requested()) {
                if (c.env.interrupted()) {
                    context.TryCancel();
                    return;
                }
                std::this_thread::sleep_for(kInterruptPoll);
            }
        });
    }

    auto reader = c.broker.stubs().sessions->StreamEvents(&context, request);
    v1::EventBatch batch;
    bool endOfSession = false;
    int64_t lastSeq = request.from_seq() - 1;
    bool receivedAny = false;
    while (reader->Read(&batch)) {
        receivedAny = true;
        for (const auto &event : batch.events()) {
            if (c.inv.output == OutputFormat::Json)
                c.out << eventToJson(event).dump() << "\n";
            else
                c.out << formatEvent(event);
            lastSeq = event.seq();
        }
        c.out.flush();   // live: a pipe reader sees each batch as it comes
        endOfSession = endOfSession || batch.end_of_session();
    }
    const grpc::Status status = reader->Finish();
    if (watcher.joinable()) {
        watcher.request_stop();
        watcher.join();
    }

    if (c.interrupted()) {
        c.err << "paddockctl: stopped following session " << id << "; it goes on (`paddockctl cancel " << id
              << "` stops it, `paddockctl events " << id << " --from " << lastSeq + 1 << " -f` follows again)\n";
        return toInt(ExitCode::Interrupted);
    }
    if (!status.ok() && status.error_code() == grpc::StatusCode::UNAVAILABLE && receivedAny) {
        // The stream was flowing and the broker went away (killed, restarted): nothing recorded is
        // lost, and the user can pick up exactly where the output stopped.
        return c.failWith(ExitCode::BrokerUnreachable,
                          action + ": lost the broker at " + c.broker.shown() + " (" + status.error_message()
                              + "); once it is back (`paddockd`), `paddockctl events " + id + " --from "
                              + std::to_string(lastSeq + 1) + (follow ? " -f" : "") + "` continues");
    }
    if (!status.ok()) {
        std::string hint;
        if (status.error_code() == grpc::StatusCode::OUT_OF_RANGE)
            hint = "`paddockctl show " + id + "` shows its last seq";
        else
            hint = sessionHint(status, Command::Events, id);
        return c.fail(action, status, hint);
    }
    if (!follow)
        return toInt(ExitCode::Ok);

    // The outcome decides the exit code, so ask for the session as the fold now has it.
    v1::GetSessionRequest getRequest;
    getRequest.set_id(id);
    v1::Session session;
    grpc::ClientContext getContext;
    c.broker.setDeadline(getContext);
    if (const auto got = c.broker.stubs().sessions->GetSession(&getContext, getRequest, &session); !got.ok())
        return c.fail("cannot read the outcome of session " + id, got, sessionHint(got, Command::Show, id));
    if (!isFinal(session.status())) {
        return c.failWith(ExitCode::Error,
                          "the event stream of session " + id + " ended before the session did (it is "
                              + statusName(session.status()) + "); follow again with `paddockctl events " + id
                              + " --from " + std::to_string(lastSeq + 1) + " -f`");
    }
    (void)endOfSession;
    const bool succeeded = session.status() == v1::SESSION_STATUS_SUCCEEDED;
    if (c.inv.output == OutputFormat::Table) {
        std::string line = "session " + id + " " + statusName(session.status());
        if (!session.status_reason().empty())
            line += ": " + session.status_reason();
        line += " (" + std::to_string(session.steps()) + " steps, " + formatCost(session.cost_micros()) + ")";
        (succeeded ? c.out : c.err) << line << "\n";
    }
    return toInt(succeeded ? ExitCode::Ok : ExitCode::SessionFailed);
}

// A --playbook argument that names a file sends the file's text; anything else is a playbook name.
bool looksLikePath(const std::string &text)
{
    return text.find('/') != std::string::npos || text.ends_with(".toml");
}

int runSubmit(const CommandContext &c)
{
    const Invocation &inv = c.inv;
    const std::string action = "cannot submit the session";
    v1::SubmitSessionRequest request;
    request.set_agent(inv.agent);
    request.set_goal(inv.goal);
    request.set_model(inv.model);
    request.set_tier(inv.tier);
    for (const auto &tag : inv.tags)
        request.add_tags(tag);
    for (const auto &name : inv.secrets)
        request.add_secrets(name);
    if (!inv.budget.empty()) {
        auto budget = parseDollars(inv.budget);
        if (!budget) {
            c.err << "paddockctl submit: --budget " << inv.budget << " is not an amount of US dollars (e.g. 0.05)\n";
            return toInt(ExitCode::Usage);
        }
        request.set_budget_micros(*budget);
    }

    std::string playbookFile;
    if (!inv.playbook.empty()) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(inv.playbook, ec)) {
            std::ifstream file(inv.playbook, std::ios::binary);
            std::ostringstream text;
            text << file.rdbuf();
            if (!file || file.bad()) {
                return c.failWith(ExitCode::Error, action + ": cannot read playbook file " + inv.playbook
                                                       + "; check that it is readable");
            }
            request.set_playbook_toml(text.str());
            playbookFile = inv.playbook;
        } else if (looksLikePath(inv.playbook)) {
            return c.failWith(ExitCode::NotFound,
                              action + ": there is no playbook file " + inv.playbook
                                  + "; check the path, or give the name of a playbook the broker ships (e.g. hello-c)");
        } else {
            request.set_playbook(inv.playbook);
        }
    }

    v1::Session session;
    grpc::ClientContext context;
    c.broker.setDeadline(context);
    const grpc::Status status = c.broker.stubs().sessions->SubmitSession(&context, request, &session);
    if (!status.ok()) {
        bool named = false;
        const grpc::Status shown = nameThePlaybookFile(status, playbookFile, &named);
        std::string hint;
        if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT && !playbookFile.empty() && !named)
            hint = "fix " + playbookFile + " and submit again";
        return c.fail(action, shown, hint);
    }

    if (!inv.follow) {
        if (inv.output == OutputFormat::Json)
            c.out << sessionToJson(session).dump(2) << "\n";
        else
            c.out << session.id() << "\n";   // just the id, so `id=$(paddockctl submit ...)` works
        return toInt(ExitCode::Ok);
    }
    // Followed: the session first (one JSON line, or its id), then its events as they happen.
    if (inv.output == OutputFormat::Json)
        c.out << sessionToJson(session).dump() << "\n";
    else
        c.out << "session " << session.id() << "\n";
    c.out.flush();
    return streamEvents(c, session.id(), 1, true);
}

int runList(const CommandContext &c)
{
    const Invocation &inv = c.inv;
    v1::ListSessionsRequest request;
    for (const auto &name : inv.statuses) {
        // CLI11 already checked the names; this cannot miss.
        if (const auto status = statusFromName(name))
            request.mutable_filter()->add_statuses(*status);
    }
    request.mutable_filter()->set_agent(inv.agent);
    request.mutable_filter()->set_text(inv.search);

    std::vector<v1::Session> sessions;
    std::string nextToken;
    while (true) {
        const int remaining = inv.limit > 0 ? inv.limit - static_cast<int>(sessions.size()) : 0;
        if (inv.limit > 0)
            request.set_page_size(std::min(remaining, kMaxPageSize));
        request.set_page_token(nextToken);
        v1::ListSessionsResponse response;
        grpc::ClientContext context;
        c.broker.setDeadline(context);
        const grpc::Status status = c.broker.stubs().sessions->ListSessions(&context, request, &response);
        if (!status.ok())
            return c.fail("cannot list sessions", status);
        for (auto &session : *response.mutable_sessions())
            sessions.push_back(std::move(session));
        nextToken = response.next_page_token();
        const bool limitReached = inv.limit > 0 && static_cast<int>(sessions.size()) >= inv.limit;
        if (nextToken.empty() || limitReached || !inv.all)
            break;
    }
    if (inv.limit > 0 && static_cast<int>(sessions.size()) > inv.limit)
        sessions.resize(static_cast<size_t>(inv.limit));

    if (inv.output == OutputFormat::Json) {
        json list = json::array();
        for (const auto &session : sessions)
            list.push_back(sessionToJson(session));
        c.out << list.dump(2) << "\n";
    } else {
        c.out << formatSessionTable(sessions, nowUnixMs());
    }
    const bool limitReached = inv.limit > 0 && static_cast<int>(sessions.size()) >= inv.limit;
    if (!nextToken.empty() && !inv.all && !limitReached)
        c.err << "(more sessions: pass --all for every page, or --limit N)\n";
    return toInt(ExitCode::Ok);
}

int runShow(const CommandContext &c)
{
    v1::GetSessionRequest request;
    request.set_id(c.inv.sessionId);
    v1::Session session;
    grpc::ClientContext context;
    c.broker.setDeadline(context);
    const grpc::Status status = c.broker.stubs().sessions->GetSession(&context, request, &session);
    if (!status.ok())
        return c.fail("cannot show session " + c.inv.sessionId, status, sessionHint(status, Command::Show, c.inv.sessionId));
    printSession(c, session);
    return toInt(ExitCode::Ok);
}

int runAction(const CommandContext &c)
{
    v1::SessionActionRequest request;
    request.set_id(c.inv.sessionId);
    request.set_reason(c.inv.reason);
    v1::Session session;
    grpc::ClientContext context;
    c.broker.setDeadline(context);
    grpc::Status status;
    std::string verb;
    switch (c.inv.command) {
    case Command::Cancel:
        verb = "cancel";
        status = c.broker.stubs().sessions->CancelSession(&context, request, &session);
        break;
    case Command::Pause:
        verb = "pause";
        status = c.broker.stubs().sessions->PauseSession(&context, request, &session);
        break;
    default:
        verb = "resume";
        status = c.broker.stubs().sessions->ResumeSession(&context, request, &session);
        break;
    }
    if (!status.ok())
        return c.fail("cannot " + verb + " session " + c.inv.sessionId, status,
                      sessionHint(status, c.inv.command, c.inv.sessionId));
    if (c.inv.output == OutputFormat::Json)
        c.out << sessionToJson(session).dump(2) << "\n";
    else
        c.out << "session " << session.id() << ": " << statusName(session.status()) << "\n";
    return toInt(ExitCode::Ok);
}

int runPools(const CommandContext &c)
{
    v1::ListPoolsResponse response;
    grpc::ClientContext context;
    c.broker.setDeadline(context);
    const grpc::Status status = c.broker.stubs().operations->ListPools(&context, v1::ListPoolsRequest{}, &response);
    if (!status.ok())
        return c.fail("cannot list pools", status);
    if (c.inv.output == OutputFormat::Json)
        c.out << poolsToJson(response).dump(2) << "\n";
    else
        c.out << formatPoolsTable(response);
    return toInt(ExitCode::Ok);
}

Result<std::string> readSmallTextFile(const std::string &flag, const std::string &path)
{
    std::ifstream file(path, std::ios::binary);
    std::ostringstream text;
    text << file.rdbuf();
    if (!file || file.bad())
        return fail(ErrorCode::InvalidArgument, flag + " " + path + ": cannot read it; check the path and its "
                                                                    "permissions");
    return text.str();
}

// Insecure for the unix socket (the peer's OS user is the principal); TLS for TCP, with the
// bearer token from --token-file or $PADDOCK_TOKEN when there is one.
Result<std::shared_ptr<grpc::ChannelCredentials>> channelCredentials(const BrokerAddress &address,
                                                                     const Invocation &inv, const Environment &env)
{
    if (address.isUnix()) {
        if (!inv.tlsCa.empty() || !inv.tokenFile.empty())
            return fail(ErrorCode::InvalidArgument, "--tls-ca and --token-file are for a host:port broker; on the "
                                                    "unix socket your OS user is who you are");
        return grpc::InsecureChannelCredentials();
    }
    grpc::SslCredentialsOptions ssl;
    if (!inv.tlsCa.empty()) {
        auto ca = readSmallTextFile("--tls-ca", inv.tlsCa);
        if (!ca)
            return std::unexpected(ca.error());
        if (ca->find("-----BEGIN ") == std::string::npos)
            return fail(ErrorCode::InvalidArgument, "--tls-ca " + inv.tlsCa + " holds no PEM certificate; point it "
                                                                              "at the CA that signed the broker's certificate");
        ssl.pem_root_certs = std::move(*ca);
    }
    auto credentials = grpc::SslCredentials(ssl);
    std::string token = env.token.value_or("");
    if (!inv.tokenFile.empty()) {
        auto read = readSmallTextFile("--token-file", inv.tokenFile);
        if (!read)
            return std::unexpected(read.error());
        token = std::move(*read);
    }
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
        token.pop_back();
    if (token.empty())
        return credentials;   // the broker answers UNAUTHENTICATED saying how to get a token
    return grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
}

std::string actionName(const Invocation &inv)
{
    switch (inv.command) {
    case Command::Submit: return "cannot submit the session";
    case Command::List: return "cannot list sessions";
    case Command::Show: return "cannot show session " + inv.sessionId;
    case Command::Events: return "cannot read the events of session " + inv.sessionId;
    case Command::Cancel: return "cannot cancel session " + inv.sessionId;
    case Command::Pause: return "cannot pause session " + inv.sessionId;
    case Command::Resume: return "cannot resume session " + inv.sessionId;
    case Command::Pools: return "cannot list pools";
    case Command::SecretsSet: return "cannot set secret " + inv.secretName;
    case Command::SecretsList: return "cannot list secrets";
    case Command::SecretsRemove: return "cannot remove secret " + inv.secretName;
    case Command::PostMortemsList:
    case Command::PostMortemsShow:
    case Command::PostMortemsFiles:
    case Command::PostMortemsCat:
    case Command::PostMortemsDownload:
    case Command::SnapshotList:
    case Command::DebugShell: return "cannot run the operator command";
    case Command::OverrideTier: return "cannot move session " + inv.sessionId + " to tier " + inv.tier;
    case Command::Whoami: return "cannot ask the broker who you are";
    case Command::TokensCreate: return "cannot create a token for " + inv.tokenPrincipal;
    case Command::TokensList: return "cannot list tokens";
    case Command::TokensRevoke: return "cannot revoke token " + inv.tokenId;
    case Command::Audit: return "cannot read the audit log";
    case Command::ReviewsList:
    case Command::ReviewsShow:
    case Command::ReviewsApprove:
    case Command::ReviewsReject:
    case Command::ReviewsStats: return "cannot reach the review queue";
    case Command::Cost:
    case Command::Budgets: return "cannot read costs";
    case Command::AgentsCreate:
    case Command::AgentsList:
    case Command::AgentsShow:
    case Command::AgentsEdit:
    case Command::AgentsRecordsSet:
    case Command::AgentsRecordsGet: return "cannot run the agents command";
    case Command::DecisionsList:
    case Command::DecisionsStats: return "cannot read decisions";
    }
    return "cannot run the command";
}

} // namespace

ParseOutcome parseCommandLine(const std::vector<std::string> &args, std::ostream &out, std::ostream &err)
{
    Invocation inv;
    std::string broker;
    std::string output = "table";

    CLI::App app{"paddockctl: drive a Paddock broker from a shell: submit agent sessions, list them, follow their "
                 "events, cancel, pause and resume them.",
                 "paddockctl"};
    app.set_version_flag("--version", std::string("paddockctl ") + PADDOCK_VERSION);
    app.require_subcommand(1);
    app.fallthrough();   // global options may follow the command: `paddockctl ls --output json`
    app.footer(std::string("Broker address: --broker, else $PADDOCK_BROKER, else the default unix socket "
                           "($XDG_RUNTIME_DIR/paddock/broker.sock).\n\n")
               + std::string(exitCodeHelp()));
    app.add_option("--broker", broker,
                   "Broker address: unix:/path, /path (a unix socket) or host:port. Default: $PADDOCK_BROKER, "
                   "else the user's broker socket");
    app.add_option("-o,--output", output, "Output format of every read: table (for people) or json (for scripts)")
        ->check(CLI::IsMember({"table", "json"}));
    app.add_option("--timeout", inv.timeoutS, "Deadline in seconds of each call (not of a follow)")
        ->check(CLI::PositiveNumber);
    app.add_option("--tls-ca", inv.tlsCa, "For a host:port broker: the CA (PEM) that signed its certificate. Default: "
                                          "the system's CAs");
    app.add_option("--token-file", inv.tokenFile, "For a host:port broker: a file holding your bearer token (from "
                                                  "`paddockctl tokens create`). Default: $PADDOCK_TOKEN");

    auto *submit = app.add_subcommand("submit", "Submit a session: a playbook, or a goal for a model");
    submit->add_option("--playbook", inv.playbook,
                       "Playbook name (shipped with the broker) or a playbook file whose text is sent");
    submit->add_option("--goal", inv.goal, "What the agent should do");
    submit->add_option("--model", inv.model, "Model: scripted (with --playbook), openai, ...");
    submit->add_option("--tier", inv.tier, "Sandbox tier (lite, standard, heavy); default: the agent's selection mode "
                                           "decides (docs/governance.md)");
    submit->add_option("--agent", inv.agent, "Agent to run as; default: the broker's default agent");
    submit->add_option("--tag", inv.tags, "Tag the session (repeatable)");
    submit->add_option("--secret", inv.secrets,
                       "Grant the broker's secret NAME: its value is in the environment of the session's commands "
                       "as $NAME and redacted from everything recorded (repeatable)");
    submit->add_option("--budget", inv.budget,
                       "The session's budget in US dollars (e.g. 0.05); past 80% it warns, at 100% it waits for a "
                       "budget_extension review. Default: the agent's");
    submit->add_flag("-f,--follow", inv.follow,
                     "Stream the events until the session ends; exit 0 if it succeeded, 7 if not");

    auto *list = app.add_subcommand("ls", "List sessions, newest first");
    list->add_option("--status", inv.statuses, "Only sessions in this status (repeatable)")
        ->check(CLI::IsMember({"queued", "running", "waiting_approval", "paused", "succeeded", "failed",
                               "cancelled"}));
    list->add_option("--agent", inv.agent, "Only this agent's sessions");
    list->add_option("--search", inv.search, "Only sessions whose goal, id or playbook contains TEXT");
    list->add_option("--limit", inv.limit, "At most N sessions")->check(CLI::PositiveNumber);
    list->add_flag("--all", inv.all, "Follow page tokens to list every matching session");

    auto *show = app.add_subcommand("show", "Show one session");
    show->add_option("ID", inv.sessionId, "Session id")->required();

    auto *events = app.add_subcommand("events", "Print a session's events: seq, time, kind, summary");
    events->add_option("ID", inv.sessionId, "Session id")->required();
    events->add_option("--from", inv.fromSeq, "Start at this seq (default 1)");
    events->add_flag("-f,--follow", inv.follow,
                     "Keep streaming until the session ends; exit 0 if it succeeded, 7 if not");

    auto *cancel = app.add_subcommand("cancel", "Cancel a session");
    cancel->add_option("ID", inv.sessionId, "Session id")->required();
    cancel->add_option("--reason", inv.reason, "Why; recorded in the session's log");

    auto *pause = app.add_subcommand("pause", "Pause a session after its current step");
    pause->add_option("ID", inv.sessionId, "Session id")->required();
    pause->add_option("--reason", inv.reason, "Why; recorded in the session's log");

    auto *resume = app.add_subcommand("resume", "Resume a paused session");
    resume->add_option("ID", inv.sessionId, "Session id")->required();
    resume->add_option("--reason", inv.reason, "Why; recorded in the session's log");

    auto *pools = app.add_subcommand("pools", "List the broker's pools and their tiers");
    auto *overrideTier = addOverrideCommand(app, inv);
    const SecretsSubcommands secrets = addSecretsCommands(app, inv);
    const OperatorSubcommands operatorCommands = addOperatorCommands(app, inv);
    const AuthSubcommands authCommands = addAuthCommands(app, inv);
    const ReviewSubcommands reviewCommands = addReviewCommands(app, inv);
    const CostSubcommands costCommands = addCostCommands(app, inv);
    const AgentsSubcommands agentsCommands = addAgentsCommands(app, inv);
    const DecisionsSubcommands decisionsCommands = addDecisionsCommands(app, inv);

    try {
        // CLI11 consumes the vector from the back.
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
    } catch (const CLI::ParseError &e) {
        const int cliCode = app.exit(e, out, err);
        return {std::nullopt, cliCode == 0 ? toInt(ExitCode::Ok) : toInt(ExitCode::Usage)};
    }

    if (submit->parsed()) {
        inv.command = Command::Submit;
        if (inv.playbook.empty() && inv.goal.empty()) {
            err << "paddockctl submit: say what to run: --playbook NAME_OR_FILE, or --goal TEXT --model NAME\n";
            return {std::nullopt, toInt(ExitCode::Usage)};
        }
        if (inv.playbook.empty() && inv.model.empty()) {
            err << "paddockctl submit: --goal needs --model NAME (e.g. openai), or a --playbook for the scripted "
                   "model\n";
            return {std::nullopt, toInt(ExitCode::Usage)};
        }
    } else if (list->parsed()) {
        inv.command = Command::List;
    } else if (show->parsed()) {
        inv.command = Command::Show;
    } else if (events->parsed()) {
        inv.command = Command::Events;
    } else if (cancel->parsed()) {
        inv.command = Command::Cancel;
    } else if (pause->parsed()) {
        inv.command = Command::Pause;
    } else if (resume->parsed()) {
        inv.command = Command::Resume;
    } else if (pools->parsed()) {
        inv.command = Command::Pools;
    } else if (overrideTier->parsed()) {
        inv.command = Command::OverrideTier;
    } else if (auto secretsCommand = parsedSecretsCommand(secrets)) {
        inv.command = *secretsCommand;
    } else if (auto operatorCommand = parsedOperatorCommand(operatorCommands)) {
        inv.command = *operatorCommand;
    } else if (auto authCommand = parsedAuthCommand(authCommands)) {
        inv.command = *authCommand;
    } else if (auto reviewCommand = parsedReviewCommand(reviewCommands)) {
        inv.command = *reviewCommand;
    } else if (auto costCommand = parsedCostCommand(costCommands)) {
        inv.command = *costCommand;
    } else if (auto agentsCommand = parsedAgentsCommand(agentsCommands, inv)) {
        inv.command = *agentsCommand;
    } else if (auto decisionsCommand = parsedDecisionsCommand(decisionsCommands)) {
        inv.command = *decisionsCommand;
    }
    if (!broker.empty())
        inv.broker = broker;
    inv.output = output == "json" ? OutputFormat::Json : OutputFormat::Table;
    return {std::move(inv), 0};
}

int runInvocation(const Invocation &inv, const Environment &env, std::ostream &out, std::ostream &err)
{
    const std::string shown = chooseBrokerAddress(inv.broker, env.brokerAddress, env.defaultSocketPath);
    const auto address = parseBrokerAddress(shown);
    if (!address) {
        err << "paddockctl: " << address.error().message << "\n";
        return toInt(ExitCode::Usage);
    }
    // A missing socket file is the common case of "no broker": say so without a connect attempt.
    if (address->isUnix()) {
        std::error_code ec;
        if (!std::filesystem::exists(address->unixPath, ec)) {
            err << "paddockctl: " << actionName(inv) << ": " << unreachableMessage(shown) << "\n";
            return toInt(ExitCode::BrokerUnreachable);
        }
    }

    auto credentials = channelCredentials(*address, inv, env);
    if (!credentials) {
        err << "paddockctl: " << actionName(inv) << ": " << credentials.error().message << "\n";
        return toInt(credentials.error().code == ErrorCode::InvalidArgument ? ExitCode::Usage : ExitCode::Error);
    }
    BrokerConnection broker(*address, shown, inv.timeoutS, *credentials);
    const CommandContext context{inv, env, broker, out, err};
    const BrokerCall call{broker.stubs(), [&](grpc::ClientContext &c) { broker.setDeadline(c); },
                          [&] { return broker.connected(); }, shown, env.interrupted};
    switch (inv.command) {
    case Command::Submit: return runSubmit(context);
    case Command::List: return runList(context);
    case Command::Show: return runShow(context);
    case Command::Events: return streamEvents(context, inv.sessionId, inv.fromSeq, inv.follow);
    case Command::Cancel:
    case Command::Pause:
    case Command::Resume: return runAction(context);
    case Command::Pools: return runPools(context);
    case Command::SecretsSet:
    case Command::SecretsList:
    case Command::SecretsRemove: {
        std::istream &in = env.input ? *env.input : std::cin;
        return runSecretsCommand(inv, call, in, !env.input && ::isatty(STDIN_FILENO), out, err);
    }
    case Command::PostMortemsList:
    case Command::PostMortemsShow:
    case Command::PostMortemsFiles:
    case Command::PostMortemsCat:
    case Command::PostMortemsDownload:
    case Command::SnapshotList:
    case Command::DebugShell: return runOperatorCommand(inv, call, env.input ? *env.input : std::cin, out, err);
    case Command::OverrideTier: return runOverrideCommand(inv, call, out, err);
    case Command::Whoami:
    case Command::TokensCreate:
    case Command::TokensList:
    case Command::TokensRevoke:
    case Command::Audit: return runAuthCommand(inv, call, out, err);
    case Command::ReviewsList:
    case Command::ReviewsShow:
    case Command::ReviewsApprove:
    case Command::ReviewsReject:
    case Command::ReviewsStats: return runReviewCommand(inv, call, out, err);
    case Command::Cost:
    case Command::Budgets: return runCostCommand(inv, call, out, err);
    case Command::AgentsCreate:
    case Command::AgentsList:
    case Command::AgentsShow:
    case Command::AgentsEdit:
    case Command::AgentsRecordsSet:
    case Command::AgentsRecordsGet: return runAgentsCommand(inv, call, out, err);
    case Command::DecisionsList:
    case Command::DecisionsStats: return runDecisionsCommand(inv, call, out, err);
    }
    return toInt(ExitCode::Error);
}

int runCli(const std::vector<std::string> &args, const Environment &env, std::ostream &out, std::ostream &err)
{
    const ParseOutcome parsed = parseCommandLine(args, out, err);
    if (!parsed.invocation)
        return parsed.exitCode;
    return runInvocation(*parsed.invocation, env, out, err);
}

} // namespace paddock::cli
