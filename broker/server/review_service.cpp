// BrokerService: cost sums, budgets and the review queue (docs/governance.md, "Cost and budgets"
// and "Review queue"). The rules live in broker/review (ReviewDesk) and broker/cost; this file
// translates and names the caller.

#include "broker/server/broker_service.h"

#include "broker/cost/budget_source.h"
#include "broker/server/caller.h"
#include "broker/server/convert.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>

#include <set>

namespace paddock::server {

namespace {

constexpr size_t kChangePreviewBytes = 2048;

grpc::ServerUnaryReactor *reply(grpc::CallbackServerContext *context, const grpc::Status &status)
{
    auto *reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
}

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

grpc::ServerUnaryReactor *BrokerService::ListReviewItems(grpc::CallbackServerContext *ctx,
                                                         const v1::ListReviewItemsRequest *req,
                                                         v1::ListReviewItemsResponse *resp)
{
    if (auto call = m_access.authorize(ctx, "ListReviewItems"); !call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.reviews)
        return reply(ctx, notServing("a review queue"));
    const Caller caller = callerOf(ctx);
    store::ReviewListQuery query;
    query.state = req->state();
    query.kind = req->kind();
    query.sessionId = req->session_id();
    query.pageSize = req->page_size();
    query.pageToken = req->page_token();
    auto page = m_options.reviews->list(query);
    if (!page)
        return reply(ctx, toGrpcStatus(page.error()));
    for (const auto &row : page->items) {
        auto fetched = m_options.reviews->fetchedBy(row.id, caller.principal);
        toProto(row, /*withChange=*/false, fetched && *fetched, resp->add_items());
    }
    resp->set_next_page_token(page->nextPageToken);
    return reply(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::GetReviewItem(grpc::CallbackServerContext *ctx,
                                                       const v1::GetReviewItemRequest *req, v1::ReviewItem *resp)
{
    if (auto call = m_access.authorize(ctx, "GetReviewItem", req->id()); !call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.reviews)
        return reply(ctx, notServing("a review queue"));
    auto row = m_options.reviews->fetch(req->id(), callerOf(ctx).principal);
    if (!row)
        return reply(ctx, toGrpcStatus(row.error()));
    toProto(*row, /*withChange=*/true, /*fetchedByCaller=*/true, resp);
    return reply(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::DecideReviewItems(grpc::CallbackServerContext *ctx,
                                                           const v1::DecideReviewItemsRequest *req,
                                                           v1::DecideReviewItemsResponse *resp)
{
    std::string ids;
    for (const auto &id : req->ids())
        ids += (ids.empty() ? "" : ",") + id;
    auto call = m_access.authorize(ctx, "DecideReviewItems", ids);
    if (!call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.reviews)
        return reply(ctx, m_access.conclude(*call, notServing("a review queue")));
    review::DecideRequest decide;
    decide.ids.assign(req->ids().begin(), req->ids().end());
    decide.approve = req->approve();
    decide.reason = req->reason();
    for (const auto &[id, hash] : req->change_hashes())
        decide.changeHashes[id] = hash;
    decide.decider = call->caller.principal;
    // The audit record commits with the approval.decided events (synchronous=FULL): a decision
    // whose record cannot be written is not made.
    decide.writes.push_back(m_access.auditOf(*call, req->approve() ? "approved" : "rejected"));
    auto decided = m_options.reviews->decide(decide);
    if (!decided)
        return reply(ctx, m_access.conclude(*call, toGrpcStatus(decided.error())));
    for (const auto &row : *decided)
        toProto(row, /*withChange=*/false, /*fetchedByCaller=*/false, resp->add_items());
    return reply(ctx, m_access.conclude(*call, grpc::Status::OK, req->approve() ? "approved" : "rejected"));
}

grpc::ServerUnaryReactor *BrokerService::GetApproverStats(grpc::CallbackServerContext *ctx,
                                                          const v1::GetApproverStatsRequest *, v1::ApproverStats *resp)
{
    if (auto call = m_access.authorize(ctx, "GetApproverStats"); !call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.reviews)
        return reply(ctx, notServing("a review queue"));
    auto stats = m_options.reviews->approverStats();
    if (!stats)
        return reply(ctx, toGrpcStatus(stats.error()));
    for (const auto &stat : *stats) {
        auto *out = resp->add_approvers();
        out->set_principal(stat.principal);
        out->set_decided(stat.decided);
        out->set_approved(stat.approved);
        out->set_rejected(stat.rejected);
        out->set_approval_rate(stat.approvalRate);
        out->set_median_decide_ms(stat.medianDecideMs);
    }
    return reply(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::GetCostSummary(grpc::CallbackServerContext *ctx,
                                                        const v1::GetCostSummaryRequest *req, v1::CostSummary *resp)
{
    if (auto call = m_access.authorize(ctx, "GetCostSummary"); !call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.costs)
        return reply(ctx, notServing("a cost ledger"));
    if (req->from_unix_ms() < 0 || req->to_unix_ms() < 0
        || (req->to_unix_ms() > 0 && req->to_unix_ms() <= req->from_unix_ms()))
        return reply(ctx, toGrpcStatus({ErrorCode::InvalidArgument,
                                        "the time range is empty or negative: give from_unix_ms < to_unix_ms, or 0 "
                                        "for an open end"}));
    store::CostQuery query;
    query.groupBy = req->group_by();
    query.fromUnixMs = req->from_unix_ms();
    query.toUnixMs = req->to_unix_ms();
    query.sessionId = req->session_id();
    query.agent = req->agent();
    query.bucketMs = req->bucket_ms();
    auto sums = m_options.costs->sums(query);
    if (!sums)
        return reply(ctx, toGrpcStatus(sums.error()));
    for (const auto &line : sums->lines) {
        auto *out = resp->add_lines();
        out->set_key(line.key);
        out->set_cost_micros(line.costMicros);
        out->set_bucket_start_unix_ms(line.bucketStartUnixMs);
    }
    resp->set_total_micros(sums->totalMicros);
    return reply(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::ListBudgets(grpc::CallbackServerContext *ctx, const v1::ListBudgetsRequest *,
                                                     v1::ListBudgetsResponse *resp)
{
    if (auto call = m_access.authorize(ctx, "ListBudgets"); !call)
        return reply(ctx, toGrpcStatus(call.error()));
    if (!m_options.costs)
        return reply(ctx, notServing("a cost ledger"));
    const int64_t now = nowUnixMs();
    auto today = m_options.costs->spentByAgentSince(cost::utcDayStartMs(now));
    if (!today)
        return reply(ctx, toGrpcStatus(today.error()));
    auto lastHour = m_options.costs->spentByAgentSince(now - 3'600'000);
    if (!lastHour)
        return reply(ctx, toGrpcStatus(lastHour.error()));
    std::map<std::string, int64_t> paused;
    if (m_options.reviews) {
        store::ReviewListQuery query;
        query.kind = "budget_extension";
        query.pageSize = 1000;
        if (auto page = m_options.reviews->list(query)) {
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
        const cost::AgentBudget budget = m_options.budgets ? m_options.budgets->budgetOf(agent) : cost::AgentBudget{};
        out->set_agent(agent);
        out->set_per_day_micros(budget.perDayMicros);
        out->set_per_session_micros(budget.perSessionMicros);
        out->set_spent_today_micros(today->count(agent) ? today->at(agent) : 0);
        out->set_burn_micros_per_hour(lastHour->count(agent) ? lastHour->at(agent) : 0);
        out->set_paused_sessions(static_cast<int32_t>(paused.count(agent) ? paused.at(agent) : 0));
    }
    return reply(ctx, grpc::Status::OK);
}

} // namespace paddock::server
