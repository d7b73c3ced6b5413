// BrokerService's agent and environment-decision RPCs (docs/governance.md, "Agents and environment
// decisions"). The decisions at session start and at an override are in broker_service.cpp, next
// to the submit and override paths they belong to.

#include "broker/server/broker_service.h"

#include "broker/server/caller.h"
#include "broker/server/convert.h"

#include <algorithm>

namespace paddock::server {

namespace {

grpc::ServerUnaryReactor *answer(grpc::CallbackServerContext *context, const Status &status)
{
    auto *reactor = context->DefaultReactor();
    reactor->Finish(status ? grpc::Status::OK : toGrpcStatus(status.error()));
    return reactor;
}

template <typename T>
grpc::ServerUnaryReactor *answer(grpc::CallbackServerContext *context, const Result<T> &result)
{
    return answer(context, result ? Status{} : Status{std::unexpected(result.error())});
}

// A mutating call's answer, after its audit record (docs/permissions.md): written right after the
// change; a record that cannot be written turns an OK into INTERNAL saying so.
template <typename T>
grpc::ServerUnaryReactor *concluded(Access &access, grpc::CallbackServerContext *context, Access::Call &call,
                                    const Result<T> &result)
{
    auto *reactor = context->DefaultReactor();
    reactor->Finish(access.conclude(call, result ? grpc::Status::OK : toGrpcStatus(result.error())));
    return reactor;
}

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

Result<agents::Agent> BrokerService::agentFromProto(const v1::Agent &request) const
{
    if (!m_options.decider || !m_options.decider->agentStore())
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
    if (auto status = agents::validateAgent(agent, m_pools.offeredTiers()); !status)
        return std::unexpected(status.error());
    return agent;
}

grpc::ServerUnaryReactor *BrokerService::CreateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req,
                                                     v1::Agent *resp)
{
    auto call = m_access.authorize(ctx, "CreateAgent", req->name());
    if (!call)
        return answer(ctx, call);
    auto agent = agentFromProto(*req);   // FAILED_PRECONDITION without an agent store
    if (!agent)
        return concluded(m_access, ctx, *call, agent);
    store::AgentStore *store = m_options.decider->agentStore();
    if (agent->owner.empty())
        agent->owner = call->caller.principal;
    auto created = store->create(*agent);
    if (created)
        toProto(*created, resp);
    return concluded(m_access, ctx, *call, created);
}

grpc::ServerUnaryReactor *BrokerService::GetAgent(grpc::CallbackServerContext *ctx, const v1::GetAgentRequest *req,
                                                  v1::Agent *resp)
{
    if (auto call = m_access.authorize(ctx, "GetAgent", req->name()); !call)
        return answer(ctx, call);
    if (req->name().empty())
        return answer(ctx, Status{fail(ErrorCode::InvalidArgument, "no agent name given: `paddockctl agents ls` lists them")});
    if (req->name() == agents::kDefaultAgentName || !m_options.decider || !m_options.decider->agentStore()) {
        auto agent = m_options.decider ? m_options.decider->agent(req->name())
                                       : Result<agents::Agent>(agents::builtInDefaultAgent(m_options.defaultTier));
        if (agent && agent->name != req->name())
            agent = fail(ErrorCode::NotFound, "no agent '" + req->name() + "'");
        if (agent)
            toProto(*agent, resp);
        return answer(ctx, agent);
    }
    auto agent = m_options.decider->agentStore()->get(req->name());
    if (agent)
        toProto(*agent, resp);
    return answer(ctx, agent);
}

grpc::ServerUnaryReactor *BrokerService::ListAgents(grpc::CallbackServerContext *ctx, const v1::ListAgentsRequest *req,
                                                    v1::ListAgentsResponse *resp)
{
    if (auto call = m_access.authorize(ctx, "ListAgents"); !call)
        return answer(ctx, call);
    const int pageSize = req->page_size() > 0 ? std::min(req->page_size(), 1000) : 100;
    // The built-in agent comes first, on the first page.
    if (req->page_token().empty())
        toProto(agents::builtInDefaultAgent(m_options.defaultTier), resp->add_agents());
    store::AgentStore *store = m_options.decider ? m_options.decider->agentStore() : nullptr;
    if (!store)
        return answer(ctx, Status{});
    auto page = store->list(pageSize, req->page_token());
    if (page) {
        for (const auto &agent : page->agents)
            toProto(agent, resp->add_agents());
        resp->set_next_page_token(page->nextPageToken);
    }
    return answer(ctx, page);
}

grpc::ServerUnaryReactor *BrokerService::UpdateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req,
                                                     v1::Agent *resp)
{
    auto call = m_access.authorize(ctx, "UpdateAgent", req->name());
    if (!call)
        return answer(ctx, call);
    auto agent = agentFromProto(*req);   // FAILED_PRECONDITION without an agent store
    if (!agent)
        return concluded(m_access, ctx, *call, agent);
    store::AgentStore *store = m_options.decider->agentStore();
    if (agent->owner.empty()) {
        // Keep the owner when the caller left it out.
        if (auto existing = store->get(agent->name))
            agent->owner = existing->owner;
    }
    auto updated = store->update(*agent);
    if (updated)
        toProto(*updated, resp);
    return concluded(m_access, ctx, *call, updated);
}

grpc::ServerUnaryReactor *BrokerService::ListDecisions(grpc::CallbackServerContext *ctx,
                                                       const v1::ListDecisionsRequest *req,
                                                       v1::ListDecisionsResponse *resp)
{
    if (auto call = m_access.authorize(ctx, "ListDecisions", req->session_id()); !call)
        return answer(ctx, call);
    if (!m_options.decisions)
        return answer(ctx, noAgents());
    static const std::vector<std::string> outcomes{"pending", "ok", "oom", "timeout", "over_allocated",
                                                   "under_allocated", "refused", "needs_review"};
    if (!req->outcome().empty() && std::ranges::find(outcomes, req->outcome()) == outcomes.end())
        return answer(ctx, Status{fail(ErrorCode::InvalidArgument, "unknown outcome '" + req->outcome() + "': use pending, "
                                       "ok, oom, timeout, over_allocated, under_allocated, refused or needs_review")});
    static const std::vector<std::string> choosers{"default", "agent", "platform", "human"};
    if (!req->chooser().empty() && std::ranges::find(choosers, req->chooser()) == choosers.end())
        return answer(ctx, Status{fail(ErrorCode::InvalidArgument, "unknown chooser '" + req->chooser()
                                       + "': use default, agent, platform or human")});
    store::DecisionQuery query;
    query.sessionId = req->session_id();
    query.agent = req->agent();
    query.chooser = req->chooser();
    query.tier = req->tier();
    query.outcome = req->outcome();
    query.pageSize = req->page_size() > 0 ? std::min(req->page_size(), 1000) : 100;
    query.pageToken = req->page_token();
    auto page = m_options.decisions->list(query);
    if (page) {
        for (const auto &decision : page->decisions)
            toProto(decision, resp->add_decisions());
        resp->set_next_page_token(page->nextPageToken);
    }
    return answer(ctx, page);
}

grpc::ServerUnaryReactor *BrokerService::GetDecisionStats(grpc::CallbackServerContext *ctx,
                                                          const v1::GetDecisionStatsRequest *req, v1::DecisionStats *resp)
{
    if (auto call = m_access.authorize(ctx, "GetDecisionStats"); !call)
        return answer(ctx, call);
    if (!m_options.decisions)
        return answer(ctx, noAgents());
    auto lines = m_options.decisions->stats(req->group_by());
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
    return answer(ctx, lines);
}

} // namespace paddock::server
