// GovernanceService (proto/paddock/v1/governance.proto; docs/governance.md): agents, environment
// decisions and a human's tier override, the review queue, cost sums and budgets. The rules live in
// broker/agents, broker/policy, broker/review (ReviewDesk) and broker/cost; this file translates,
// checks and names the caller. The decision at session start is in session_service.cpp, next to
// the submit path it belongs to.

#include "broker/server/governance_service.h"

#include "broker/cost/budget_source.h"
#include "broker/server/caller.h"
#include "broker/server/convert.h"
#include "common/clock.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace paddock::server {

namespace {

void toProto(const agents::Agent &agent, v1::Agent *out)
{
    out->set_name(agent.name);
    out->set_owner(agent.owner);
    out->set_default_tier(agent.defaultTier);
    for (const auto &tier : agent.allowedTiers)
        out->add_allowed_tiers(tier);
    switch (agent.selectionMode) {
    case agents::SelectionMode::Default: out->set_selection_mode(v1::SELECTION_MODE_DEFAULT); break;
    case agents::SelectionMode::Agent: out->set_selection_mode(v1::SELECTION_MODE_AGENT); break;
    case agents::SelectionMode::Platform: out->set_selection_mode(v1::SELECTION_MODE_PLATFORM); break;
    case agents::SelectionMode::Human: out->set_selection_mode(v1::SELECTION_MODE_HUMAN); break;
    case agents::SelectionMode::Hybrid: out->set_selection_mode(v1::SELECTION_MODE_HYBRID); break;
    }
    out->set_budget_per_session_micros(agent.budgetPerSessionMicros);
    out->set_budget_per_day_micros(agent.budgetPerDayMicros);
    for (const auto &[key, json] : agent.records)
        (*out->mutable_records_json())[key] = json;
    out->set_created_unix_ms(agent.createdUnixMs);
    out->set_updated_unix_ms(agent.updatedUnixMs);
}

Status noAgents()
{
    return fail(ErrorCode::FailedPrecondition, "this broker keeps no agents (it was started without its database); "
                                               "restart paddockd");
}

} // namespace

Result<agents::Agent> GovernanceService::agentFromProto(const v1::Agent &request) const
{
    if (!m_context.options.decider || !m_context.options.decider->agentStore())
        return std::unexpected(noAgents().error());
    agents::Agent agent;
    agent.name = request.name();
    agent.owner = request.owner();
    agent.defaultTier = request.default_tier();
    agent.allowedTiers.assign(request.allowed_tiers().begin(), request.allowed_tiers().end());
    switch (request.selection_mode()) {
    case v1::SELECTION_MODE_UNSPECIFIED:
    case v1::SELECTION_MODE_DEFAULT: agent.selectionMode = agents::SelectionMode::Default; break;
    case v1::SELECTION_MODE_AGENT: agent.selectionMode = agents::SelectionMode::Agent; break;
    case v1::SELECTION_MODE_PLATFORM: agent.selectionMode = agents::SelectionMode::Platform; break;
    case v1::SELECTION_MODE_HUMAN: agent.selectionMode = agents::SelectionMode::Human; break;
    case v1::SELECTION_MODE_HYBRID: agent.selectionMode = agents::SelectionMode::Hybrid; break;
    default:
        return fail(ErrorCode::InvalidArgument, "unknown selection mode " + std::to_string(request.selection_mode())
                        + ": use default, agent, platform, human or hybrid");
    }
    agent.budgetPerSessionMicros = request.budget_per_session_micros();
    agent.budgetPerDayMicros = request.budget_per_day_micros();
    for (const auto &[key, json] : request.records_json())
        agent.records[key] = json;
    if (auto status = agents::validateAgent(agent, m_context.pools.offeredTiers()); !status)
        return std::unexpected(status.error());
    return agent;
}

grpc::ServerUnaryReactor *GovernanceService::CreateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req,
                                                     v1::Agent *resp)
{
    auto call = m_context.access.authorize(ctx, "CreateAgent", req->name());
    if (!call)
        return finish(ctx, call);
    auto agent = agentFromProto(*req);   // FAILED_PRECONDITION without an agent store
    if (!agent)
        return finish(ctx, m_context.access.conclude(*call, statusOf(agent)));
    store::AgentStore *store = m_context.options.decider->agentStore();
    if (agent->owner.empty())
        agent->owner = call->caller.principal;
    auto created = store->create(*agent);
    if (created)
        toProto(*created, resp);
    return finish(ctx, m_context.access.conclude(*call, statusOf(created)));
}

grpc::ServerUnaryReactor *GovernanceService::GetAgent(grpc::CallbackServerContext *ctx, const v1::GetAgentRequest *req,
                                                  v1::Agent *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetAgent", req->name()); !call)
        return finish(ctx, call);
    if (req->name().empty())
        return finish(ctx, Status{fail(ErrorCode::InvalidArgument, "no agent name given: `paddockctl agents ls` lists them")});
    if (req->name() == agents::kDefaultAgentName || !m_context.options.decider || !m_context.options.decider->agentStore()) {
        auto agent = m_context.options.decider ? m_context.options.decider->agent(req->name())
                                       : Result<agents::Agent>(agents::builtInDefaultAgent(m_context.options.defaultTier));
        if (agent && agent->name != req->name())
            agent = fail(ErrorCode::NotFound, "no agent '" + req->name() + "'");
        if (agent)
            toProto(*agent, resp);
        return finish(ctx, agent);
    }
    auto agent = m_context.options.decider->agentStore()->get(req->name());
    if (agent)
        toProto(*agent, resp);
    return finish(ctx, agent);
}

grpc::ServerUnaryReactor *GovernanceService::ListAgents(grpc::CallbackServerContext *ctx, const v1::ListAgentsRequest *req,
                                                    v1::ListAgentsResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListAgents"); !call)
        return finish(ctx, call);
    const int pageSize = req->page_size() > 0 ? std::min(req->page_size(), 1000) : 100;
    // The built-in agent comes first, on the first page.
    if (req->page_token().empty())
        toProto(agents::builtInDefaultAgent(m_context.options.defaultTier), resp->add_agents());
    store::AgentStore *store = m_context.options.decider ? m_context.options.decider->agentStore() : nullptr;
    if (!store)
        return finish(ctx, Status{});
    auto page = store->list(pageSize, req->page_token());
    if (page) {
        for (const auto &agent : page->agents)
            toProto(agent, resp->add_agents());
        resp->set_next_page_token(page->nextPageToken);
    }
    return finish(ctx, page);
}

grpc::ServerUnaryReactor *GovernanceService::UpdateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req,
                                                     v1::Agent *resp)
{
    auto call = m_context.access.authorize(ctx, "UpdateAgent", req->name());
    if (!call)
        return finish(ctx, call);
    auto agent = agentFromProto(*req);   // FAILED_PRECONDITION without an agent store
    if (!agent)
        return finish(ctx, m_context.access.conclude(*call, statusOf(agent)));
    store::AgentStore *store = m_context.options.decider->agentStore();
    if (agent->owner.empty()) {
        // Keep the owner when the caller left it out.
        if (auto existing = store->get(agent->name))
            agent->owner = existing->owner;
    }
    auto updated = store->update(*agent);
    if (updated)
        toProto(*updated, resp);
    return finish(ctx, m_context.access.conclude(*call, statusOf(updated)));
}

grpc::ServerUnaryReactor *GovernanceService::ListDecisions(grpc::CallbackServerContext *ctx,
                                                       const v1::ListDecisionsRequest *req,
                                                       v1::ListDecisionsResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListDecisions", req->session_id()); !call)
        return finish(ctx, call);
    if (!m_context.options.decisions)
        return finish(ctx, noAgents());
    static const std::vector<std::string> outcomes{"pending", "ok", "oom", "timeout", "over_allocated",
                                                   "under_allocated", "refused", "needs_review"};
    if (!req->outcome().empty() && std::ranges::find(outcomes, req->outcome()) == outcomes.end())
        return finish(ctx, Status{fail(ErrorCode::InvalidArgument, "unknown outcome '" + req->outcome() + "': use pending, "
                                       "ok, oom, timeout, over_allocated, under_allocated, refused or needs_review")});
    static const std::vector<std::string> choosers{"default", "agent", "platform", "human"};
    if (!req->chooser().empty() && std::ranges::find(choosers, req->chooser()) == choosers.end())
        return finish(ctx, Status{fail(ErrorCode::InvalidArgument, "unknown chooser '" + req->chooser()
                                       + "': use default, agent, platform or human")});
    store::DecisionQuery query;
    query.sessionId = req->session_id();
    query.agent = req->agent();
    query.chooser = req->chooser();
    query.tier = req->tier();
    query.outcome = req->outcome();
    query.pageSize = req->page_size() > 0 ? std::min(req->page_size(), 1000) : 100;
    query.pageToken = req->page_token();
    auto page = m_context.options.decisions->list(query);
    if (page) {
        for (const auto &decision : page->decisions)
            toProto(decision, resp->add_decisions());
        resp->set_next_page_token(page->nextPageToken);
    }
    return finish(ctx, page);
}

grpc::ServerUnaryReactor *GovernanceService::GetDecisionStats(grpc::CallbackServerContext *ctx,
                                                          const v1::GetDecisionStatsRequest *req, v1::DecisionStats *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetDecisionStats"); !call)
        return finish(ctx, call);
    if (!m_context.options.decisions)
        return finish(ctx, noAgents());
    auto lines = m_context.options.decisions->stats(req->group_by());
    if (lines) {
        for (const auto &line : *lines) {
            auto *out = resp->add_lines();
            out->set_key(line.key);
            out->set_total(line.total);
            out->set_pending(line.pending);
            out->set_ok(line.ok);
            out->set_oom(line.oom);
            out->set_timeout(line.timeout);
            out->set_over_allocated(line.overAllocated);
            out->set_under_allocated(line.underAllocated);
        }
    }
    return finish(ctx, lines);
}


// ---- Cost and the review queue ----


namespace {

constexpr size_t kChangePreviewBytes = 2048;

grpc::Status notServing(const char *what)
{
    return toGrpcStatus({ErrorCode::Unavailable, std::string("this broker does not keep ") + what
                                                     + " (it was started without them); restart paddockd"});
}

// Cuts at a UTF-8 boundary, so the preview stays valid for protobuf's string field.
std::string preview(const std::string &change)
{
    if (change.size() <= kChangePreviewBytes)
        return change;
    size_t end = kChangePreviewBytes;
    while (end > 0 && (static_cast<unsigned char>(change[end]) & 0xC0) == 0x80)
        --end;
    return change.substr(0, end);
}

void toProto(const store::ReviewRow &row, bool withChange, bool fetchedByCaller, v1::ReviewItem *out)
{
    const auto payload = nlohmann::json::parse(row.payload, nullptr, false);
    auto text = [&](const char *key) {
        return payload.is_object() && payload.contains(key) && payload[key].is_string() ? payload[key].get<std::string>()
                                                                                        : std::string();
    };
    auto integer = [&](const char *key) {
        return payload.is_object() && payload.contains(key) && payload[key].is_number_integer()
            ? payload[key].get<int64_t>() : int64_t{0};
    };
    out->set_id(row.id);
    out->set_kind(row.kind);
    out->set_session_id(row.sessionId);
    out->set_summary(text("summary"));
    const std::string change = text("change");
    if (withChange)
        out->set_change(change);
    out->set_change_preview(preview(change));
    out->set_impact(text("impact"));
    out->set_risk(row.risk);
    out->set_justification(text("justification"));
    out->set_policy_verdict(text("policy_verdict"));
    out->set_requester(row.requester);
    out->set_state(row.state);
    out->set_decider(row.decider);
    out->set_decision_reason(row.decisionReason);
    out->set_created_unix_ms(row.createdUnixMs);
    out->set_decided_unix_ms(row.decidedUnixMs);
    out->set_agent(row.agent);
    out->set_cost_micros(integer("cost_micros"));
    out->set_change_hash(row.changeHash);
    out->set_expires_unix_ms(row.expiresUnixMs);
    out->set_target_count(static_cast<int32_t>(integer("target_count")));
    out->set_change_format(text("change_format"));
    out->set_fetched_by_caller(fetchedByCaller);
    out->set_seq(row.seq);
}

} // namespace

grpc::ServerUnaryReactor *GovernanceService::ListReviewItems(grpc::CallbackServerContext *ctx,
                                                         const v1::ListReviewItemsRequest *req,
                                                         v1::ListReviewItemsResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListReviewItems"); !call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.reviews)
        return finish(ctx, notServing("a review queue"));
    const Caller caller = callerOf(ctx);
    store::ReviewListQuery query;
    query.state = req->state();
    query.kind = req->kind();
    query.sessionId = req->session_id();
    query.pageSize = req->page_size();
    query.pageToken = req->page_token();
    auto page = m_context.options.reviews->list(query);
    if (!page)
        return finish(ctx, toGrpcStatus(page.error()));
    for (const auto &row : page->items) {
        auto fetched = m_context.options.reviews->fetchedBy(row.id, caller.principal);
        toProto(row, /*withChange=*/false, fetched && *fetched, resp->add_items());
    }
    resp->set_next_page_token(page->nextPageToken);
    return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *GovernanceService::GetReviewItem(grpc::CallbackServerContext *ctx,
                                                       const v1::GetReviewItemRequest *req, v1::ReviewItem *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetReviewItem", req->id()); !call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.reviews)
        return finish(ctx, notServing("a review queue"));
    auto row = m_context.options.reviews->fetch(req->id(), callerOf(ctx).principal);
    if (!row)
        return finish(ctx, toGrpcStatus(row.error()));
    toProto(*row, /*withChange=*/true, /*fetchedByCaller=*/true, resp);
    return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *GovernanceService::DecideReviewItems(grpc::CallbackServerContext *ctx,
                                                           const v1::DecideReviewItemsRequest *req,
                                                           v1::DecideReviewItemsResponse *resp)
{
    std::string ids;
    for (const auto &id : req->ids())
        ids += (ids.empty() ? "" : ",") + id;
    auto call = m_context.access.authorize(ctx, "DecideReviewItems", ids);
    if (!call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.reviews)
        return finish(ctx, m_context.access.conclude(*call, notServing("a review queue")));
    review::DecideRequest decide;
    decide.ids.assign(req->ids().begin(), req->ids().end());
    decide.approve = req->approve();
    decide.reason = req->reason();
    for (const auto &[id, hash] : req->change_hashes())
        decide.changeHashes[id] = hash;
    decide.decider = call->caller.principal;
    // The audit record commits with the approval.decided events (synchronous=FULL): a decision
    // whose record cannot be written is not made.
    decide.writes.push_back(m_context.access.auditOf(*call, req->approve() ? "approved" : "rejected"));
    auto decided = m_context.options.reviews->decide(decide);
    if (!decided)
        return finish(ctx, m_context.access.conclude(*call, toGrpcStatus(decided.error())));
    for (const auto &row : *decided)
        toProto(row, /*withChange=*/false, /*fetchedByCaller=*/false, resp->add_items());
    return finish(ctx, m_context.access.conclude(*call, grpc::Status::OK, req->approve() ? "approved" : "rejected"));
}

grpc::ServerUnaryReactor *GovernanceService::GetApproverStats(grpc::CallbackServerContext *ctx,
                                                          const v1::GetApproverStatsRequest *, v1::ApproverStats *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetApproverStats"); !call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.reviews)
        return finish(ctx, notServing("a review queue"));
    auto stats = m_context.options.reviews->approverStats();
    if (!stats)
        return finish(ctx, toGrpcStatus(stats.error()));
    for (const auto &stat : *stats) {
        auto *out = resp->add_approvers();
        out->set_principal(stat.principal);
        out->set_decided(stat.decided);
        out->set_approved(stat.approved);
        out->set_rejected(stat.rejected);
        out->set_approval_rate(stat.approvalRate);
        out->set_median_decide_ms(stat.medianDecideMs);
    }
    return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *GovernanceService::GetCostSummary(grpc::CallbackServerContext *ctx,
                                                        const v1::GetCostSummaryRequest *req, v1::CostSummary *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetCostSummary"); !call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.costs)
        return finish(ctx, notServing("a cost ledger"));
    if (req->from_unix_ms() < 0 || req->to_unix_ms() < 0
        || (req->to_unix_ms() > 0 && req->to_unix_ms() <= req->from_unix_ms()))
        return finish(ctx, toGrpcStatus({ErrorCode::InvalidArgument,
                                        "the time range is empty or negative: give from_unix_ms < to_unix_ms, or 0 "
                                        "for an open end"}));
    store::CostQuery query;
    query.groupBy = req->group_by();
    query.fromUnixMs = req->from_unix_ms();
    query.toUnixMs = req->to_unix_ms();
    query.sessionId = req->session_id();
    query.agent = req->agent();
    query.bucketMs = req->bucket_ms();
    auto sums = m_context.options.costs->sums(query);
    if (!sums)
        return finish(ctx, toGrpcStatus(sums.error()));
    for (const auto &line : sums->lines) {
        auto *out = resp->add_lines();
        out->set_key(line.key);
        out->set_cost_micros(line.costMicros);
        out->set_bucket_start_unix_ms(line.bucketStartUnixMs);
    }
    resp->set_total_micros(sums->totalMicros);
    return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *GovernanceService::ListBudgets(grpc::CallbackServerContext *ctx, const v1::ListBudgetsRequest *,
                                                     v1::ListBudgetsResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListBudgets"); !call)
        return finish(ctx, toGrpcStatus(call.error()));
    if (!m_context.options.costs)
        return finish(ctx, notServing("a cost ledger"));
    const int64_t now = nowUnixMs();
    auto today = m_context.options.costs->spentByAgentSince(cost::utcDayStartMs(now));
    if (!today)
        return finish(ctx, toGrpcStatus(today.error()));
    auto lastHour = m_context.options.costs->spentByAgentSince(now - 3'600'000);
    if (!lastHour)
        return finish(ctx, toGrpcStatus(lastHour.error()));
    std::map<std::string, int64_t> paused;
    if (m_context.options.reviews) {
        store::ReviewListQuery query;
        query.kind = "budget_extension";
        query.pageSize = 1000;
        if (auto page = m_context.options.reviews->list(query)) {
            for (const auto &row : page->items)
                ++paused[row.agent];
        }
    }
    std::set<std::string> agents;
    for (const auto &[agent, spent] : *today)
        agents.insert(agent);
    for (const auto &[agent, count] : paused)
        agents.insert(agent);
    for (const auto &agent : agents) {
        auto *out = resp->add_budgets();
        const cost::AgentBudget budget = m_context.options.budgets ? m_context.options.budgets->budgetOf(agent) : cost::AgentBudget{};
        out->set_agent(agent);
        out->set_per_day_micros(budget.perDayMicros);
        out->set_per_session_micros(budget.perSessionMicros);
        out->set_spent_today_micros(today->count(agent) ? today->at(agent) : 0);
        out->set_burn_micros_per_hour(lastHour->count(agent) ? lastHour->at(agent) : 0);
        out->set_paused_sessions(static_cast<int32_t>(paused.count(agent) ? paused.at(agent) : 0));
    }
    return finish(ctx, grpc::Status::OK);
}


// ---- A human's tier override ----

Result<policy::TierDecision> GovernanceService::overrideTier(const v1::OverrideTierRequest &request, Access::Call &call)
{
    const std::string &who = call.caller.principal;
    const std::string &tier = request.tier();
    if (tier.empty())
        return fail(ErrorCode::InvalidArgument, "no tier given: `paddockctl pools` lists the tiers the pools offer");
    auto offered = m_context.pools.offeredTiers();
    if (!offered)
        return fail(ErrorCode::Unavailable, "no pool answers, so tier '" + tier + "' cannot be checked; try again "
                        "when `paddockctl pools` shows a healthy pool");
    if (!offered->contains(tier)) {
        std::vector<std::string> names(offered->begin(), offered->end());
        return fail(ErrorCode::InvalidArgument, "unknown tier '" + tier + "': the pools offer " + joined(names)
                        + ". Pick one of those, or add the tier to a pool's configuration");
    }
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto state = m_context.getSession(request.session_id());
        if (!state)
            return std::unexpected(state.error());
        if (core::isTerminal(state->status))
            return fail(ErrorCode::FailedPrecondition, "cannot move session " + state->id + " to tier '" + tier
                            + "': it is " + core::statusName(state->status) + " and takes no more steps");
        const nlohmann::json payload{{"chooser", "human"}, {"who", who}, {"reason", request.reason()},
                                     {"from", state->tier}, {"to", tier}};
        policy::TierDecision decision;
        if (m_context.options.decider) {
            // The agent may be gone since the session started; the decision is still a human's.
            auto agent = m_context.options.decider->agent(state->agent);
            const agents::Agent owner = agent ? *agent : agents::builtInDefaultAgent(m_context.options.defaultTier);
            const auto context = m_context.options.decider->context(owner, {state->agent, state->tags, state->goal,
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
        append.events.push_back({core::kind::TierOverride, m_context.redactedJson(payload), 0});
        append.events.push_back({core::kind::EnvDecision, m_context.redactedJson(decision.toJson()), 0});
        append.writes.push_back(m_context.access.auditOf(call, "to tier " + tier));
        auto appended = m_context.store.appendSync(std::move(append));
        if (appended)
            return decision;
        if (appended.error().code != ErrorCode::Aborted)
            return std::unexpected(appended.error());
    }
    return fail(ErrorCode::Aborted, "could not move session " + request.session_id()
                    + ": it kept changing under us; try again");
}

grpc::ServerUnaryReactor *GovernanceService::OverrideTier(grpc::CallbackServerContext *context,
                                                      const v1::OverrideTierRequest *request,
                                                      v1::EnvironmentDecision *response)
{
    auto call = m_context.access.authorize(context, "OverrideTier", request->session_id());
    if (!call)
        return finish(context, call);
    auto decided = overrideTier(*request, *call);
    if (decided) {
        toProto(*decided, response);
        response->set_session_id(request->session_id());
        response->set_time_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch()).count());
    }
    return finish(context, m_context.access.conclude(*call, statusOf(decided)));
}

} // namespace paddock::server
