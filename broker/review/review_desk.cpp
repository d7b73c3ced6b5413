#include "broker/review/review_desk.h"

#include "common/clock.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace paddock::review {

namespace {

using nlohmann::json;

std::string dump(const json &j)
{
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string isoTime(int64_t unixMs)
{
    const std::time_t seconds = unixMs / 1000;
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char out[32];
    std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return out;
}

// "already approved by alice at 2026-11-30T18:00:00Z", "expired at ...".
std::string decidedAlready(const store::ReviewRow &row)
{
    if (row.state == "expired")
        return "review item " + row.id + " expired at " + isoTime(row.decidedUnixMs) + " without a decision";
    return "review item " + row.id + " is already " + row.state + " by " + row.decider + " at "
        + isoTime(row.decidedUnixMs) + "; a decision cannot be made twice";
}

} // namespace

ReviewDesk::ReviewDesk(store::EventStore &store, store::ReviewQueries &queries, ReviewPolicy policy)
    : m_store(store), m_queries(queries), m_policy(std::move(policy))
{
}

ReviewDesk::~ReviewDesk()
{
    stop();
}

void ReviewDesk::start(int64_t periodMs)
{
    {
        std::lock_guard lock(m_stopMutex);
        m_stopping = false;
    }
    m_expirer = std::thread([this, periodMs] { expiryLoop(periodMs); });
}

void ReviewDesk::stop()
{
    {
        std::lock_guard lock(m_stopMutex);
        m_stopping = true;
    }
    m_stopWake.notify_all();
    if (m_expirer.joinable())
        m_expirer.join();
}

void ReviewDesk::expiryLoop(int64_t periodMs)
{
    std::unique_lock lock(m_stopMutex);
    while (!m_stopping) {
        m_stopWake.wait_for(lock, std::chrono::milliseconds(periodMs));
        if (m_stopping)
            break;
        lock.unlock();
        expireDue(nowUnixMs());
        lock.lock();
    }
}

int ReviewDesk::expireDue(int64_t now)
{
    auto due = m_queries.duePending(now);
    if (!due) {
        spdlog::warn("review expiry: {}", due.error().message);
        return 0;
    }
    int expired = 0;
    for (const auto &row : *due) {
        store::AppendRequest append;
        append.sessionId = row.sessionId;
        append.fullSync = true;
        append.events.push_back({core::kind::ApprovalDecided,
                                 dump({{"review_id", row.id}, {"kind", row.kind}, {"approved", false},
                                       {"decider", ""}, {"reason", "expired"}, {"change_hash", row.changeHash}}),
                                 0});
        // No compare: an expiry is right whatever else the session did meanwhile; a decision that
        // landed first has already taken the item out of the pending ones the next read sees.
        auto latest = m_queries.get(row.id);
        if (!latest || latest->state != "pending")
            continue;
        if (auto appended = m_store.appendSync(std::move(append)); appended) {
            ++expired;
            spdlog::info("review item {} of session {} expired", row.id, row.sessionId);
        } else {
            spdlog::warn("review item {} not expired: {}", row.id, appended.error().message);
        }
    }
    return expired;
}

Result<store::ReviewPage> ReviewDesk::list(const store::ReviewListQuery &query)
{
    expireDue(nowUnixMs());   // on read, too: nobody sees an item as pending past its expiry
    return m_queries.list(query);
}

Result<store::ReviewRow> ReviewDesk::fetch(const std::string &id, const std::string &principal)
{
    if (id.empty())
        return fail(ErrorCode::InvalidArgument, "no review id given: `paddockctl reviews ls` lists the pending items");
    expireDue(nowUnixMs());
    auto row = m_queries.get(id);
    if (!row)
        return row;
    store::AppendRequest append;
    append.sessionId = row->sessionId;
    append.events.push_back({core::kind::ApprovalFetched,
                             dump({{"review_id", id}, {"principal", principal}, {"change_hash", row->changeHash}}), 0});
    if (auto appended = m_store.appendSync(std::move(append)); !appended)
        return fail(appended.error().code, "the fetch of review item " + id + " could not be recorded, so it would not "
                        "count for a high-risk approval: " + appended.error().message);
    return row;
}

Result<bool> ReviewDesk::fetchedBy(const std::string &id, const std::string &principal)
{
    return m_queries.fetched(id, principal);
}

Result<std::vector<store::ReviewRow>> ReviewDesk::decide(const DecideRequest &request)
{
    std::vector<std::string> ids;
    for (const auto &id : request.ids) {
        if (std::find(ids.begin(), ids.end(), id) == ids.end())
            ids.push_back(id);
    }
    if (ids.empty())
        return fail(ErrorCode::InvalidArgument, "no review ids given: `paddockctl reviews ls` lists the pending items");
    if (!request.approve && request.reason.empty())
        return fail(ErrorCode::InvalidArgument, "a rejection needs a reason: pass --reason TEXT");
    expireDue(nowUnixMs());
    // A session that moved between our checks and the append (a fetch, a cancel) refuses the
    // compare-and-append: check everything again against the new state.
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto decided = decideOnce(request, ids);
        if (decided || decided.error().code != ErrorCode::Aborted)
            return decided;
    }
    return fail(ErrorCode::Aborted, "the sessions of these review items kept changing; try again");
}

Result<std::vector<store::ReviewRow>> ReviewDesk::decideOnce(const DecideRequest &request, std::vector<std::string> &ids)
{
    std::vector<store::ReviewRow> rows;
    for (const auto &id : ids) {
        auto row = m_queries.get(id);
        if (!row)
            return fail(row.error().code, row.error().message + "; nothing was decided");
        rows.push_back(std::move(*row));
    }
    for (const auto &row : rows) {
        if (row.kind != rows.front().kind)
            return fail(ErrorCode::InvalidArgument, "review items " + rows.front().id + " (" + rows.front().kind + ") and "
                            + row.id + " (" + row.kind + ") are of different kinds: decide each kind on its own; "
                            "nothing was decided");
    }
    std::vector<store::AppendRequest> appends;
    for (const auto &row : rows) {
        if (row.state != "pending")
            return fail(ErrorCode::FailedPrecondition, decidedAlready(row) + "; nothing was decided");
        if (request.approve) {
            if (row.requester == request.decider)
                return fail(ErrorCode::PermissionDenied, request.decider + " requested review item " + row.id
                                + " (by submitting session " + row.sessionId + "), and nobody approves their own "
                                "request: ask another approver; nothing was decided");
            auto hash = request.changeHashes.find(row.id);
            if (hash == request.changeHashes.end() || hash->second.empty())
                return fail(ErrorCode::InvalidArgument, "the approval of review item " + row.id + " names no change_hash: "
                                "fetch the item (GetReviewItem, `paddockctl reviews show " + row.id
                                + "`) and approve the hash it shows; nothing was decided");
            if (hash->second != row.changeHash)
                return fail(ErrorCode::FailedPrecondition, "review item " + row.id + " has change_hash " + row.changeHash
                                + ", not " + hash->second + ": the change is not the one you saw; fetch it again "
                                "(`paddockctl reviews show " + row.id + "`); nothing was decided");
            if (row.risk == "high") {
                if (request.reason.empty())
                    return fail(ErrorCode::InvalidArgument, "review item " + row.id + " is high risk: its approval "
                                    "needs a reason (--reason TEXT); nothing was decided");
                auto fetched = m_queries.fetched(row.id, request.decider);
                if (!fetched)
                    return std::unexpected(fetched.error());
                if (!*fetched)
                    return fail(ErrorCode::FailedPrecondition, "review item " + row.id + " is high risk and "
                                    + request.decider + " has not fetched its full change: read it first "
                                    "(GetReviewItem, `paddockctl reviews show " + row.id + "`); nothing was decided");
            }
        }
        auto session = m_store.getSession(row.sessionId);
        if (!session)
            return std::unexpected(session.error());
        if (session->pendingReviewId != row.id) {
            // Decided meanwhile (by another approver, maybe on another broker): say by whom.
            if (auto now = m_queries.get(row.id); now && now->state != "pending")
                return fail(ErrorCode::FailedPrecondition, decidedAlready(*now) + "; nothing was decided");
            return fail(ErrorCode::FailedPrecondition, "session " + row.sessionId + " no longer waits for review item "
                            + row.id + " (it is " + core::statusName(session->status)
                            + "); the item can only expire; nothing was decided");
        }
        const json requested = json::parse(row.payload, nullptr, false);
        json decided{{"review_id", row.id}, {"kind", row.kind}, {"approved", request.approve},
                     {"decider", request.decider}, {"reason", request.reason}, {"change_hash", row.changeHash}};
        if (row.kind == kind::BudgetExtension) {
            decided["budget_increase_micros"] = requested.value("cost_micros", int64_t{0});
            if (requested.contains("payload") && requested["payload"].is_object())
                decided["scope"] = requested["payload"].value("scope", std::string("session"));
        }
        if (row.kind == kind::SecretAccess && requested.contains("payload") && requested["payload"].is_object())
            decided["secret"] = requested["payload"].value("secret", std::string());
        if (row.kind == kind::EgressException && requested.contains("payload") && requested["payload"].is_object())
            decided["host"] = requested["payload"].value("host", std::string());
        if (row.kind == kind::TierEscalation && requested.contains("payload") && requested["payload"].is_object())
            decided["tier"] = requested["payload"].value("tier", std::string());
        store::AppendRequest append;
        append.sessionId = row.sessionId;
        append.expectedLastSeq = session->lastSeq;
        append.fullSync = true;   // committed durably before the approver hears it is
        append.events.push_back({core::kind::ApprovalDecided, dump(decided), 0});
        appends.push_back(std::move(append));
    }
    if (!appends.empty())
        for (const auto &write : request.writes)   // copied: a refused compare-and-append tries again
            appends.front().writes.push_back(write);
    auto appended = m_store.appendAll(std::move(appends));
    if (!appended)
        return std::unexpected(appended.error());
    std::vector<store::ReviewRow> out;
    for (const auto &row : rows) {
        auto now = m_queries.get(row.id);
        out.push_back(now ? std::move(*now) : row);
    }
    return out;
}

Result<std::vector<ApproverStat>> ReviewDesk::approverStats()
{
    auto rows = m_queries.approvers();
    if (!rows)
        return std::unexpected(rows.error());
    std::vector<ApproverStat> out;
    for (auto &row : *rows) {
        ApproverStat stat;
        stat.principal = row.principal;
        stat.approved = row.approved;
        stat.rejected = row.rejected;
        stat.decided = row.approved + row.rejected;
        stat.approvalRate = stat.decided ? static_cast<double>(row.approved) / static_cast<double>(stat.decided) : 0;
        auto &ms = row.decideMs;
        std::sort(ms.begin(), ms.end());
        if (!ms.empty())
            stat.medianDecideMs = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
        out.push_back(std::move(stat));
    }
    return out;
}

} // namespace paddock::review
