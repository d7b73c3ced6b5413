#include "cli/app.h"

#include "cli/address.h"
#include "cli/auth_commands.h"
#include "cli/broker_call.h"
#include "cli/broker_endpoints.h"
#include "cli/exit_codes.h"
#include "cli/operator_commands.h"
#include "cli/agents_commands.h"
#include "cli/decisions_commands.h"
#include "cli/override_command.h"
#include "cli/cost_commands.h"
#include "cli/review_commands.h"
#include "cli/secrets_commands.h"
#include "cli/storage_commands.h"
#include "cli/submit_file.h"
#include "cli/trace_command.h"
#include "common/clock.h"
#include "rpc/broker_stubs.h"
#include "trace/safe_text.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace paddock::cli {
namespace {

namespace v1 = paddock::v1;
using nlohmann::json;

constexpr auto kInterruptPoll = std::chrono::milliseconds(50);
constexpr int kMaxPageSize = 1000;

// How long a follow, or a call sent again, waits for a broker to answer after losing one: long
// enough for a broker that restarts (it serves again within a second of a kill -9).
constexpr auto kFailoverWait = std::chrono::seconds(5);

struct CommandContext {
    const Invocation &inv;
    const Environment &env;
    BrokerEndpoints &broker;
    const BrokerCall &call;   // the same connection, as the command families get it
    std::ostream &out;
    std::ostream &err;

    bool interrupted() const { return env.interrupted && env.interrupted(); }

    int fail(std::string_view action, const grpc::Status &status, std::string_view hint = {}) const
    {
        return call.fail(err, action, status, hint);
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

void printSession(const CommandContext &c, const v1::Session &session)
{
    if (c.inv.output == OutputFormat::Json)
        c.out << sessionToJson(session).dump(2) << "\n";
    else
        c.out << formatSessionDetail(session, nowUnixMs());
}

// Ctrl-C while following: the handler only sets a flag; this thread turns it into a clean cancel of
// the call. Catches Ctrl-C from construction to destruction.
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
};

// How a stream of events ended, over every call of it (a follow moves to another broker with a
// new call that starts after the last seq printed).
struct StreamedEvents {
    grpc::Status status;
    int64_t lastSeq = 0;        // the last seq printed (from_seq - 1 when none was)
    bool receivedAny = false;   // by the last call
    EventPrintState printed;    // what the text output has said so far, across calls
};

// Prints the events of one StreamEvents call as they come, each seq once: a seq at or before the
// last one printed (a broker that repeats itself after a move) is skipped. While following, a
// watcher thread cancels the call once the user presses Ctrl-C.
void printEventStream(const CommandContext &c, grpc::ClientContext &context, const v1::StreamEventsRequest &request,
                      StreamedEvents &streamed)
{
    std::jthread watcher;
    if (request.follow() && c.env.interrupted) {
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
    streamed.receivedAny = false;
    while (reader->Read(&batch)) {
        streamed.receivedAny = true;
        for (const auto &event : batch.events()) {
            if (event.seq() <= streamed.lastSeq)
                continue;
            if (c.inv.output == OutputFormat::Json)
                c.out << eventToJson(event).dump() << "\n";
            else
                c.out << formatEvent(event, false, &streamed.printed);
            streamed.lastSeq = event.seq();
        }
        c.out.flush();   // live: a pipe reader sees each batch as it comes
    }
    streamed.status = reader->Finish();
    if (watcher.joinable()) {
        watcher.request_stop();
        watcher.join();
    }
}

// After a follow: the session's outcome decides the exit code, so ask for the session as the fold
// now has it.
int reportOutcome(const CommandContext &c, const std::string &id, int64_t lastSeq)
{
    v1::GetSessionRequest getRequest;
    getRequest.set_id(id);
    v1::Session session;
    if (const auto got = c.call.unary(&SessionStub::GetSession, getRequest, session); !got.ok())
        return c.fail("cannot read the outcome of session " + id, got, sessionHint(got, Command::Show, id));
    if (!isFinal(session.status())) {
        return c.failWith(ExitCode::Error,
                          "the event stream of session " + id + " ended before the session did (it is "
                              + statusName(session.status()) + "); follow again with `paddockctl events " + id
                              + " --from " + std::to_string(lastSeq + 1) + " -f`");
    }
    const bool succeeded = session.status() == v1::SESSION_STATUS_SUCCEEDED;
    if (c.inv.output == OutputFormat::Table) {
        std::string line = "session " + id + " " + statusName(session.status());
        if (!session.status_reason().empty())
            line += ": " + trace::safeLine(session.status_reason());   // the model's words, maybe
        line += " (" + std::to_string(session.steps()) + " steps, " + formatCost(session.cost_micros()) + ")";
        (succeeded ? c.out : c.err) << line << "\n";
    }
    return toInt(succeeded ? ExitCode::Ok : ExitCode::SessionFailed);
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
    request.set_follow(follow);

    const InterruptScope interruptScope(c.env, follow);
    StreamedEvents streamed;
    streamed.lastSeq = std::max<int64_t>(fromSeq, 1) - 1;
    bool flowed = false;   // some call of this stream delivered events
    bool lost = false;     // the stream broke and no broker took it up again in time
    // A broken stream is taken up again until kFailoverWait has passed since it broke: calls that
    // fail at once (a broker that is shutting down may still accept a call, then cancel it) do not
    // start the wait again; a call that delivered events or held a while does.
    std::optional<std::chrono::steady_clock::time_point> brokenSince;
    for (;;) {
        // From the seq after the last one printed: after a move to another broker, the log goes on
        // there with no gap and no repeat (every broker of a team reads the same store).
        request.set_from_seq(streamed.lastSeq + 1);
        grpc::ClientContext context;
        if (!follow)
            c.broker.setDeadline(context);
        const int64_t before = streamed.lastSeq;
        const auto callStart = std::chrono::steady_clock::now();
        printEventStream(c, context, request, streamed);
        if (streamed.status.ok() || c.interrupted())
            break;
        // CANCELLED that the user did not ask for: the broker ended the call (it is stopping).
        if (!outcomeUnknown(streamed.status) && streamed.status.error_code() != grpc::StatusCode::CANCELLED)
            break;
        const auto now = std::chrono::steady_clock::now();
        const bool wasFlowing = streamed.lastSeq > before || now - callStart >= kFailoverWait;
        flowed = flowed || streamed.lastSeq > before;
        if (wasFlowing || !brokenSince)
            brokenSince = now;
        const auto giveUpAt = *brokenSince + kFailoverWait;
        if (now >= giveUpAt) {
            lost = true;
            break;
        }
        if (!wasFlowing)
            std::this_thread::sleep_for(kInterruptPoll);   // the same broker again, or one just started
        const std::string from = c.broker.shown();
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(giveUpAt - std::chrono::steady_clock::now());
        if (!c.broker.failover(std::max(left, std::chrono::milliseconds(1)))) {
            lost = true;
            break;
        }
        if (c.broker.shown() != from || wasFlowing) {
            c.err << "paddockctl: lost the broker at " << from << " (" << streamed.status.error_message() << "); "
                  << (follow ? "following" : "reading") << " session " << id << " on " << c.broker.shown()
                  << " from seq " << streamed.lastSeq + 1 << "\n";
        }
    }
    const grpc::Status &status = streamed.status;
    const int64_t lastSeq = streamed.lastSeq;

    if (c.interrupted()) {
        c.err << "paddockctl: stopped following session " << id << "; it goes on (`paddockctl cancel " << id
              << "` stops it, `paddockctl events " << id << " --from " << lastSeq + 1 << " -f` follows again)\n";
        return toInt(ExitCode::Interrupted);
    }
    if (lost && (flowed || streamed.receivedAny || status.error_code() == grpc::StatusCode::CANCELLED)) {
        // The stream was flowing and the broker went away (killed, restarted) with none of the list
        // taking it up: nothing recorded is lost, and the user can pick up exactly where the output
        // stopped.
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
    return reportOutcome(c, id, lastSeq);
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

    // One id for this submit and its retries (BrokerCall::unary sends it again when no answer
    // came): the broker makes one session of it, whichever broker of the list records it.
    request.set_request_id(inv.requestId.empty() ? newRequestId() : inv.requestId);
    v1::Session session;
    const grpc::Status status = c.call.unary(&SessionStub::SubmitSession, request, session);
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
        const grpc::Status status = c.call.unary(&SessionStub::ListSessions, request, response);
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
    const grpc::Status status = c.call.unary(&SessionStub::GetSession, request, session);
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
    grpc::Status status;
    std::string verb;
    switch (c.inv.command) {
    case Command::Cancel:
        verb = "cancel";
        status = c.call.unary(&SessionStub::CancelSession, request, session);
        break;
    case Command::Pause:
        verb = "pause";
        status = c.call.unary(&SessionStub::PauseSession, request, session);
        break;
    default:
        verb = "resume";
        status = c.call.unary(&SessionStub::ResumeSession, request, session);
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
    const grpc::Status status = c.call.unary(&OperationsStub::ListPools, v1::ListPoolsRequest{}, response);
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
// bearer token from --token-file or $PADDOCK_TOKEN when there is one. anyTcp: the list has a
// host:port broker, for which the TLS flags are meant.
Result<std::shared_ptr<grpc::ChannelCredentials>> channelCredentials(const BrokerAddress &address,
                                                                     const Invocation &inv, const Environment &env,
                                                                     bool anyTcp)
{
    if (address.isUnix()) {
        if (!anyTcp && (!inv.tlsCa.empty() || !inv.tokenFile.empty()))
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
    case Command::Submit:
        if (!inv.submitFile.empty())
            return "cannot submit the sessions of " + (inv.submitFile == "-" ? std::string("stdin") : inv.submitFile);
        return "cannot submit the session";
    case Command::List: return "cannot list sessions";
    case Command::Show: return "cannot show session " + inv.sessionId;
    case Command::Events:
    case Command::Trace: return "cannot read the events of session " + inv.sessionId;
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
    case Command::Storage: return "cannot read the checkpoint store's figures";
    case Command::StorageCollect: return "cannot collect checkpoints";
    }
    return "cannot run the command";
}

} // namespace

int runInvocation(const Invocation &inv, const Environment &env, std::ostream &out, std::ostream &err)
{
    const std::string shown = chooseBrokerAddress(inv.broker, env.brokerAddress, env.defaultSocketPath);
    const auto addresses = parseBrokerAddresses(shown);
    if (!addresses) {
        err << "paddockctl: " << addresses.error().message << "\n";
        return toInt(ExitCode::Usage);
    }
    // A missing socket file is the common case of "no broker": say so without a connect attempt.
    const bool anySocketThere = std::any_of(addresses->begin(), addresses->end(), [](const BrokerAddress &address) {
        std::error_code ec;
        return !address.isUnix() || std::filesystem::exists(address.unixPath, ec);
    });
    if (!anySocketThere) {
        err << "paddockctl: " << actionName(inv) << ": " << unreachableMessage(shown) << "\n";
        return toInt(ExitCode::BrokerUnreachable);
    }

    const bool anyTcp = std::any_of(addresses->begin(), addresses->end(),
                                    [](const BrokerAddress &address) { return !address.isUnix(); });
    std::vector<BrokerEndpoints::Endpoint> endpoints;
    for (const auto &address : *addresses) {
        auto credentials = channelCredentials(address, inv, env, anyTcp);
        if (!credentials) {
            err << "paddockctl: " << actionName(inv) << ": " << credentials.error().message << "\n";
            return toInt(credentials.error().code == ErrorCode::InvalidArgument ? ExitCode::Usage : ExitCode::Error);
        }
        endpoints.push_back({address, address.written, std::move(*credentials)});
    }
    BrokerEndpoints broker(std::move(endpoints), inv.timeoutS);
    broker.start();
    const BrokerCall call{broker.stubs(),
                          [&](grpc::ClientContext &c) { broker.setDeadline(c); },
                          [&] { return broker.connected(); },
                          shown,
                          env.interrupted,
                          [&](const grpc::Status &status) {
                              const std::string lost = broker.shown();
                              if (!broker.failover(kFailoverWait))
                                  return false;
                              err << "paddockctl: no answer from the broker at " << lost << " ("
                                  << status.error_message() << "); trying again at " << broker.shown() << "\n";
                              return true;
                          },
                          static_cast<int>(broker.count())};
    const CommandContext context{inv, env, broker, call, out, err};
    switch (inv.command) {
    case Command::Submit:
        if (!inv.submitFile.empty())
            return runSubmitFile(inv, call, env.input ? *env.input : std::cin, env.errIsTerminal, out, err);
        return runSubmit(context);
    case Command::List: return runList(context);
    case Command::Show: return runShow(context);
    case Command::Events: return streamEvents(context, inv.sessionId, inv.fromSeq, inv.follow);
    case Command::Trace: return runTraceCommand(inv, call, out, err);
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
    case Command::Storage:
    case Command::StorageCollect: return runStorageCommand(inv, call, out, err);
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
