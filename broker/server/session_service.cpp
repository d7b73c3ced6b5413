// SessionService (proto/paddock/v1/sessions.proto): submit a session, read it and its log, follow
// them live, cancel, pause and resume. The environment decision at submit is made here, next to the
// submit path it belongs to.

#include "broker/server/session_service.h"

#include "broker/llm/playbook.h"
#include "broker/server/convert.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace paddock::server {

namespace {

std::string newSessionId()
{
    thread_local std::mt19937_64 random{std::random_device{}()};
    static const char *digits = "0123456789abcdef";
    std::string id = "s-";
    uint64_t bits = random();
    for (int i = 0; i < 12; ++i, bits >>= 4)
        id += digits[bits & 0xf];
    return id;
}

// request_id: what a client may send (a UUID fits with room to spare).
constexpr size_t kMaxRequestIdBytes = 128;

// Empty when id is a usable request_id, else what is wrong with it, for people.
std::string requestIdProblem(const std::string &id)
{
    const bool printable = std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
    if (id.size() <= kMaxRequestIdBytes && printable)
        return {};
    return "request_id must be 1 to " + std::to_string(kMaxRequestIdBytes)
        + " printable ASCII characters (a UUID, say); this one has " + std::to_string(id.size())
        + (printable ? " characters" : " bytes, some not printable") + ". Send a fresh UUID per submit";
}

// What makes two submits the same request: every field but request_id, each one named and its
// length given (so no two requests run together into the same text), a field at its default left
// out (so a field added later changes no fingerprint of a request that does not use it).
std::string submitFingerprint(const v1::SubmitSessionRequest &request)
{
    std::string text;
    auto add = [&text](std::string_view name, const std::string &value) {
        if (value.empty())
            return;
        text.append(name).append("=").append(std::to_string(value.size())).append(":").append(value).append("\n");
    };
    add("agent", request.agent());
    add("goal", request.goal());
    add("model", request.model());
    add("playbook", request.playbook());
    add("playbook_toml", request.playbook_toml());
    add("tier", request.tier());
    for (const auto &tag : request.tags())
        add("tag", tag);
    for (const auto &secret : request.secrets())
        add("secret", secret);
    if (request.budget_micros() != 0)
        add("budget_micros", std::to_string(request.budget_micros()));
    return auth::sha256Hex(text);
}

} // namespace

SessionService::Finisher::Finisher() : m_thread([this] { loop(); }) {}

SessionService::Finisher::~Finisher()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_one();
    m_thread.join();
}

void SessionService::Finisher::post(std::function<void()> work)
{
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(work));
    }
    m_wake.notify_one();
}

void SessionService::Finisher::loop()
{
    std::deque<std::function<void()>> batch;
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_stopping || !m_queue.empty(); });
            if (m_queue.empty())
                return;   // stopping, and everything posted has run
            batch.swap(m_queue);
        }
        for (auto &work : batch) {
            try {
                work();
            } catch (const std::exception &e) {
                spdlog::error("finishing a call threw: {}", e.what());
            }
        }
        batch.clear();
    }
}

SessionService::SessionService(ServiceContext &context) : m_context(context) {}

Result<SessionService::StartDecision> SessionService::decideStart(const v1::SubmitSessionRequest &request,
                                                                 const std::string &goal, const std::string &playbook)
{
    if (!m_context.options.decider) {
        if (!request.agent().empty() && request.agent() != agents::kDefaultAgentName)
            return fail(ErrorCode::InvalidArgument, "unknown agent '" + request.agent() + "': this broker keeps no "
                            "agents; submit without --agent");
        policy::TierDecision decision;
        decision.trigger = "session_start";
        decision.requestedTier = request.tier();
        decision.chosenTier = request.tier().empty() ? m_context.options.defaultTier : request.tier();
        decision.chooser = request.tier().empty() ? "default" : "human";
        decision.rule = request.tier().empty() ? "default tier" : "submitted tier";
        decision.agent = agents::kDefaultAgentName;
        return StartDecision{std::move(decision), std::nullopt};
    }
    auto agent = m_context.options.decider->agent(request.agent());
    if (!agent)
        return std::unexpected(agent.error());
    if (!request.tier().empty() && !agent->allows(request.tier())) {
        std::string allowed;
        for (const auto &tier : agent->allowedTiers)
            allowed += (allowed.empty() ? "" : ", ") + tier;
        return fail(ErrorCode::InvalidArgument, "agent '" + agent->name + "' may not use tier '" + request.tier()
                        + "': its allowed tiers are " + allowed + ". Pick one of those, or leave --tier out and let its "
                        "selection mode decide");
    }
    std::vector<std::string> tags(request.tags().begin(), request.tags().end());
    const auto context = m_context.options.decider->context(*agent, {agent->name, tags, goal, playbook});
    return StartDecision{policy::decideAtStart(context, request.tier()), agent->budgetPerSessionMicros};
}

Result<SessionService::PlaybookHead> SessionService::playbookHead(const std::string &toml, const std::string &sourceName)
{
    // Texts up to this size are remembered, this many of them: a few MiB at most.
    constexpr size_t kMaxCachedPlaybookBytes = 64 * 1024;
    constexpr size_t kMaxCachedPlaybooks = 64;
    std::string key = sourceName + '\0' + toml;
    {
        std::lock_guard lock(m_playbooksMutex);
        if (auto it = m_playbooks.find(key); it != m_playbooks.end())
            return it->second;
    }
    auto playbook = llm::parsePlaybook(toml, sourceName);
    if (!playbook)
        return std::unexpected(playbook.error());
    PlaybookHead head{playbook->name, playbook->goal};
    if (toml.size() <= kMaxCachedPlaybookBytes) {
        std::lock_guard lock(m_playbooksMutex);
        if (m_playbooks.size() >= kMaxCachedPlaybooks)
            m_playbooks.clear();   // a fleet's playbooks are few; many different ones are rare
        m_playbooks.emplace(std::move(key), head);
    }
    return head;
}

Result<store::AppendRequest> SessionService::prepareSubmit(const v1::SubmitSessionRequest &request,
                                                          const std::string &fingerprint, Access::Call &call)
{
    if (request.budget_micros() < 0)
        return fail(ErrorCode::InvalidArgument, "budget_micros is negative (" + std::to_string(request.budget_micros())
                        + "): give a budget in micro-USD, or 0 for the agent's own");
    const bool hasPlaybook = !request.playbook().empty() || !request.playbook_toml().empty();
    std::string modelName = request.model();
    if (modelName.empty()) {
        if (!hasPlaybook)
            return fail(ErrorCode::InvalidArgument,
                        "nothing to run: give a playbook (paddockctl submit --playbook NAME) or a goal and a model "
                        "(--goal TEXT --model NAME)");
        modelName = "scripted";
    }
    if (!m_context.models(modelName))
        return fail(ErrorCode::NotFound, "no model named '" + modelName + "' is configured on this broker; configured: "
                        + joined(m_context.options.modelNames) + ". Add it under [models] in the broker config or pick one of those");

    std::string goal = request.goal();
    std::string playbookName = request.playbook();
    std::string playbookToml;
    if (modelName == "scripted") {
        if (!request.playbook().empty() && !request.playbook_toml().empty())
            return fail(ErrorCode::InvalidArgument, "give either a playbook name or a playbook's text, not both");
        if (!hasPlaybook)
            return fail(ErrorCode::InvalidArgument,
                        "the scripted model needs a playbook: pass --playbook NAME or --playbook FILE (available: "
                            + joined(llm::listPlaybooks(m_context.options.playbookDir)) + ")");
        if (!request.playbook().empty()) {
            auto text = llm::loadPlaybookText(m_context.options.playbookDir, request.playbook());
            if (!text)
                return std::unexpected(text.error());
            playbookToml = std::move(*text);
        } else {
            playbookToml = request.playbook_toml();
        }
        auto playbook = playbookHead(playbookToml, playbookName.empty() ? "<submitted playbook>" : playbookName);
        if (!playbook)
            return std::unexpected(playbook.error());
        if (playbookName.empty())
            playbookName = playbook->name;
        if (goal.empty())
            goal = playbook->goal;
    } else if (goal.empty()) {
        return fail(ErrorCode::InvalidArgument, "model '" + modelName + "' needs a goal: pass --goal TEXT");
    }

    auto start = decideStart(request, goal, playbookName);
    if (!start)
        return std::unexpected(start.error());
    policy::TierDecision &decision = start->decision;
    const std::string tier = decision.chosenTier;
    if (auto offered = m_context.pools.offeredTiers(); offered && !offered->contains(tier)) {
        // When no pool answers, nothing is known: the session waits in the queue for one instead.
        std::vector<std::string> names(offered->begin(), offered->end());
        return fail(ErrorCode::InvalidArgument, "no pool offers tier '" + tier + "'; the pools offer: " + joined(names)
                        + ". Pick one of those, or add the tier to a pool's configuration");
    }

    auto grants = checkGrants(request);
    if (!grants)
        return std::unexpected(grants.error());

    nlohmann::json tags = nlohmann::json::array();
    for (const auto &tag : request.tags())
        tags.push_back(tag);
    const std::string agent = decision.agent;
    int64_t budget = request.budget_micros();
    if (budget == 0 && m_context.options.budgets) {
        // The budgets read the agents' store too: the agent the decision just read answers the same,
        // without a second query per submit.
        budget = start->agentBudgetMicros ? *start->agentBudgetMicros
                                          : m_context.options.budgets->budgetOf(agent).perSessionMicros;
    }
    const nlohmann::json payload{{"agent", agent},
                                 {"submitted_by", call.caller.principal},
                                 {"budget_micros", budget},
                                 {"secrets", *grants},
                                 {"goal", goal},
                                 {"model", modelName},
                                 {"playbook", playbookName},
                                 {"playbook_toml", playbookToml},
                                 {"tier", tier},
                                 {"tags", tags}};
    store::AppendRequest append;
    append.sessionId = newSessionId();
    append.expectedLastSeq = 0;
    // A goal or a playbook may quote a value by mistake; the log must not keep it.
    append.events.push_back({core::kind::SessionCreated, m_context.redactedJson(payload), 0});
    // The decision is the session's second event, committed with its creation.
    decision.id = engine::EnvironmentDecider::decisionId(append.sessionId, 2);
    append.events.push_back({core::kind::EnvDecision, m_context.redactedJson(decision.toJson()), 0});
    call.target = append.sessionId;
    append.writes.push_back(m_context.access.auditOf(call, playbookName.empty() ? "model " + modelName : "playbook " + playbookName));
    if (!request.request_id().empty()) {
        // Its primary key refuses a second session for the same id, whichever broker commits first.
        append.writes.push_back(store::submitRequestInsert(
            {call.caller.principal, request.request_id(), append.sessionId, fingerprint, nowUnixMs()}));
    }
    return append;
}

grpc::Status SessionService::answerRepeated(const store::SubmitRequestRecord &earlier, const std::string &fingerprint,
                                            Access::Call &call, v1::Session *response)
{
    call.target = earlier.sessionId;
    call.carried = false;   // no append carries this call's audit record: conclude writes it
    if (earlier.fingerprint != fingerprint) {
        return m_context.access.conclude(
            call, {grpc::StatusCode::ALREADY_EXISTS,
                   "request_id '" + earlier.requestId + "' was used for session " + earlier.sessionId
                       + ", submitted with a different request (goal, agent, model, playbook, tier, tags, secrets or "
                         "budget). A retry must send the same request; for a new session send a new request_id "
                         "(paddockctl and the console make one per submit)"});
    }
    auto state = m_context.getSession(earlier.sessionId);
    if (state)
        toProto(*state, response);
    return m_context.access.conclude(call, statusOf(state),
                                     "request_id " + earlier.requestId + " again: session " + earlier.sessionId
                                         + " was made by an earlier submit");
}

Result<std::vector<std::string>> SessionService::checkGrants(const v1::SubmitSessionRequest &request) const
{
    std::vector<std::string> names;
    for (const auto &name : request.secrets()) {
        if (std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(name);
    }
    if (names.empty())
        return names;
    if (!m_context.options.secrets)
        return fail(ErrorCode::InvalidArgument, "this broker keeps no secrets, so it cannot grant " + joined(names)
                        + "; submit without --secret");
    const auto unknown = m_context.options.secrets->unknown(names);
    if (!unknown.empty()) {
        std::vector<std::string> held;
        for (const auto &info : m_context.options.secrets->list())
            held.push_back(info.name);
        return fail(ErrorCode::InvalidArgument,
                    std::string(unknown.size() == 1 ? "unknown secret " : "unknown secrets ") + joined(unknown)
                        + ": the broker holds " + joined(held) + ". Set it first with `paddockctl secrets set "
                        + unknown.front() + "` (the value is read from stdin), or submit without it");
    }
    return names;
}

Result<core::SessionState> SessionService::changeStatus(const std::string &id, core::SessionStatus status,
                                                       const std::string &reason, const char *verb,
                                                       const std::function<bool(core::SessionStatus)> &allowed,
                                                       Access::Call &call)
{
    // Compare-and-append: if a step lands between our read and our append, read again and re-check,
    // so a session that has just ended is never "cancelled" after the fact.
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto state = m_context.getSession(id);
        if (!state)
            return state;
        if (!allowed(state->status))
            return fail(ErrorCode::FailedPrecondition, std::string("cannot ") + verb + " session " + id + ": it is "
                            + core::statusName(state->status));
        store::AppendRequest append;
        append.sessionId = id;
        append.expectedLastSeq = state->lastSeq;
        nlohmann::json payload{{"status", core::statusName(status)}};
        if (!reason.empty())
            payload["reason"] = reason;
        append.events.push_back({core::kind::StateChanged, m_context.redactedJson(payload), 0});
        append.writes.push_back(m_context.access.auditOf(call, reason));
        auto appended = m_context.store.appendSync(std::move(append));
        if (appended)
            return appended->state;
        if (appended.error().code != ErrorCode::Aborted)
            return std::unexpected(appended.error());
    }
    return fail(ErrorCode::Aborted, std::string("could not ") + verb + " session " + id
                    + ": it kept changing under us; try again");
}

grpc::ServerUnaryReactor *SessionService::SubmitSession(grpc::CallbackServerContext *context,
                                                       const v1::SubmitSessionRequest *request, v1::Session *response)
{
    auto call = m_context.access.authorize(context, "SubmitSession");
    if (!call)
        return finish(context, call);
    const std::string &requestId = request->request_id();
    std::string fingerprint;
    if (!requestId.empty()) {
        if (const std::string problem = requestIdProblem(requestId); !problem.empty())
            return finish(context, m_context.access.conclude(*call, {grpc::StatusCode::INVALID_ARGUMENT, problem}));
        fingerprint = submitFingerprint(*request);
        // A retry of a submit that committed: its session, without deciding anything again.
        auto earlier = store::findSubmitRequest(m_context.store, call->caller.principal, requestId);
        if (!earlier)
            return finish(context, m_context.access.conclude(*call, statusOf(earlier)));
        if (*earlier)
            return finish(context, answerRepeated(**earlier, fingerprint, *call, response));
    }
    auto append = prepareSubmit(*request, fingerprint, *call);
    if (!append)
        return finish(context, m_context.access.conclude(*call, statusOf(append)));
    // The commit answers the call: no callback thread waits for it (16 submits in flight share
    // one group commit instead of queueing behind gRPC's two threads).
    auto *reactor = context->DefaultReactor();
    m_context.store.appendThen(std::move(*append), [this, reactor, response, call = std::move(*call), requestId,
                                                    fingerprint](Result<store::AppendResult> appended) mutable {
        m_finisher.post([this, reactor, response, call = std::move(call), appended = std::move(appended),
                         requestId = std::move(requestId), fingerprint = std::move(fingerprint)]() mutable {
            if (!appended && !requestId.empty()) {
                // Refused: when another submit of this id committed first (here or on another
                // broker), the key of submit_requests is what refused it. Answer with that session.
                auto earlier = store::findSubmitRequest(m_context.store, call.caller.principal, requestId);
                if (earlier && *earlier) {
                    reactor->Finish(answerRepeated(**earlier, fingerprint, call, response));
                    return;
                }
            }
            if (appended)
                toProto(appended->state, response);
            reactor->Finish(m_context.access.conclude(call, statusOf(appended)));
        });
    });
    return reactor;
}

grpc::ServerUnaryReactor *SessionService::GetSession(grpc::CallbackServerContext *context,
                                                    const v1::GetSessionRequest *request, v1::Session *response)
{
    if (auto call = m_context.access.authorize(context, "GetSession", request->id()); !call)
        return finish(context, call);
    auto state = m_context.getSession(request->id());
    if (state)
        toProto(*state, response);
    return finish(context, state);
}

grpc::ServerUnaryReactor *SessionService::ListSessions(grpc::CallbackServerContext *context,
                                                      const v1::ListSessionsRequest *request,
                                                      v1::ListSessionsResponse *response)
{
    if (auto call = m_context.access.authorize(context, "ListSessions"); !call)
        return finish(context, call);
    auto query = toQuery(request->filter());
    if (!query)
        return finish(context, query);
    query->pageSize = request->page_size() > 0 ? std::min(request->page_size(), 1000) : 100;
    query->pageToken = request->page_token();
    auto page = m_context.store.listSessions(*query);
    if (page) {
        for (const auto &state : page->sessions)
            toProto(state, response->add_sessions());
        response->set_next_page_token(page->nextPageToken);
    }
    return finish(context, page);
}

grpc::ServerWriteReactor<v1::SessionChanges> *SessionService::WatchSessions(grpc::CallbackServerContext *context,
                                                                           const v1::WatchSessionsRequest *request)
{
    if (auto call = m_context.access.authorize(context, "WatchSessions"); !call)
        return refusedStream<v1::SessionChanges>(toGrpcStatus(call.error()));
    return m_context.hub.watchSessions(*request);
}

grpc::ServerWriteReactor<v1::EventBatch> *SessionService::StreamEvents(grpc::CallbackServerContext *context,
                                                                      const v1::StreamEventsRequest *request)
{
    using Refusal = Error;
    auto refuse = [](const Error &error) { return refusedStream<v1::EventBatch>(toGrpcStatus(error)); };
    if (auto call = m_context.access.authorize(context, "StreamEvents", request->session_id()); !call)
        return refuse(call.error());
    auto state = m_context.getSession(request->session_id());
    if (!state)
        return refuse(state.error());
    if (request->from_seq() < 0 || request->from_seq() > state->lastSeq + 1) {
        return refuse(Refusal{ErrorCode::OutOfRange,
                            "from_seq " + std::to_string(request->from_seq()) + " is past the end of session "
                                + state->id + ", which has " + std::to_string(state->lastSeq)
                                + " events: pass a seq from 1 to " + std::to_string(state->lastSeq + 1)});
    }
    return m_context.hub.streamEvents(*request, *state);
}

grpc::ServerUnaryReactor *SessionService::sessionAction(grpc::CallbackServerContext *context, const char *method,
                                                       const v1::SessionActionRequest *request, v1::Session *response,
                                                       core::SessionStatus status, const std::string &defaultReason,
                                                       const std::function<bool(core::SessionStatus)> &allowed)
{
    auto call = m_context.access.authorize(context, method, request->id());
    if (!call)
        return finish(context, call);
    const std::string verb = method == std::string_view("CancelSession") ? "cancel"
        : method == std::string_view("PauseSession")                      ? "pause"
                                                                          : "resume";
    auto state = changeStatus(request->id(), status, request->reason().empty() ? defaultReason : request->reason(),
                              verb.c_str(), allowed, *call);
    if (state)
        toProto(*state, response);
    return finish(context, m_context.access.conclude(*call, statusOf(state)));
}

grpc::ServerUnaryReactor *SessionService::CancelSession(grpc::CallbackServerContext *context,
                                                       const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "CancelSession", request, response, core::SessionStatus::Cancelled,
                         "cancelled by request", [](core::SessionStatus s) { return !core::isTerminal(s); });
}

grpc::ServerUnaryReactor *SessionService::PauseSession(grpc::CallbackServerContext *context,
                                                      const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "PauseSession", request, response, core::SessionStatus::Paused, {},
                         [](core::SessionStatus s) {
                             return s == core::SessionStatus::Queued || s == core::SessionStatus::Running;
                         });
}

grpc::ServerUnaryReactor *SessionService::ResumeSession(grpc::CallbackServerContext *context,
                                                       const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "ResumeSession", request, response, core::SessionStatus::Running, {},
                         [](core::SessionStatus s) { return s == core::SessionStatus::Paused; });
}

} // namespace paddock::server
