#include "cli/review_commands.h"

#include "cli/exit_codes.h"
#include "common/clock.h"

#include <map>

namespace paddock::cli {

namespace {

nlohmann::json itemToJson(const v1::ReviewItem &item)
{
    nlohmann::json j{{"id", item.id()},
                     {"kind", item.kind()},
                     {"session_id", item.session_id()},
                     {"agent", item.agent()},
                     {"summary", item.summary()},
                     {"impact", item.impact()},
                     {"risk", item.risk()},
                     {"justification", item.justification()},
                     {"policy_verdict", item.policy_verdict()},
                     {"requester", item.requester()},
                     {"state", item.state()},
                     {"decider", item.decider()},
                     {"decision_reason", item.decision_reason()},
                     {"created_unix_ms", item.created_unix_ms()},
                     {"decided_unix_ms", item.decided_unix_ms()},
                     {"expires_unix_ms", item.expires_unix_ms()},
                     {"cost_micros", item.cost_micros()},
                     {"change_hash", item.change_hash()},
                     {"change_format", item.change_format()},
                     {"target_count", item.target_count()},
                     {"fetched_by_caller", item.fetched_by_caller()},
                     {"seq", item.seq()}};
    if (!item.change().empty())
        j["change"] = item.change();
    else
        j["change_preview"] = item.change_preview();
    return j;
}

// Every item the queue lists in `state` (following page tokens).
grpc::Status listAll(const BrokerCall &call, const std::string &state, const std::string &kind,
                     const std::string &session, std::vector<v1::ReviewItem> &items)
{
    std::string token;
    do {
        v1::ListReviewItemsRequest request;
        request.set_state(state);
        request.set_kind(kind);
        request.set_session_id(session);
        request.set_page_size(1000);
        request.set_page_token(token);
        v1::ListReviewItemsResponse response;
        const grpc::Status status = call.unary(&GovernanceStub::ListReviewItems, request, response);
        if (!status.ok())
            return status;
        items.insert(items.end(), response.items().begin(), response.items().end());
        token = response.next_page_token();
    } while (!token.empty());
    return grpc::Status::OK;
}

int runList(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    std::vector<v1::ReviewItem> items;
    const grpc::Status status = listAll(call, inv.reviewState, inv.reviewKind, inv.sessionId, items);
    if (!status.ok())
        return call.fail(err, "cannot list review items", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &item : items)
            list.push_back(itemToJson(item));
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    if (items.empty()) {
        out << "no " << (inv.reviewState == "all" ? "" : inv.reviewState + " ") << "review items\n";
        return toInt(ExitCode::Ok);
    }
    const int64_t now = nowUnixMs();
    std::vector<std::vector<std::string>> rows;
    for (const auto &item : items) {
        rows.push_back({item.id(), item.kind(), item.risk(), item.state(), item.requester(),
                        formatAge(item.created_unix_ms(), now), item.impact(),
                        item.cost_micros() ? formatCost(item.cost_micros()) : "-", item.session_id(),
                        truncateText(item.summary(), 60)});
    }
    out << renderTable({"ID", "KIND", "RISK", "STATE", "REQUESTER", "AGE", "IMPACT", "COST", "SESSION", "SUMMARY"},
                       rows);
    return toInt(ExitCode::Ok);
}

int runShow(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    const std::string id = inv.reviewIds.empty() ? std::string() : inv.reviewIds.front();
    v1::GetReviewItemRequest request;
    request.set_id(id);
    v1::ReviewItem item;
    const grpc::Status status = call.unary(&GovernanceStub::GetReviewItem, request, item);
    if (!status.ok())
        return call.fail(err, "cannot show review item " + id, status, "`paddockctl reviews ls` lists them");
    if (inv.output == OutputFormat::Json) {
        out << itemToJson(item).dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    const int64_t now = nowUnixMs();
    std::vector<std::vector<std::string>> rows = {
        {"id", item.id()},
        {"kind", item.kind()},
        {"state", item.state() + (item.decider().empty() ? "" : " by " + item.decider())
                      + (item.decision_reason().empty() ? "" : ": " + item.decision_reason())},
        {"risk", item.risk()},
        {"session", item.session_id() + " (agent " + item.agent() + ")"},
        {"requester", item.requester()},
        {"summary", item.summary()},
        {"impact", item.impact()},
        {"cost", item.cost_micros() ? formatCost(item.cost_micros()) : "-"},
        {"justification", item.justification()},
        {"policy", item.policy_verdict()},
        {"created", formatIsoTime(item.created_unix_ms()) + " (" + formatAge(item.created_unix_ms(), now) + " ago)"},
        {"expires", formatIsoTime(item.expires_unix_ms())},
        {"change_hash", item.change_hash()},
    };
    out << renderTable({"FIELD", "VALUE"}, rows);
    out << "---- change (" << item.change_format() << ") ----\n" << item.change();
    if (!item.change().empty() && item.change().back() != '\n')
        out << "\n";
    out << "---- end of change ----\n";
    if (item.state() == "pending")
        out << "approve: paddockctl reviews approve " << item.id() << " --hash " << item.change_hash()
            << (item.risk() == "high" ? " --reason TEXT" : "") << "\nreject:  paddockctl reviews reject "
            << item.id() << " --reason TEXT\n";
    return toInt(ExitCode::Ok);
}

int runDecide(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    const bool approve = inv.command == Command::ReviewsApprove;
    const std::string verb = approve ? "approve" : "reject";
    std::string error;
    auto given = parseHashOptions(inv.hashes, inv.reviewIds, &error);
    if (!given) {
        err << "paddockctl reviews " << verb << ": " << error << "\n";
        return toInt(ExitCode::Usage);
    }
    v1::DecideReviewItemsRequest request;
    for (const auto &id : inv.reviewIds)
        request.add_ids(id);
    request.set_approve(approve);
    request.set_reason(inv.reason);
    if (approve) {
        // Bind each approval to the change the queue holds now, unless the user named the hash
        // they read; a high-risk item must have been read (`reviews show`) by this user.
        std::vector<v1::ReviewItem> items;
        const grpc::Status listed = listAll(call, "all", "", "", items);
        if (!listed.ok())
            return call.fail(err, "cannot " + verb + " review items", listed);
        for (const auto &id : inv.reviewIds) {
            auto it = std::find_if(items.begin(), items.end(), [&](const v1::ReviewItem &i) { return i.id() == id; });
            if (it == items.end()) {
                err << "paddockctl: cannot approve: no review item '" << id
                    << "' (`paddockctl reviews ls` lists them); nothing was decided\n";
                return toInt(ExitCode::NotFound);
            }
            if (it->risk() == "high" && !it->fetched_by_caller()) {
                err << "paddockctl: cannot approve: review item " << id << " is high risk and you have not read its "
                    << "change: run `paddockctl reviews show " << id << "` first; nothing was decided\n";
                return toInt(ExitCode::Conflict);
            }
            auto hash = given->find(id);
            (*request.mutable_change_hashes())[id] = hash != given->end() ? hash->second : it->change_hash();
        }
    }
    v1::DecideReviewItemsResponse response;
    const grpc::Status status = call.unary(&GovernanceStub::DecideReviewItems, request, response);
    if (!status.ok())
        return call.fail(err, "cannot " + verb + " review items", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &item : response.items())
            list.push_back(itemToJson(item));
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    for (const auto &item : response.items())
        out << item.id() << " " << item.state() << " (session " << item.session_id() << " resumes)\n";
    return toInt(ExitCode::Ok);
}

int runStats(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::ApproverStats response;
    const grpc::Status status = call.unary(&GovernanceStub::GetApproverStats, v1::GetApproverStatsRequest{}, response);
    if (!status.ok())
        return call.fail(err, "cannot read approver stats", status);
    if (inv.output == OutputFormat::Json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto &a : response.approvers())
            list.push_back({{"principal", a.principal()}, {"decided", a.decided()}, {"approved", a.approved()},
                            {"rejected", a.rejected()}, {"approval_rate", a.approval_rate()},
                            {"median_decide_ms", a.median_decide_ms()}});
        out << list.dump(2) << "\n";
        return toInt(ExitCode::Ok);
    }
    if (response.approvers().empty()) {
        out << "no decisions yet\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &a : response.approvers()) {
        char rate[16];
        std::snprintf(rate, sizeof rate, "%.0f%%", a.approval_rate() * 100);
        const std::string median = a.decided() > 0 ? formatSpan(a.median_decide_ms()) : "-";
        rows.push_back({a.principal(), std::to_string(a.decided()), std::to_string(a.approved()),
                        std::to_string(a.rejected()), rate, median});
    }
    out << renderTable({"APPROVER", "DECIDED", "APPROVED", "REJECTED", "RATE", "MEDIAN TIME"}, rows, {1, 2, 3, 4});
    return toInt(ExitCode::Ok);
}

} // namespace

std::optional<std::map<std::string, std::string>> parseHashOptions(const std::vector<std::string> &values,
                                                                   const std::vector<std::string> &ids,
                                                                   std::string *error)
{
    std::map<std::string, std::string> out;
    for (const auto &value : values) {
        const auto eq = value.find('=');
        if (eq == std::string::npos) {
            if (ids.size() != 1 || values.size() != 1) {
                *error = "--hash " + value + " names no item: with several ids write --hash ID=HASH for each";
                return std::nullopt;
            }
            out[ids.front()] = value;
            continue;
        }
        const std::string id = value.substr(0, eq);
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
            *error = "--hash names item '" + id + "', which is not among the ids to decide";
            return std::nullopt;
        }
        out[id] = value.substr(eq + 1);
    }
    return out;
}

ReviewSubcommands addReviewCommands(CLI::App &app, Invocation &inv)
{
    auto *reviews = app.add_subcommand("reviews", "The review queue: list, read, approve or reject review items");
    reviews->require_subcommand(1);
    ReviewSubcommands commands;
    commands.list = reviews->add_subcommand("ls", "List review items, oldest first");
    commands.list->add_option("--state", inv.reviewState, "pending (default), approved, rejected, expired or all")
        ->check(CLI::IsMember({"pending", "approved", "rejected", "expired", "all"}));
    commands.list->add_option("--kind", inv.reviewKind,
                              "Only this kind: bulk_change, tier_escalation, budget_extension, egress_exception, "
                              "secret_access");
    commands.list->add_option("--session", inv.sessionId, "Only this session's items");
    commands.show = reviews->add_subcommand("show", "Print an item with its full change and change_hash (the broker "
                                                    "records that you read it)");
    commands.show->add_option("ID", inv.reviewIds, "Review item id")->required()->expected(1);
    commands.approve = reviews->add_subcommand(
        "approve", "Approve items of one kind at once (all or none); each approval is bound to the change_hash the "
                   "queue lists now, or to --hash. High-risk items need `reviews show` first and a --reason");
    commands.approve->add_option("ID", inv.reviewIds, "Review item ids")->required();
    commands.approve->add_option("--reason", inv.reason, "Why (required for high-risk items)");
    commands.approve->add_option("--hash", inv.hashes,
                                 "The change_hash you read (from `reviews show`): HASH for one id, ID=HASH for several "
                                 "(repeatable)");
    commands.reject = reviews->add_subcommand("reject", "Reject items of one kind at once (all or none)");
    commands.reject->add_option("ID", inv.reviewIds, "Review item ids")->required();
    commands.reject->add_option("--reason", inv.reason, "Why; the agent sees it as its tool's result")->required();
    commands.stats = reviews->add_subcommand("stats", "Per approver: decisions, approval rate, median time to decide");
    return commands;
}

std::optional<Command> parsedReviewCommand(const ReviewSubcommands &commands)
{
    if (commands.list && commands.list->parsed())
        return Command::ReviewsList;
    if (commands.show && commands.show->parsed())
        return Command::ReviewsShow;
    if (commands.approve && commands.approve->parsed())
        return Command::ReviewsApprove;
    if (commands.reject && commands.reject->parsed())
        return Command::ReviewsReject;
    if (commands.stats && commands.stats->parsed())
        return Command::ReviewsStats;
    return std::nullopt;
}

int runReviewCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    switch (inv.command) {
    case Command::ReviewsList: return runList(inv, call, out, err);
    case Command::ReviewsShow: return runShow(inv, call, out, err);
    case Command::ReviewsApprove:
    case Command::ReviewsReject: return runDecide(inv, call, out, err);
    default: return runStats(inv, call, out, err);
    }
}

} // namespace paddock::cli
