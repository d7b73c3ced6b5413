// Tiers, cost, budgets and reviews in words (docs/governance.md).

#include "trace/event_summary_kinds.h"
#include "trace/summary_text.h"

namespace paddock::trace {
namespace {

using nlohmann::json;
using namespace text;

void envDecision(std::string_view, const json &p, EventLine &line)
{
    const std::string verdict = str(p, "verdict");
    const std::string requested = str(p, "requested_tier");
    const std::string chosen = str(p, "chosen_tier");
    std::string head;
    if (verdict == "refused")
        head = "tier " + requested + " refused";
    else if (verdict == "needs_review")
        head = "tier " + requested + " needs review";
    else
        head = "tier " + chosen + " chosen";
    if (const std::string chooser = str(p, "chooser"); !chooser.empty())
        head += " by " + (chooser == "human" && !str(p, "who").empty() ? str(p, "who") : chooser);
    std::vector<std::string> parts{head};
    if (!requested.empty() && requested != chosen && verdict != "refused" && verdict != "needs_review")
        parts.push_back("requested " + requested);
    if (const std::string rule = str(p, "rule"); !rule.empty())
        parts.push_back("rule " + rule);
    if (const std::string trigger = str(p, "trigger"); !trigger.empty() && trigger != "session_start")
        parts.push_back("on " + trigger);
    line.summary = withDetail(join(parts), str(p, "reason", 200));
}

void envOutcome(std::string_view, const json &p, EventLine &line)
{
    std::string outcome = str(p, "outcome");
    for (char &c : outcome) {
        if (c == '_')
            c = '-';
    }
    std::vector<std::string> parts{withDetail(str(p, "tier"), outcome, " ")};
    if (has(p, "peak_memory_bytes"))
        parts.push_back("peak memory " + bytes(num(p, "peak_memory_bytes"))
                        + (has(p, "memory_limit_bytes") ? " of " + bytes(num(p, "memory_limit_bytes")) : ""));
    if (has(p, "mean_cpu_fraction"))
        parts.push_back("mean CPU " + percent(real(p, "mean_cpu_fraction")));
    if (const std::string fitting = str(p, "fitting_tier"); !fitting.empty() && fitting != str(p, "tier"))
        parts.push_back(fitting + " would fit");
    line.summary = join(parts);
    line.isError = outcome == "oom" || outcome == "timeout";
}

void tierOverride(std::string_view, const json &p, EventLine &line)
{
    std::string head = "tier " + str(p, "from") + " → " + str(p, "to");
    if (const std::string who = str(p, "who"); !who.empty())
        head += " by " + who;
    line.summary = withDetail(head, str(p, "reason", 200));
}

// The bill of one cost event; describeEvent adds its amount (the event's cost_micros, which the
// payload does not repeat).
void cost(std::string_view, const json &p, EventLine &line)
{
    const std::string kind = str(p, "kind");
    if (kind == "model") {
        line.summary = join({"model " + str(p, "model"), std::to_string(num(p, "input_tokens")) + " in / "
                                                            + std::to_string(num(p, "output_tokens")) + " out tokens"});
        if (const int64_t cached = num(p, "cached_tokens"); cached > 0)
            line.summary += " (" + std::to_string(cached) + " cached)";
    } else if (kind == "sandbox") {
        line.summary = withDetail(str(p, "tier"), "sandbox", " ") + " " + seconds(real(p, "seconds"));
        if (const double price = real(p, "price_per_hour"); price > 0)
            line.summary += " at " + dollars(static_cast<int64_t>(price * 1e6)) + "/h";
    } else if (kind == "storage") {
        line.summary = "storage of " + bytes(num(p, "bytes")) + " for " + seconds(real(p, "seconds"));
    } else {
        line.summary = withDetail(kind.empty() ? std::string("cost") : kind, str(p, "agent"), " of ");
    }
}

std::string scopeName(const json &p)
{
    const std::string scope = str(p, "scope");
    if (scope == "agent_day")
        return "agent " + str(p, "agent") + "'s daily";
    return scope.empty() ? std::string("the") : "the " + scope;
}

void budgetWarning(std::string_view, const json &p, EventLine &line)
{
    line.summary = std::to_string(num(p, "percent", 80)) + "% of " + scopeName(p) + " budget spent: "
                 + dollars(num(p, "spent_micros")) + " of " + dollars(num(p, "budget_micros"));
}

void budgetExceeded(std::string_view, const json &p, EventLine &line)
{
    line.summary = scopeName(p) + " budget is spent: " + dollars(num(p, "spent_micros")) + " of "
                 + dollars(num(p, "budget_micros")) + "; waiting for an extension";
    line.summary[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line.summary[0])));
}

void approvalRequested(std::string_view, const json &p, EventLine &line)
{
    std::string head = "review " + str(p, "review_id") + " requested";
    const std::string what = join({str(p, "kind"), withDetail(str(p, "risk"), str(p, "risk").empty() ? "" : "risk", " ")});
    if (!what.empty())
        head += " (" + what + ")";
    line.summary = withDetail(head, str(p, "summary", 200));
    line.hasDetails = has(p, "change");
}

void approvalFetched(std::string_view, const json &p, EventLine &line)
{
    line.summary = "review " + str(p, "review_id") + " opened by " + str(p, "principal");
}

void approvalDecided(std::string_view, const json &p, EventLine &line)
{
    std::string head = "review " + str(p, "review_id");
    const std::string decider = str(p, "decider");
    if (decider.empty() && str(p, "reason") == "expired") {
        line.summary = head + " expired unanswered";
        return;
    }
    head += flag(p, "approved") ? " approved" : " rejected";
    if (!decider.empty())
        head += " by " + decider;
    std::vector<std::string> granted;
    if (has(p, "budget_increase_micros"))
        granted.push_back("budget +" + dollars(num(p, "budget_increase_micros")));
    for (const char *key : {"secret", "host", "tier"}) {
        if (const std::string value = str(p, key); !value.empty())
            granted.push_back(std::string(key) + " " + value);
    }
    if (!granted.empty())
        head += " (" + join(granted) + ")";
    line.summary = withDetail(head, str(p, "reason", 200));
}

} // namespace

namespace kinds {

std::vector<Entry> governanceKinds()
{
    return {
        {"env.decision", &envDecision},       {"env.outcome", &envOutcome},
        {"tier.override", &tierOverride},     {"cost", &cost},
        {"budget.warning", &budgetWarning},   {"budget.exceeded", &budgetExceeded},
        {"approval.requested", &approvalRequested}, {"approval.fetched", &approvalFetched},
        {"approval.decided", &approvalDecided},
    };
}

} // namespace kinds
} // namespace paddock::trace
