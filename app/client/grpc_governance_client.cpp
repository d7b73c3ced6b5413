#include "app/client/grpc_governance_client.h"
#include "app/client/grpc_text.h"

#include "paddock/v1/governance.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <QLoggingCategory>
#include <QMetaObject>
#include <QPointer>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace paddock::console {
namespace {

Q_LOGGING_CATEGORY(lcGovernance, "paddock.console.governance")

constexpr int kDeadlineMs = 10'000;
constexpr int kShutdownWaitMs = 5'000;

// What a person reads when a governance call fails. what: "list the review queue".
CallError callError(const grpc::Status &status, const QString &what)
{
    if (status.ok())
        return CallError::none();
    const QString detail = qs(status.error_message());
    switch (status.error_code()) {
    case grpc::StatusCode::UNIMPLEMENTED:
        return {CallError::Code::Unsupported,
                QStringLiteral("this broker cannot %1 yet (it is older than this console): upgrade paddockd").arg(what)};
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
        return {CallError::Code::Denied, QStringLiteral("not allowed to %1: %2").arg(what, detail)};
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        return {CallError::Code::Unavailable,
                QStringLiteral("could not %1: the broker did not answer (%2); retrying when it is back").arg(what, detail)};
    default:
        return {CallError::Code::Refused, QStringLiteral("could not %1: %2").arg(what, detail)};
    }
}

const CallError kNotConnected{CallError::Code::Unavailable,
                              QStringLiteral("not connected to a broker: connect first (File > Connect)")};

ReviewItemInfo toReviewItem(const v1::ReviewItem &r)
{
    ReviewItemInfo item;
    item.id = qs(r.id());
    item.kind = qs(r.kind());
    item.sessionId = qs(r.session_id());
    item.agent = qs(r.agent());
    item.summary = qs(r.summary());
    item.change = qs(r.change());
    item.changeFormat = qs(r.change_format());
    item.changePreview = qs(r.change_preview());
    item.changeHash = qs(r.change_hash());
    item.impact = qs(r.impact());
    item.risk = qs(r.risk());
    item.justification = qs(r.justification());
    item.policyVerdict = qs(r.policy_verdict());
    item.requester = qs(r.requester());
    item.state = qs(r.state());
    item.decider = qs(r.decider());
    item.decisionReason = qs(r.decision_reason());
    item.createdUnixMs = r.created_unix_ms();
    item.decidedUnixMs = r.decided_unix_ms();
    item.expiresUnixMs = r.expires_unix_ms();
    item.costMicros = r.cost_micros();
    item.targetCount = r.target_count();
    item.fetchedByCaller = r.fetched_by_caller();
    item.seq = r.seq();
    return item;
}

DecisionInfo toDecision(const v1::EnvironmentDecision &e)
{
    DecisionInfo d;
    d.id = qs(e.id());
    d.sessionId = qs(e.session_id());
    d.agent = qs(e.agent());
    d.requestedTier = qs(e.requested_tier());
    d.chosenTier = qs(e.chosen_tier());
    d.chooser = qs(e.chooser());
    d.rule = qs(e.rule());
    d.reason = qs(e.reason());
    d.trigger = qs(e.trigger());
    d.who = qs(e.who());
    d.outcome = qs(e.outcome());
    d.fittingTier = qs(e.fitting_tier());
    for (const auto &a : e.alternatives())
        d.alternatives.append({qs(a.tier()), a.estimated_cost_micros(), qs(a.note())});
    d.timeUnixMs = e.time_unix_ms();
    d.outcomeUnixMs = e.outcome_unix_ms();
    d.peakMemoryBytes = e.peak_memory_bytes();
    d.memoryLimitBytes = e.memory_limit_bytes();
    d.meanCpuFraction = e.mean_cpu_fraction();
    d.throttledFraction = e.throttled_fraction();
    return d;
}

// Every call of this client is one of the GovernanceService's.
template <typename Request, typename Response>
using AsyncMethod = void (v1::GovernanceService::StubInterface::async_interface::*)(
    grpc::ClientContext *, const Request *, Response *, std::function<void(grpc::Status)>);

} // namespace

class GrpcGovernanceClient::Private {
public:
    // Guarded by mutex: the answers' way back to the GUI thread, and the calls still in flight.
    struct Shared {
        std::mutex mutex;
        std::condition_variable idle;
        GrpcGovernanceClient *client = nullptr;   // cleared when the client goes away
        int active = 0;
        std::vector<std::weak_ptr<grpc::ClientContext>> calls;

        // Runs answer on the GUI thread unless the client is gone by then.
        void post(std::function<void(GrpcGovernanceClient *)> answer)
        {
            std::lock_guard lock(mutex);
            if (!client)
                return;
            QPointer<GrpcGovernanceClient> target(client);
            QMetaObject::invokeMethod(
                client, [target, answer = std::move(answer)] {
                    if (target)
                        answer(target.data());
                },
                Qt::QueuedConnection);
        }
    };

    // One unary call with a deadline. done(status, response) runs on gRPC's thread.
    template <typename Request, typename Response, typename Done>
    bool unary(AsyncMethod<Request, Response> method, Request request, Done done)
    {
        const std::shared_ptr<grpc::Channel> current = channel ? channel() : nullptr;
        if (!current)
            return false;
        struct Call {
            grpc::ClientContext context;
            Request request;
            Response response;
            std::unique_ptr<v1::GovernanceService::Stub> stub;   // keeps the channel while in flight
        };
        auto call = std::make_shared<Call>();
        call->request = std::move(request);
        call->stub = v1::GovernanceService::NewStub(current);
        call->context.set_deadline(deadlineIn(kDeadlineMs));
        {
            std::lock_guard lock(shared->mutex);
            std::erase_if(shared->calls, [](const auto &weak) { return weak.expired(); });
            shared->calls.push_back(std::shared_ptr<grpc::ClientContext>(call, &call->context));
            ++shared->active;
        }
        auto state = shared;
        (call->stub->async()->*method)(&call->context, &call->request, &call->response,
                                       [call, state, done = std::move(done)](grpc::Status status) mutable {
                                           done(status, call->response);
                                           std::lock_guard lock(state->mutex);
                                           if (--state->active == 0)
                                               state->idle.notify_all();
                                       });
        return true;
    }

    std::function<std::shared_ptr<grpc::Channel>()> channel;
    std::shared_ptr<Shared> shared = std::make_shared<Shared>();
};

GrpcGovernanceClient::GrpcGovernanceClient(std::function<std::shared_ptr<grpc::Channel>()> channel, QObject *parent)
    : GovernanceClient(parent), d(std::make_unique<Private>())
{
    d->channel = std::move(channel);
    d->shared->client = this;
}

GrpcGovernanceClient::~GrpcGovernanceClient()
{
    std::unique_lock lock(d->shared->mutex);
    d->shared->client = nullptr;
    for (const auto &weak : d->shared->calls) {
        if (auto context = weak.lock())
            context->TryCancel();
    }
    if (!d->shared->idle.wait_for(lock, std::chrono::milliseconds(kShutdownWaitMs),
                                  [this] { return d->shared->active == 0; }))
        qCWarning(lcGovernance) << d->shared->active << "governance calls still running at shutdown";
}

void GrpcGovernanceClient::listReviewItems(const QString &state)
{
    v1::ListReviewItemsRequest request;
    request.set_state(ss(state));
    request.set_page_size(1000);
    auto shared = d->shared;
    const bool started = d->unary<v1::ListReviewItemsRequest, v1::ListReviewItemsResponse>(
        &v1::GovernanceService::StubInterface::async_interface::ListReviewItems, std::move(request),
        [shared](const grpc::Status &status, const v1::ListReviewItemsResponse &response) {
            QList<ReviewItemInfo> items;
            for (const auto &r : response.items())
                items.append(toReviewItem(r));
            const CallError error = callError(status, QStringLiteral("list the review queue"));
            shared->post([items, error](GrpcGovernanceClient *c) { emit c->reviewItemsListed(items, error); });
        });
    if (!started)
        d->shared->post([](GrpcGovernanceClient *c) { emit c->reviewItemsListed({}, kNotConnected); });
}

void GrpcGovernanceClient::getReviewItem(const QString &id)
{
    ReviewItemInfo asked;
    asked.id = id;
    v1::GetReviewItemRequest request;
    request.set_id(ss(id));
    auto shared = d->shared;
    const bool started = d->unary<v1::GetReviewItemRequest, v1::ReviewItem>(
        &v1::GovernanceService::StubInterface::async_interface::GetReviewItem, std::move(request),
        [shared, asked](const grpc::Status &status, const v1::ReviewItem &response) {
            const ReviewItemInfo item = status.ok() ? toReviewItem(response) : asked;
            const CallError error = callError(status, QStringLiteral("read review item %1").arg(asked.id));
            shared->post([item, error](GrpcGovernanceClient *c) { emit c->reviewItemArrived(item, error); });
        });
    if (!started)
        d->shared->post([asked](GrpcGovernanceClient *c) { emit c->reviewItemArrived(asked, kNotConnected); });
}

void GrpcGovernanceClient::decideReviewItems(const QStringList &ids, bool approve, const QString &reason,
                                             const QHash<QString, QString> &changeHashes)
{
    v1::DecideReviewItemsRequest request;
    for (const QString &id : ids)
        request.add_ids(ss(id));
    request.set_approve(approve);
    request.set_reason(ss(reason));
    for (auto it = changeHashes.cbegin(); it != changeHashes.cend(); ++it)
        (*request.mutable_change_hashes())[ss(it.key())] = ss(it.value());
    auto shared = d->shared;
    const QString what = approve ? QStringLiteral("approve %1").arg(ids.join(QStringLiteral(", ")))
                                 : QStringLiteral("reject %1").arg(ids.join(QStringLiteral(", ")));
    const bool started = d->unary<v1::DecideReviewItemsRequest, v1::DecideReviewItemsResponse>(
        &v1::GovernanceService::StubInterface::async_interface::DecideReviewItems, std::move(request),
        [shared, ids, approve, what](const grpc::Status &status, const v1::DecideReviewItemsResponse &response) {
            QList<ReviewItemInfo> items;
            for (const auto &r : response.items())
                items.append(toReviewItem(r));
            const CallError error = callError(status, what);
            shared->post([ids, approve, items, error](GrpcGovernanceClient *c) {
                emit c->reviewItemsDecided(ids, approve, items, error);
            });
        });
    if (!started)
        d->shared->post([ids, approve](GrpcGovernanceClient *c) { emit c->reviewItemsDecided(ids, approve, {}, kNotConnected); });
}

void GrpcGovernanceClient::getApproverStats()
{
    auto shared = d->shared;
    const bool started = d->unary<v1::GetApproverStatsRequest, v1::ApproverStats>(
        &v1::GovernanceService::StubInterface::async_interface::GetApproverStats, v1::GetApproverStatsRequest{},
        [shared](const grpc::Status &status, const v1::ApproverStats &response) {
            QList<ApproverStatInfo> stats;
            for (const auto &a : response.approvers())
                stats.append({qs(a.principal()), a.decided(), a.approved(), a.rejected(), a.approval_rate(),
                              a.median_decide_ms()});
            const CallError error = callError(status, QStringLiteral("read the approvers' stats"));
            shared->post([stats, error](GrpcGovernanceClient *c) { emit c->approverStatsArrived(stats, error); });
        });
    if (!started)
        d->shared->post([](GrpcGovernanceClient *c) { emit c->approverStatsArrived({}, kNotConnected); });
}

void GrpcGovernanceClient::listDecisions(const DecisionFilter &filter)
{
    v1::ListDecisionsRequest request;
    request.set_session_id(ss(filter.sessionId));
    request.set_agent(ss(filter.agent));
    request.set_chooser(ss(filter.chooser));
    request.set_tier(ss(filter.tier));
    request.set_outcome(ss(filter.outcome));
    request.set_page_size(filter.pageSize);
    auto shared = d->shared;
    const bool started = d->unary<v1::ListDecisionsRequest, v1::ListDecisionsResponse>(
        &v1::GovernanceService::StubInterface::async_interface::ListDecisions, std::move(request),
        [shared](const grpc::Status &status, const v1::ListDecisionsResponse &response) {
            QList<DecisionInfo> decisions;
            for (const auto &e : response.decisions())
                decisions.append(toDecision(e));
            const CallError error = callError(status, QStringLiteral("list environment decisions"));
            shared->post([decisions, error](GrpcGovernanceClient *c) { emit c->decisionsListed(decisions, error); });
        });
    if (!started)
        d->shared->post([](GrpcGovernanceClient *c) { emit c->decisionsListed({}, kNotConnected); });
}

void GrpcGovernanceClient::getDecisionStats(const QString &groupBy)
{
    v1::GetDecisionStatsRequest request;
    request.set_group_by(ss(groupBy));
    auto shared = d->shared;
    const bool started = d->unary<v1::GetDecisionStatsRequest, v1::DecisionStats>(
        &v1::GovernanceService::StubInterface::async_interface::GetDecisionStats, std::move(request),
        [shared, groupBy](const grpc::Status &status, const v1::DecisionStats &response) {
            QList<DecisionStatsLineInfo> lines;
            for (const auto &l : response.lines())
                lines.append({qs(l.key()), l.total(), l.pending(), l.ok(), l.oom(), l.timeout(), l.over_allocated(),
                              l.under_allocated()});
            const CallError error = callError(status, QStringLiteral("read decision stats"));
            shared->post([groupBy, lines, error](GrpcGovernanceClient *c) { emit c->decisionStatsArrived(groupBy, lines, error); });
        });
    if (!started)
        d->shared->post([groupBy](GrpcGovernanceClient *c) { emit c->decisionStatsArrived(groupBy, {}, kNotConnected); });
}

void GrpcGovernanceClient::overrideTier(const QString &sessionId, const QString &tier, const QString &reason)
{
    v1::OverrideTierRequest request;
    request.set_session_id(ss(sessionId));
    request.set_tier(ss(tier));
    request.set_reason(ss(reason));
    auto shared = d->shared;
    const bool started = d->unary<v1::OverrideTierRequest, v1::EnvironmentDecision>(
        &v1::GovernanceService::StubInterface::async_interface::OverrideTier, std::move(request),
        [shared, sessionId, tier](const grpc::Status &status, const v1::EnvironmentDecision &response) {
            const DecisionInfo decision = status.ok() ? toDecision(response) : DecisionInfo{};
            const CallError error =
                callError(status, QStringLiteral("move session %1 to tier %2").arg(sessionId, tier));
            shared->post([sessionId, decision, error](GrpcGovernanceClient *c) {
                emit c->tierOverridden(sessionId, decision, error);
            });
        });
    if (!started)
        d->shared->post([sessionId](GrpcGovernanceClient *c) { emit c->tierOverridden(sessionId, {}, kNotConnected); });
}

void GrpcGovernanceClient::getCostSummary(const CostQuery &query)
{
    v1::GetCostSummaryRequest request;
    request.set_group_by(ss(query.groupBy));
    request.set_from_unix_ms(query.fromUnixMs);
    request.set_to_unix_ms(query.toUnixMs);
    request.set_session_id(ss(query.sessionId));
    request.set_agent(ss(query.agent));
    request.set_bucket_ms(query.bucketMs);
    auto shared = d->shared;
    const bool started = d->unary<v1::GetCostSummaryRequest, v1::CostSummary>(
        &v1::GovernanceService::StubInterface::async_interface::GetCostSummary, std::move(request),
        [shared, query](const grpc::Status &status, const v1::CostSummary &response) {
            QList<CostLineInfo> lines;
            for (const auto &l : response.lines())
                lines.append({qs(l.key()), l.cost_micros(), l.bucket_start_unix_ms()});
            const qint64 total = response.total_micros();
            const CallError error = callError(status, QStringLiteral("sum costs"));
            shared->post([query, lines, total, error](GrpcGovernanceClient *c) {
                emit c->costSummaryArrived(query, lines, total, error);
            });
        });
    if (!started)
        d->shared->post([query](GrpcGovernanceClient *c) { emit c->costSummaryArrived(query, {}, 0, kNotConnected); });
}

void GrpcGovernanceClient::listBudgets()
{
    auto shared = d->shared;
    const bool started = d->unary<v1::ListBudgetsRequest, v1::ListBudgetsResponse>(
        &v1::GovernanceService::StubInterface::async_interface::ListBudgets, v1::ListBudgetsRequest{},
        [shared](const grpc::Status &status, const v1::ListBudgetsResponse &response) {
            QList<BudgetInfo> budgets;
            for (const auto &b : response.budgets())
                budgets.append({qs(b.agent()), b.per_day_micros(), b.spent_today_micros(), b.per_session_micros(),
                                b.burn_micros_per_hour(), b.paused_sessions()});
            const CallError error = callError(status, QStringLiteral("list budgets"));
            shared->post([budgets, error](GrpcGovernanceClient *c) { emit c->budgetsListed(budgets, error); });
        });
    if (!started)
        d->shared->post([](GrpcGovernanceClient *c) { emit c->budgetsListed({}, kNotConnected); });
}

} // namespace paddock::console
