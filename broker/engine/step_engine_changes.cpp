// StepEngine's propose_change: a change applied at once within policy, or a review opened for it;
// once the review is decided, the approved change applied or the rejection recorded as the tool's
// result. Diffs are applied by `patch` inside the sandbox, records through EngineOptions::writeRecords.
//
// Threads: the step workers run these for the session they hold the lease on; a diff parks the
// step on each of its pool calls (the file, `patch`, the checkpoint after it).

#include "broker/engine/step_engine_internal.h"

#include "broker/review/open_review.h"
#include "common/address_policy.h"

#include <algorithm>
#include <expected>

namespace paddock::engine {

namespace {

using nlohmann::json;

// "+40 -3" of a unified diff.
std::string diffStat(const std::string &diff)
{
    int added = 0, removed = 0;
    size_t start = 0;
    while (start < diff.size()) {
        size_t end = diff.find('\n', start);
        if (end == std::string::npos)
            end = diff.size();
        const std::string_view line(diff.data() + start, end - start);
        if (line.starts_with("+") && !line.starts_with("+++"))
            ++added;
        else if (line.starts_with("-") && !line.starts_with("---"))
            ++removed;
        start = end + 1;
    }
    return "+" + std::to_string(added) + " -" + std::to_string(removed);
}

} // namespace

std::optional<Status> StepEngine::applyChange(const Action &action, pool_client::PoolClient *pool, const json &args,
                                              json &result)
{
    const std::string kind = args.value("kind", std::string(review::kind::BulkChange));
    const std::string change = args.value("change", std::string());
    const json targets = args.value("targets", json::array());
    if (kind == review::kind::EgressException) {
        // The approval.decided before this step put the host in the session's approved hosts: every
        // later command carries it. What is left is to say what that means on the session's tier.
        const std::string host = targets.empty() ? std::string() : targets.front().get<std::string>();
        const std::string reviewId = action.decision.value("review_id", std::string());
        result["host"] = host;
        const auto tiers = m_pools.tierCatalogue();
        std::vector<std::string> withNetwork;
        for (const auto &t : tiers)
            if (t.allowlistNetwork)
                withNetwork.push_back(t.name);
        const auto tier = std::find_if(tiers.begin(), tiers.end(), [&](const pool_client::TierStatus &t) {
            return t.name == action.state.tier;
        });
        if (tier != tiers.end() && !tier->allowlistNetwork) {
            result["reachable"] = false;
            result["tiers_with_network"] = withNetwork;
            std::string note = "approved, but tier '" + action.state.tier + "' has no network at all (network = \"none\"): "
                "no command reaches " + host + " while the session runs on it. ";
            if (withNetwork.empty()) {
                note += "No tier the pools offer has an allowlist; an operator can add one (network = \"allowlist\" in "
                        "pool.toml).";
            } else {
                std::string names;
                for (const auto &name : withNetwork)
                    names += (names.empty() ? "" : ", ") + name;
                note += "Tiers with an allowlist: " + names + "; an engineer can move the session with `paddockctl override "
                    + action.state.id + " " + withNetwork.front() + " --reason TEXT`, and the approval goes with it.";
            }
            result["note"] = note;
            return Status{};
        }
        result["reachable"] = true;
        result["note"] = "approved in review " + reviewId + ": this session's later commands reach " + host
            + " through the pool's egress proxy; metadata, loopback and private addresses stay refused unless the "
              "tier's own allowlist names that range";
        return Status{};
    }
    if (kind == review::kind::SecretAccess) {
        result["secret"] = targets.empty() ? json("") : targets.front();
        result["note"] = "granted: the secret is in the environment of this session's later commands";
        return Status{};
    }
    if (args.value("change_format", std::string()) == "records") {
        if (!m_options.writeRecords)
            return fail(ErrorCode::FailedPrecondition, "this broker keeps no agent records, so the records were not "
                                                       "written");
        const json records = json::parse(change, nullptr, false);
        if (auto done = m_options.writeRecords(action.state.agent, records); !done)
            return done;
        result["records_written"] = records.size();
        return Status{};
    }
    if (args.value("change_format", std::string()) == "text")
        return fail(ErrorCode::InvalidArgument, "a bulk_change needs change_format diff or records to be applied");
    if (!pool)
        return fail(ErrorCode::Unavailable, "pool '" + action.state.pool + "' is no longer configured");
    return std::nullopt;   // a diff: applyDiff
}

StepOutcome StepEngine::applyDiff(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                  const json &args, json result)
{
    // The diff goes into the workspace and `patch` applies it there, inside the sandbox; each call
    // parks the step.
    const std::string file = ".paddock-change-" + action.call.id + ".diff";
    pool_client::ExecSpec spec;
    spec.sandboxId = action.state.sandboxId;
    spec.argv = {"/bin/sh", "-c", "patch -p1 --batch --forward -i '" + file + "'; status=$?; rm -f '" + file
                                      + "'; exit $status"};
    spec.timeoutMs = m_options.defaultCommandTimeoutMs;
    spec.idempotencyKey = action.idempotencyKey;
    spec.egressGrants = egressGrants(action.state);
    const json targets = args.value("targets", json::array());
    auto patched = [this, run, action, &pool, spec, targets, result]() mutable {
        using Ran = Result<pool_client::ExecOutcome>;
        return awaitCall<Ran>(
            run, [&pool, spec](std::function<void(Ran)> done) { pool.execAsync(spec, {}, std::move(done)); },
            [this, run, action, &pool, targets, result](Ran outcome) mutable {
                Status applied;
                bool clipped = false;
                if (!outcome) {
                    applied = std::unexpected(outcome.error());
                } else {
                    result["stdout"] = clipOutput(outcome->stdoutData, &clipped);
                    if (outcome->exitCode != 0 || outcome->signal != 0) {
                        applied = fail(ErrorCode::FailedPrecondition,
                                       "the diff did not apply (patch exited " + std::to_string(outcome->exitCode)
                                           + "): " + clipOutput(outcome->stdoutData + outcome->stderrData, &clipped));
                    } else {
                        result["applied"] = true;
                        result["files"] = targets;
                    }
                }
                return changeApplied(run, action, &pool, std::move(applied), std::move(result));
            });
    };
    return awaitCall<Status>(
        run,
        [&pool, sandboxId = action.state.sandboxId, file, change = args.value("change", std::string())](
            std::function<void(Status)> done) { pool.writeFileAsync(sandboxId, file, change, 0644, std::move(done)); },
        [this, run, action, &pool, result, patched](Status written) mutable {
            if (!written)
                return changeApplied(run, action, &pool, std::move(written), std::move(result));
            return patched();
        });
}

StepOutcome StepEngine::changeApplied(const StepRun &run, const Action &action, pool_client::PoolClient *pool,
                                      Status applied, json result)
{
    if (!applied) {
        if (pool) {
            if (auto outcome = poolTrouble(action, *pool, applied.error()))
                return *outcome;
        } else if (applied.error().code == ErrorCode::Unavailable) {   // its pool left the config
            return StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, applied.error().message};
        }
        result["error"] = applied.error().message;
    }
    std::vector<core::NewEvent> events{event(core::kind::ToolResult, result)};
    if (!applied || !result.value("applied", false) || !pool || !m_options.checkpointer)
        return appendResult(action, std::move(events));
    // Unlike a command, an applied change is recorded even when the pool did not answer for its
    // checkpoint: applying it twice would fail where the first one succeeded.
    return takeCheckpoint(run, *pool, action.state, [this, action, pool, events](Taken taken) mutable {
        (void)addCheckpoint(action, *pool, std::move(taken), events);
        return appendResult(action, std::move(events));
    });
}

namespace {

// A propose_change's arguments once checked, with kind and change_format filled in.
struct ChangeProposal {
    json args;
    std::string kind;
    json targets;
    std::string change;
    std::string format;
    int recordCount = 0;
};

// The change a propose_change call proposes, or why it is refused (said after "propose_change: ").
std::expected<ChangeProposal, std::string> readProposal(const llm::ToolCall &call)
{
    json args = call.arguments.is_object() ? call.arguments : json::object();
    const std::string kind = args.value("kind", std::string(review::kind::BulkChange));
    args["kind"] = kind;
    if (kind != review::kind::BulkChange && kind != review::kind::EgressException && kind != review::kind::SecretAccess)
        return std::unexpected("kind '" + kind + "' is not one of bulk_change, egress_exception, secret_access");
    const json targets = args.value("targets", json::array());
    if (!targets.is_array() || targets.empty()
        || !std::all_of(targets.begin(), targets.end(), [](const json &t) { return t.is_string() && !t.get<std::string>().empty(); }))
        return std::unexpected("targets must be a non-empty list of names (files, record keys, a host or a secret)");
    const std::string change = args.value("change", std::string());
    std::string format = args.value("change_format", std::string());
    if (format.empty())
        format = kind != review::kind::BulkChange ? "targets" : !change.empty() && change.front() == '[' ? "records" : "diff";
    args["change_format"] = format;
    int recordCount = 0;
    if (format == "records") {
        const json records = json::parse(change, nullptr, false);
        if (!records.is_array() || !std::all_of(records.begin(), records.end(), [](const json &r) {
                return r.is_object() && r.contains("key") && r["key"].is_string() && r.contains("value");
            }))
            return std::unexpected("a records change is a JSON array of {\"key\": \"...\", \"value\": ...} objects");
        recordCount = static_cast<int>(records.size());
    }
    if ((kind == review::kind::EgressException || kind == review::kind::SecretAccess) && targets.size() != 1)
        return std::unexpected("name exactly one " + std::string(kind == review::kind::SecretAccess ? "secret" : "host")
                               + " in targets");
    if (kind == review::kind::EgressException) {
        const std::string host = targets.front();
        if (auto grant = pool::egress::Grant::parse(host, ""); !grant)
            return std::unexpected(grant.error().message);
    }
    return ChangeProposal{std::move(args), kind, targets, change, format, recordCount};
}

// A proposal, with no decision to carry out, of what the session already has (a host approved, a
// secret granted): true, with the answer in result. False: result untouched.
bool alreadyGranted(const Action &action, const ChangeProposal &proposal, json &result)
{
    const std::string &kind = proposal.kind;
    const json &targets = proposal.targets;
    if (kind == review::kind::EgressException) {
        const std::string host = targets.front();
        const auto &approved = action.state.approvedHosts;
        const auto known = std::find_if(approved.begin(), approved.end(),
                                        [&](const core::ApprovedHost &h) { return h.host == host; });
        if (known != approved.end() && action.decision.is_null()) {
            result["host"] = host;
            result["note"] = "already approved for this session in review " + known->reviewId;
            return true;
        }
    }
    if (kind == review::kind::SecretAccess) {
        const std::string name = targets.front();
        const auto &granted = action.state.secrets;
        if (std::find(granted.begin(), granted.end(), name) != granted.end() && action.decision.is_null()) {
            result["secret"] = name;
            result["note"] = "already granted to this session";
            return true;
        }
    }
    return false;
}

// The review's decision into the result. False when the change was rejected or the review
// expired; the result's error then says which.
bool recordDecision(const json &decision, json &result)
{
    const bool approved = decision.value("approved", false);
    result["review_id"] = decision.value("review_id", std::string());
    result["approved"] = approved;
    result["decider"] = decision.value("decider", std::string());
    result["decision_reason"] = decision.value("reason", std::string());
    if (!approved) {
        const std::string reason = decision.value("reason", std::string());
        const std::string decider = decision.value("decider", std::string());
        result["error"] = decider.empty() && reason == "expired"
            ? "the change was not applied: review " + result["review_id"].get<std::string>()
                  + " expired without a decision"
            : "the change was rejected by " + decider + ": " + reason;
    }
    return approved;
}

// Why the policy sends the change to review; empty when it is within policy.
std::string reviewVerdict(const ChangeProposal &proposal, const review::ReviewPolicy &policy)
{
    const std::string &kind = proposal.kind;
    const std::string &format = proposal.format;
    const int recordCount = proposal.recordCount;
    const int targetCount = static_cast<int>(proposal.targets.size());
    std::string verdict;
    if (kind == review::kind::EgressException)
        verdict = "a host outside the tier's allowlist always needs review";
    else if (kind == review::kind::SecretAccess)
        verdict = "a secret not granted at submit always needs review";
    else if (format == "records" && recordCount > policy.recordWriteLimit)
        verdict = std::to_string(recordCount) + " record writes > record_write_limit "
            + std::to_string(policy.recordWriteLimit);
    else if (targetCount > policy.bulkTargetLimit)
        verdict = std::to_string(targetCount) + " targets > bulk_target_limit " + std::to_string(policy.bulkTargetLimit);
    return verdict;
}

// The review a change beyond policy asks for.
review::ReviewRequest changeReview(const Action &action, const ChangeProposal &proposal, const std::string &verdict)
{
    const std::string &kind = proposal.kind;
    const json &targets = proposal.targets;
    const std::string &change = proposal.change;
    const std::string &format = proposal.format;
    const int recordCount = proposal.recordCount;
    const int targetCount = static_cast<int>(targets.size());
    review::ReviewRequest request;
    request.kind = kind;
    request.change = change.empty() ? targets.dump() : change;
    request.changeFormat = format;
    request.targetCount = targetCount;
    request.justification = proposal.args.value("justification", std::string());
    request.policyVerdict = verdict;
    request.requester = action.state.submittedBy;
    request.agent = action.state.agent;
    request.toolCallId = action.call.id;
    const std::string first = targets.front();
    if (kind == review::kind::EgressException) {
        request.summary = "reach host " + first + " from session " + action.state.id;
        request.impact = "1 host";
        request.payload = {{"host", first}};
    } else if (kind == review::kind::SecretAccess) {
        request.summary = "use secret " + first + " in session " + action.state.id;
        request.impact = "1 secret";
        request.payload = {{"secret", first}};
    } else if (format == "records") {
        request.summary = "write " + std::to_string(recordCount) + " durable records of agent " + action.state.agent;
        request.impact = std::to_string(recordCount) + " records";
    } else {
        request.summary = "change " + std::to_string(targetCount) + " files (" + first
            + (targetCount > 1 ? ", ..." : "") + ")";
        request.impact = std::to_string(targetCount) + " files, " + diffStat(change);
    }
    request.payload["targets"] = targets;
    return request;
}

} // namespace

StepOutcome StepEngine::proposeChange(const StepRun &run, const Action &action)
{
    const llm::ToolCall &call = action.call;
    json result = toolResultBase(call);
    auto refuse = [&](const std::string &why) {
        result["error"] = "propose_change: " + why;
        return appendResult(action, {event(core::kind::ToolResult, result)});
    };
    const auto proposal = readProposal(call);
    if (!proposal)
        return refuse(proposal.error());
    if (alreadyGranted(action, *proposal, result))
        return appendResult(action, {event(core::kind::ToolResult, result)});
    if (proposal->kind == review::kind::SecretAccess) {
        const std::string name = proposal->targets.front();
        if (!m_options.secrets || !m_options.secrets->snapshot()->values.contains(name))
            return refuse("the broker holds no secret named '" + name + "'; ask an operator to set it "
                          "(`paddockctl secrets set " + name + "`)");
    }
    const json &args = proposal->args;
    pool_client::PoolClient *pool = m_pools.find(action.state.pool);

    auto applyAndRecord = [&]() {
        std::optional<Status> applied = applyChange(action, pool, args, result);
        if (!applied)
            return applyDiff(run, action, *pool, args, std::move(result));
        return changeApplied(run, action, pool, std::move(*applied), std::move(result));
    };

    if (!action.decision.is_null()) {
        if (!recordDecision(action.decision, result))
            return appendResult(action, {event(core::kind::ToolResult, result)});
        return applyAndRecord();
    }

    const auto &policy = m_options.reviewPolicy;
    const int targetCount = static_cast<int>(proposal->targets.size());
    const std::string verdict = reviewVerdict(*proposal, policy);
    if (verdict.empty()) {
        result["review"] = "not needed: " + std::to_string(targetCount) + " targets within policy";
        return applyAndRecord();
    }
    return appendResult(action, {review::openReview(changeReview(action, *proposal, verdict), policy, nowUnixMs())});
}

} // namespace paddock::engine
