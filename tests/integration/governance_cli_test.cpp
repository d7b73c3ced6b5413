// Cost, budgets and the review queue end to end: the real broker and pool, driven through
// paddockctl. The sums `paddockctl cost` prints come from the broker's cost index and must match
// the cost events of the sessions' logs; a session over its budget waits for a budget_extension
// review, which its own submitter cannot approve.
#include "tests/integration/daemons_fixture.h"

#include <map>
#include <regex>

namespace paddock::test {
namespace {

using nlohmann::json;

class Governance : public DaemonsTest {
protected:
    std::map<std::string, std::string> configFiles() const override
    {
        // $3.60 an hour: a micro-dollar per millisecond of sandbox time.
        return {{"pool.toml", "[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\nwarm_count = 2\nprice_per_hour = 3.6\n"},
                {"broker.toml", "policy_file = \"policy.toml\"\n[prices.models.scripted]\ninput_per_million = 5.0\n"
                                "output_per_million = 20.0\n"},
                {"policy.toml", "[review]\nbulk_target_limit = 5\nexpiry_seconds = 3600\n"}};
    }

    json costs(const std::vector<std::string> &extra)
    {
        std::vector<std::string> args{"cost", "--output", "json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const CliResult result = cli(args);
        EXPECT_EQ(result.exitCode, 0) << result.err;
        return json::parse(result.out, nullptr, false);
    }

    static std::map<std::string, int64_t> byKey(const json &summary)
    {
        std::map<std::string, int64_t> out;
        for (const auto &line : summary["lines"])
            out[line["key"]] += line["cost_micros"].get<int64_t>();
        return out;
    }
};

TEST_F(Governance, CostSumsMatchTheCostEventsOfTheLog)
{
    // Agents are durable identities: a session of an agent that does not exist is refused.
    ASSERT_EQ(cli({"agents", "create", "builder"}).exitCode, 0);
    ASSERT_EQ(cli({"agents", "create", "reader"}).exitCode, 0);
    const std::string a = submitAndFollow({"--playbook", "hello-c", "--agent", "builder"});
    const std::string b = submitAndFollow({"--playbook", "inspect", "--agent", "reader"});
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());

    std::map<std::string, std::map<std::string, int64_t>> expected;   // by -> key -> micros
    int64_t total = 0;
    for (const auto &[id, agent] : {std::pair{a, std::string("builder")}, std::pair{b, std::string("reader")}}) {
        for (const auto &event : eventsOf(id)) {
            const int64_t micros = event.value("cost_micros", int64_t{0});
            total += micros;
            if (event["kind"] != "cost") {
                EXPECT_EQ(micros, 0) << event.dump();
                continue;
            }
            const json &payload = event["payload"];
            expected["session"][id] += micros;
            expected["agent"][payload["agent"]] += micros;
            expected["kind"][payload["kind"]] += micros;
            expected["tier"][payload["tier"]] += micros;
            expected["model"][payload["model"]] += micros;
            EXPECT_EQ(payload["agent"], agent);
            if (payload["kind"] == "model") {
                EXPECT_EQ(payload["model"], "scripted");
                EXPECT_EQ(payload["input_per_million"], 5.0);   // the broker config's price table
            } else if (payload["kind"] == "sandbox") {
                EXPECT_EQ(payload["price_per_hour"], 3.6);       // the pool's price for the tier
                EXPECT_EQ(payload["tier"], "lite");
            }
        }
    }
    EXPECT_GT(expected["kind"]["model"], 0);
    EXPECT_GT(expected["kind"]["sandbox"], 0);
    for (const std::string by : {"session", "agent", "kind", "tier", "model"}) {
        const json summary = costs({"--by", by});
        EXPECT_EQ(byKey(summary), expected[by]) << "by " << by << ": " << summary.dump();
        EXPECT_EQ(summary["total_micros"], total);
    }
    const json days = costs({"--by", "day", "--since", "1d"});
    ASSERT_EQ(days["lines"].size(), 1u) << days.dump();
    EXPECT_EQ(days["total_micros"], total);
    const json one = costs({"--session", a});
    EXPECT_EQ(one["total_micros"], expected["session"][a]);

    // The session shows the same split.
    const CliResult shown = cli({"show", a, "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    const json session = json::parse(shown.out);
    EXPECT_EQ(session.value("cost_micros", int64_t{0}), expected["session"][a]) << shown.out;

    const CliResult table = cli({"cost", "--by", "agent"});
    ASSERT_EQ(table.exitCode, 0) << table.err;
    EXPECT_NE(table.out.find("builder"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("total $"), std::string::npos) << table.out;
    const CliResult budgets = cli({"budgets"});
    ASSERT_EQ(budgets.exitCode, 0) << budgets.err;
    EXPECT_NE(budgets.out.find("reader"), std::string::npos) << budgets.out;
}

TEST_F(Governance, OverBudgetSessionWaitsForAnExtensionItsSubmitterCannotApprove)
{
    // A tenth of a cent: the first steps of hello-c cost more than that.
    const CliResult submitted = cli({"submit", "--playbook", "hello-c", "--budget", "0.001", "--output", "json"});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const std::string id = json::parse(submitted.out)["id"];

    json item;
    for (int i = 0; i < 300 && item.is_null(); ++i) {
        const CliResult listed = cli({"reviews", "ls", "--output", "json"});
        ASSERT_EQ(listed.exitCode, 0) << listed.err;
        for (const auto &candidate : json::parse(listed.out)) {
            if (candidate["session_id"] == id)
                item = candidate;
        }
        if (item.is_null())
            std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(item.is_null()) << "no budget_extension review appeared for " << id;
    EXPECT_EQ(item["kind"], "budget_extension");
    EXPECT_EQ(item["cost_micros"], 500);   // 50% of the budget, the policy's default
    const json session = json::parse(cli({"show", id, "--output", "json"}).out);
    EXPECT_EQ(session["status"], "waiting_approval") << session.dump();

    const json log = eventsOf(id);
    bool exceeded = false;
    for (const auto &event : log)
        exceeded = exceeded || event["kind"] == "budget.exceeded";
    EXPECT_TRUE(exceeded);

    // The submitter is the requester: approving their own extension is refused, and nothing changes.
    const std::string reviewId = item["id"];
    const CliResult self = cli({"reviews", "approve", reviewId, "--reason", "mine"});
    EXPECT_NE(self.exitCode, 0);
    EXPECT_NE(self.err.find("nobody approves their own request"), std::string::npos) << self.err;
    const CliResult shownItem = cli({"reviews", "show", reviewId});
    ASSERT_EQ(shownItem.exitCode, 0) << shownItem.err;
    EXPECT_NE(shownItem.out.find("pending"), std::string::npos) << shownItem.out;
    EXPECT_NE(shownItem.out.find(item["change_hash"].get<std::string>()), std::string::npos) << shownItem.out;

    // Rejecting it (a requester may withdraw) ends the session with the reason.
    const CliResult rejected = cli({"reviews", "reject", reviewId, "--reason", "not worth it"});
    ASSERT_EQ(rejected.exitCode, 0) << rejected.err;
    json final;
    for (int i = 0; i < 300; ++i) {
        final = json::parse(cli({"show", id, "--output", "json"}).out);
        if (final["status"] == "failed")
            break;
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(final["status"], "failed");
    EXPECT_NE(final.value("status_reason", "").find("not worth it"), std::string::npos) << final.dump();
    const CliResult stats = cli({"reviews", "stats", "--output", "json"});
    ASSERT_EQ(stats.exitCode, 0) << stats.err;
    const json approvers = json::parse(stats.out);
    ASSERT_EQ(approvers.size(), 1u) << stats.out;
    EXPECT_EQ(approvers[0]["rejected"], 1);
    // The table's MEDIAN TIME is a duration ("0s", "51s", "3m"), not "-" for an approver who decided.
    const CliResult table = cli({"reviews", "stats"});
    ASSERT_EQ(table.exitCode, 0) << table.err;
    EXPECT_TRUE(std::regex_search(table.out, std::regex(R"(\n\S+ +1 +0 +1 +0% +\d+[smhd]\n)"))) << table.out;
}

} // namespace
} // namespace paddock::test
