#include "broker/server/broker_service.h"

#include "broker/server/caller.h"

#include "broker/model/playbook.h"
#include "broker/server/convert.h"
#include "common/clock.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace paddock::server {

namespace {

grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, const grpc::Status &status)
{
    return finishUnary(context, status);
}

template <typename T>
grpc::Status statusOf(const Result<T> &result)
{
    return result ? grpc::Status::OK : toGrpcStatus(result.error());
}

template <typename T>
grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, const Result<T> &result)
{
    return finish(context, statusOf(result));
}

std::shared_ptr<const auth::PrincipalMap> principalsOr(std::shared_ptr<const auth::PrincipalMap> principals)
{
    if (principals)
        return principals;
    return std::make_shared<const auth::PrincipalMap>(auth::PrincipalMap::embeddedDefault(::getuid()));
}

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

std::string joined(const std::vector<std::string> &names)
{
    std::string out;
    for (const auto &name : names)
        out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "(none)" : out;
}

} // namespace

BrokerService::BrokerService(store::EventStore &store, StreamHub &hub, const pools::PoolSet &pools,
                             engine::ModelLookup models, BrokerServiceOptions options)
    : m_store(store), m_hub(hub), m_pools(pools), m_models(std::move(models)), m_options(std::move(options)),
      m_access(store, principalsOr(m_options.principals))
{
    if (auto loaded = m_access.loadTokens(); !loaded)
        spdlog::error("tokens: {}; no token will be accepted", loaded.error().message);
    initOperator();
    m_sampleWatches = std::make_unique<SampleWatches>(m_pools);
}

grpc::ServerWriteReactor<v1::SandboxSamples> *BrokerService::WatchSandboxSamples(grpc::CallbackServerContext *context,
                                                                                 const v1::WatchSandboxSamplesRequest *req)
{
    if (auto call = m_access.authorize(context, "WatchSandboxSamples"); !call)
        return refusedStream<v1::SandboxSamples>(toGrpcStatus(call.error()));
    return m_sampleWatches->watch(*req);
}

Result<core::SessionState> BrokerService::getSession(const std::string &id)
{
    if (id.empty())
        return fail(ErrorCode::InvalidArgument, "no session id given: pass the id that `paddockctl ls` shows");
    auto state = m_store.getSession(id);
    if (!state && state.error().code == ErrorCode::NotFound)
        return fail(ErrorCode::NotFound, "no session '" + id + "' on this broker: list sessions with `paddockctl ls`");
    return state;
}

Result<policy::TierDecision> BrokerService::decideStart(const v1::SubmitSessionRequest &request, const std::string &goal,
                                                        const std::string &playbook)
{
    if (!m_options.decider) {
        if (!request.agent().empty() && request.agent() != agents::kDefaultAgentName)
            return fail(ErrorCode::InvalidArgument, "unknown agent '" + request.agent() + "': this broker keeps no "
                            "agents; submit without --agent");
        policy::TierDecision decision;
        decision.trigger = "session_start";
        decision.requestedTier = request.tier();
        decision.chosenTier = request.tier().empty() ? m_options.defaultTier : request.tier();
        decision.chooser = request.tier().empty() ? "default" : "human";
        decision.rule = request.tier().empty() ? "default tier" : "submitted tier";
        decision.agent = agents::kDefaultAgentName;
        return decision;
    }
    auto agent = m_options.decider->agent(request.agent());
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
    const auto context = m_options.decider->context(*agent, {agent->name, tags, goal, playbook});
    return policy::decideAtStart(context, request.tier());
}

Result<core::SessionState> BrokerService::submit(const v1::SubmitSessionRequest &request, Access::Call &call)
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
    if (!m_models(modelName))
        return fail(ErrorCode::NotFound, "no model named '" + modelName + "' is configured on this broker; configured: "
                        + joined(m_options.modelNames) + ". Add it under [models] in the broker config or pick one of those");

    std::string goal = request.goal();
    std::string playbookName = request.playbook();
    std::string playbookToml;
    if (modelName == "scripted") {
        if (!request.playbook().empty() && !request.playbook_toml().empty())
            return fail(ErrorCode::InvalidArgument, "give either a playbook name or a playbook's text, not both");
        if (!hasPlaybook)
            return fail(ErrorCode::InvalidArgument,
                        "the scripted model needs a playbook: pass --playbook NAME or --playbook FILE (available: "
                            + joined(model::listPlaybooks(m_options.playbookDir)) + ")");
        if (!request.playbook().empty()) {
            auto text = model::loadPlaybookText(m_options.playbookDir, request.playbook());
            if (!text)
                return std::unexpected(text.error());
            playbookToml = std::move(*text);
        } else {
            playbookToml = request.playbook_toml();
        }
        auto playbook = model::parsePlaybook(playbookToml, playbookName.empty() ? "<submitted playbook>" : playbookName);
        if (!playbook)
            return std::unexpected(playbook.error());
        if (playbookName.empty())
            playbookName = playbook->name;
        if (goal.empty())
            goal = playbook->goal;
    } else if (goal.empty()) {
        return fail(ErrorCode::InvalidArgument, "model '" + modelName + "' needs a goal: pass --goal TEXT");
    }

    auto decision = decideStart(request, goal, playbookName);
    if (!decision)
        return std::unexpected(decision.error());
    const std::string tier = decision->chosenTier;
    if (auto offered = m_pools.offeredTiers(); offered && !offered->contains(tier)) {
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
    const std::string agent = decision->agent;
    int64_t budget = request.budget_micros();
    if (budget == 0 && m_options.budgets)
        budget = m_options.budgets->budgetOf(agent).perSessionMicros;
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
    append.events.push_back({core::kind::SessionCreated, redactedJson(payload), 0});
    // The decision is the session's second event, committed with its creation.
    decision->id = engine::EnvironmentDecider::decisionId(append.sessionId, 2);
    append.events.push_back({core::kind::EnvDecision, redactedJson(decision->toJson()), 0});
    call.target = append.sessionId;
    append.writes.push_back(m_access.auditOf(call, playbookName.empty() ? "model " + modelName : "playbook " + playbookName));
    auto appended = m_store.appendSync(std::move(append));
    if (!appended)
        return std::unexpected(appended.error());
    return appended->state;
}

Result<std::vector<std::string>> BrokerService::checkGrants(const v1::SubmitSessionRequest &request) const
{
    std::vector<std::string> names;
    for (const auto &name : request.secrets()) {
        if (std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(name);
    }
    if (names.empty())
        return names;
    if (!m_options.secrets)
        return fail(ErrorCode::InvalidArgument, "this broker keeps no secrets, so it cannot grant " + joined(names)
                        + "; submit without --secret");
    const auto unknown = m_options.secrets->unknown(names);
    if (!unknown.empty()) {
        std::vector<std::string> held;
        for (const auto &info : m_options.secrets->list())
            held.push_back(info.name);
        return fail(ErrorCode::InvalidArgument,
                    std::string(unknown.size() == 1 ? "unknown secret " : "unknown secrets ") + joined(unknown)
                        + ": the broker holds " + joined(held) + ". Set it first with `paddockctl secrets set "
                        + unknown.front() + "` (the value is read from stdin), or submit without it");
    }
    return names;
}

std::string BrokerService::redactedJson(const nlohmann::json &payload) const
{
    std::string text = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (m_options.secrets)
        m_options.secrets->snapshot()->redactor.redactJsonText(text);
    return text;
}

Result<core::SessionState> BrokerService::changeStatus(const std::string &id, core::SessionStatus status,
                                                       const std::string &reason, const char *verb,
                                                       const std::function<bool(core::SessionStatus)> &allowed,
                                                       Access::Call &call)
{
    // Compare-and-append: if a step lands between our read and our append, read again and re-check,
    // so a session that has just ended is never "cancelled" after the fact.
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto state = getSession(id);
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
        append.events.push_back({core::kind::StateChanged, redactedJson(payload), 0});
        append.writes.push_back(m_access.auditOf(call, reason));
        auto appended = m_store.appendSync(std::move(append));
        if (appended)
            return appended->state;
        if (appended.error().code != ErrorCode::Aborted)
            return std::unexpected(appended.error());
    }
    return fail(ErrorCode::Aborted, std::string("could not ") + verb + " session " + id
                    + ": it kept changing under us; try again");
}

grpc::ServerUnaryReactor *BrokerService::SubmitSession(grpc::CallbackServerContext *context,
                                                       const v1::SubmitSessionRequest *request, v1::Session *response)
{
    auto call = m_access.authorize(context, "SubmitSession");
    if (!call)
        return finish(context, call);
    auto state = submit(*request, *call);
    if (state)
        toProto(*state, response);
    return finish(context, m_access.conclude(*call, statusOf(state)));
}

grpc::ServerUnaryReactor *BrokerService::GetSession(grpc::CallbackServerContext *context,
                                                    const v1::GetSessionRequest *request, v1::Session *response)
{
    if (auto call = m_access.authorize(context, "GetSession", request->id()); !call)
        return finish(context, call);
    auto state = getSession(request->id());
    if (state)
        toProto(*state, response);
    return finish(context, state);
}

grpc::ServerUnaryReactor *BrokerService::ListSessions(grpc::CallbackServerContext *context,
                                                      const v1::ListSessionsRequest *request,
                                                      v1::ListSessionsResponse *response)
{
    if (auto call = m_access.authorize(context, "ListSessions"); !call)
        return finish(context, call);
    auto query = toQuery(request->filter());
    if (!query)
        return finish(context, query);
    query->pageSize = request->page_size() > 0 ? std::min(request->page_size(), 1000) : 100;
    query->pageToken = request->page_token();
    auto page = m_store.listSessions(*query);
    if (page) {
        for (const auto &state : page->sessions)
            toProto(state, response->add_sessions());
        response->set_next_page_token(page->nextPageToken);
    }
    return finish(context, page);
}

grpc::ServerWriteReactor<v1::SessionChanges> *BrokerService::WatchSessions(grpc::CallbackServerContext *context,
                                                                           const v1::WatchSessionsRequest *request)
{
    if (auto call = m_access.authorize(context, "WatchSessions"); !call)
        return refusedStream<v1::SessionChanges>(toGrpcStatus(call.error()));
    return m_hub.watchSessions(*request);
}

grpc::ServerWriteReactor<v1::EventBatch> *BrokerService::StreamEvents(grpc::CallbackServerContext *context,
                                                                      const v1::StreamEventsRequest *request)
{
    using Refusal = Error;
    auto refuse = [](const Error &error) { return refusedStream<v1::EventBatch>(toGrpcStatus(error)); };
    if (auto call = m_access.authorize(context, "StreamEvents", request->session_id()); !call)
        return refuse(call.error());
    auto state = getSession(request->session_id());
    if (!state)
        return refuse(state.error());
    if (request->from_seq() < 0 || request->from_seq() > state->lastSeq + 1) {
        return refuse(Refusal{ErrorCode::OutOfRange,
                            "from_seq " + std::to_string(request->from_seq()) + " is past the end of session "
                                + state->id + ", which has " + std::to_string(state->lastSeq)
                                + " events: pass a seq from 1 to " + std::to_string(state->lastSeq + 1)});
    }
    return m_hub.streamEvents(*request, *state);
}

grpc::ServerUnaryReactor *BrokerService::sessionAction(grpc::CallbackServerContext *context, const char *method,
                                                       const v1::SessionActionRequest *request, v1::Session *response,
                                                       core::SessionStatus status, const std::string &defaultReason,
                                                       const std::function<bool(core::SessionStatus)> &allowed)
{
    auto call = m_access.authorize(context, method, request->id());
    if (!call)
        return finish(context, call);
    const std::string verb = method == std::string_view("CancelSession") ? "cancel"
        : method == std::string_view("PauseSession")                      ? "pause"
                                                                          : "resume";
    auto state = changeStatus(request->id(), status, request->reason().empty() ? defaultReason : request->reason(),
                              verb.c_str(), allowed, *call);
    if (state)
        toProto(*state, response);
    return finish(context, m_access.conclude(*call, statusOf(state)));
}

grpc::ServerUnaryReactor *BrokerService::CancelSession(grpc::CallbackServerContext *context,
                                                       const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "CancelSession", request, response, core::SessionStatus::Cancelled,
                         "cancelled by request", [](core::SessionStatus s) { return !core::isTerminal(s); });
}

grpc::ServerUnaryReactor *BrokerService::PauseSession(grpc::CallbackServerContext *context,
                                                      const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "PauseSession", request, response, core::SessionStatus::Paused, {},
                         [](core::SessionStatus s) {
                             return s == core::SessionStatus::Queued || s == core::SessionStatus::Running;
                         });
}

grpc::ServerUnaryReactor *BrokerService::ResumeSession(grpc::CallbackServerContext *context,
                                                       const v1::SessionActionRequest *request, v1::Session *response)
{
    return sessionAction(context, "ResumeSession", request, response, core::SessionStatus::Running, {},
                         [](core::SessionStatus s) { return s == core::SessionStatus::Paused; });
}

Result<policy::TierDecision> BrokerService::overrideTier(const v1::OverrideTierRequest &request, Access::Call &call)
{
    const std::string &who = call.caller.principal;
    const std::string &tier = request.tier();
    if (tier.empty())
        return fail(ErrorCode::InvalidArgument, "no tier given: `paddockctl pools` lists the tiers the pools offer");
    auto offered = m_pools.offeredTiers();
    if (!offered)
        return fail(ErrorCode::Unavailable, "no pool answers, so tier '" + tier + "' cannot be checked; try again "
                        "when `paddockctl pools` shows a healthy pool");
    if (!offered->contains(tier)) {
        std::vector<std::string> names(offered->begin(), offered->end());
        return fail(ErrorCode::InvalidArgument, "unknown tier '" + tier + "': the pools offer " + joined(names)
                        + ". Pick one of those, or add the tier to a pool's configuration");
    }
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto state = getSession(request.session_id());
        if (!state)
            return std::unexpected(state.error());
        if (core::isTerminal(state->status))
            return fail(ErrorCode::FailedPrecondition, "cannot move session " + state->id + " to tier '" + tier
                            + "': it is " + core::statusName(state->status) + " and takes no more steps");
        const nlohmann::json payload{{"chooser", "human"}, {"who", who}, {"reason", request.reason()},
                                     {"from", state->tier}, {"to", tier}};
        policy::TierDecision decision;
        if (m_options.decider) {
            // The agent may be gone since the session started; the decision is still a human's.
            auto agent = m_options.decider->agent(state->agent);
            const agents::Agent owner = agent ? *agent : agents::builtInDefaultAgent(m_options.defaultTier);
            const auto context = m_options.decider->context(owner, {state->agent, state->tags, state->goal,
                                                                    state->playbook});
            decision = policy::decideOverride(context, state->tier, tier, request.reason(), who);
        } else {
            decision = policy::decideOverride({}, state->tier, tier, request.reason(), who);
        }
        decision.agent = state->agent;
        decision.id = engine::EnvironmentDecider::decisionId(state->id, state->lastSeq + 2);
        store::AppendRequest append;
        append.sessionId = state->id;
        append.expectedLastSeq = state->lastSeq;
        append.events.push_back({core::kind::TierOverride, redactedJson(payload), 0});
        append.events.push_back({core::kind::EnvDecision, redactedJson(decision.toJson()), 0});
        append.writes.push_back(m_access.auditOf(call, "to tier " + tier));
        auto appended = m_store.appendSync(std::move(append));
        if (appended)
            return decision;
        if (appended.error().code != ErrorCode::Aborted)
            return std::unexpected(appended.error());
    }
    return fail(ErrorCode::Aborted, "could not move session " + request.session_id()
                    + ": it kept changing under us; try again");
}

grpc::ServerUnaryReactor *BrokerService::OverrideTier(grpc::CallbackServerContext *context,
                                                      const v1::OverrideTierRequest *request,
                                                      v1::EnvironmentDecision *response)
{
    auto call = m_access.authorize(context, "OverrideTier", request->session_id());
    if (!call)
        return finish(context, call);
    auto decided = overrideTier(*request, *call);
    if (decided) {
        toProto(*decided, response);
        response->set_session_id(request->session_id());
        response->set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch()).count());
    }
    return finish(context, m_access.conclude(*call, statusOf(decided)));
}

grpc::ServerUnaryReactor *BrokerService::ListPools(grpc::CallbackServerContext *context, const v1::ListPoolsRequest *,
                                                   v1::ListPoolsResponse *response)
{
    if (auto call = m_access.authorize(context, "ListPools"); !call)
        return finish(context, call);
    for (size_t i = 0; i < m_pools.entries().size(); ++i) {
        const auto &entry = m_pools.entries()[i];
        auto *info = response->add_pools();
        info->set_name(entry.client->name());
        info->set_endpoint(entry.client->endpoint());
        info->set_local(entry.local);
        info->set_execution(entry.local ? "local execution" : "remote");
        info->set_transport(entry.transport);
        info->set_token(entry.token);
        auto status = m_pools.statusOf(i);
        const pools::PoolHealth health = m_pools.health(i);
        info->set_healthy(status.has_value());
        info->set_checked_unix_ms(health.checkedUnixMs);
        info->set_unhealthy_since_unix_ms(health.unhealthySinceUnixMs);
        for (const auto &sample : health.history) {
            auto *out = info->add_history();
            out->set_time_unix_ms(sample.timeUnixMs);
            out->set_healthy(sample.healthy);
            out->set_latency_ms(sample.latencyMs);
            out->set_warm(sample.warm);
            out->set_claimed(sample.claimed);
            out->set_max(sample.max);
            out->set_error(sample.error);
        }
        if (!status) {
            info->set_error(status.error().message);
            continue;
        }
        info->set_disk_limits(status->diskLimits);
        info->set_cgroups(status->cgroupVersion);
        for (const auto &tier : status->tiers) {
            auto *out = info->add_tiers();
            out->mutable_tier()->set_name(tier.name);
            out->mutable_tier()->set_runtime(tier.runtime);
            out->set_warm(tier.warm);
            out->set_claimed(tier.claimed);
            out->set_max(tier.max);
            out->set_hit_rate(tier.hitRate);
            out->set_cold_fallbacks(tier.coldFallbacks);
            out->set_isolation_identity(tier.isolationIdentity);
            out->set_isolation_seccomp(tier.isolationSeccomp);
            out->set_isolation_etc(tier.isolationEtc);
            for (int64_t bound : tier.claimLatencyUsBuckets)
                out->add_claim_latency_us_buckets(bound);
            for (int64_t count : tier.claimLatencyCounts)
                out->add_claim_latency_counts(count);
            out->set_refill_per_second(tier.refillPerSecond);
            auto *spec = out->mutable_tier();
            spec->set_price_per_hour_usd(tier.pricePerHourUsd);
            spec->mutable_limits()->set_cpu(tier.cpu);
            spec->mutable_limits()->set_memory_bytes(tier.memoryBytes);
            spec->mutable_limits()->set_pids(tier.pids);
            spec->mutable_limits()->set_disk_bytes(tier.diskBytes);
            spec->set_network(tier.allowlistNetwork ? v1::NETWORK_POLICY_ALLOWLIST : v1::NETWORK_POLICY_NONE);
            for (const auto &pattern : tier.allowlist)
                spec->add_allowlist(pattern);
            spec->set_warm_count(tier.warmCount);
            spec->set_max_count(tier.maxCount);
        }
    }
    response->set_local_execution(m_pools.anyLocal());
    return finish(context, grpc::Status::OK);
}

namespace {

std::string noSecretStore()
{
    return "this broker keeps no secrets (it was started without a secret store); restart paddockd, which "
           "keeps them in secrets.toml next to its config file";
}

} // namespace

grpc::ServerUnaryReactor *BrokerService::SetSecret(grpc::CallbackServerContext *context,
                                                   const v1::SetSecretRequest *request, v1::SetSecretResponse *response)
{
    auto call = m_access.authorize(context, "SetSecret", request->name());
    if (!call)
        return finish(context, call);
    if (!m_options.secrets)
        return finish(context, m_access.conclude(*call, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()})));
    auto replaced = m_options.secrets->set(request->name(), request->value());
    if (replaced) {
        response->mutable_secret()->set_name(request->name());
        response->mutable_secret()->set_fingerprint(secrets::fingerprint(request->value()));
        response->set_replaced(*replaced);
    }
    return finish(context, m_access.conclude(*call, statusOf(replaced), replaced && *replaced ? "replaced" : ""));
}

grpc::ServerUnaryReactor *BrokerService::ListSecrets(grpc::CallbackServerContext *context,
                                                     const v1::ListSecretsRequest *, v1::ListSecretsResponse *response)
{
    if (auto call = m_access.authorize(context, "ListSecrets"); !call)
        return finish(context, call);
    if (!m_options.secrets)
        return finish(context, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()}));
    for (const auto &info : m_options.secrets->list()) {
        auto *out = response->add_secrets();
        out->set_name(info.name);
        out->set_fingerprint(info.fingerprint);
    }
    response->set_file(m_options.secrets->file().string());
    return finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::DeleteSecret(grpc::CallbackServerContext *context,
                                                      const v1::DeleteSecretRequest *request, v1::DeleteSecretResponse *)
{
    auto call = m_access.authorize(context, "DeleteSecret", request->name());
    if (!call)
        return finish(context, call);
    if (!m_options.secrets)
        return finish(context, m_access.conclude(*call, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()})));
    if (request->name().empty())
        return finish(context, m_access.conclude(*call, toGrpcStatus({ErrorCode::InvalidArgument,
                                                                      "no secret name given: `paddockctl secrets ls` lists them"})));
    auto removed = m_options.secrets->remove(request->name());
    return finish(context, m_access.conclude(*call, removed ? grpc::Status::OK : toGrpcStatus(removed.error())));
}

} // namespace paddock::server
