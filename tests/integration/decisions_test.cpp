// Agents and environment decisions against the real broker and pool (bubblewrap sandboxes): bad
// input for agents, each selection mode's choice at session start, the policy's tier rules,
// request_environment granted and refused, read_records, and the outcomes oom, ok and
// over_allocated computed from the sandbox's real samples; ListDecisions filters and
// GetDecisionStats counts.

#include "tests/integration/daemons_fixture.h"

#include <pwd.h>
#include <unistd.h>

#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;

constexpr const char *kPolicy = R"(
[decisions]
expected_duration_minutes = 30

[[tier_rule]]
name = "builds"
tags = ["build"]
tier = "big"

[[tier_rule]]
name = "compiling"
goal_words = ["compile"]
tier = "big"

[[tier_rule]]
name = "probes"
playbook = "probe"
tier = "other"
)";

class Decisions : public DaemonsTest {
protected:
    // Three bubblewrap tiers of different sizes and prices, and the policy above.
    std::map<std::string, std::string> configFiles() const override
    {
        return {{"pool.toml", "[[tier]]\nname = \"small\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 8\n"
                              "memory_mb = 128\ncpu = 1.0\nprice_per_hour = 0.02\n"
                              "[[tier]]\nname = \"other\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 8\n"
                              "memory_mb = 256\ncpu = 1.0\nprice_per_hour = 0.05\n"
                              "[[tier]]\nname = \"big\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 8\n"
                              "memory_mb = 1024\ncpu = 2.0\nprice_per_hour = 0.2\n"},
                {"broker.toml", "default_tier = \"small\"\npolicy_file = \"policy.toml\"\n"},
                {"policy.toml", kPolicy}};
    }

    static std::vector<json> ofKind(const json &events, const std::string &kind)
    {
        std::vector<json> out;
        for (const auto &e : events) {
            if (e.value("kind", "") == kind)
                out.push_back(e["payload"]);
        }
        return out;
    }

    std::string submit(const std::vector<std::string> &args)
    {
        std::vector<std::string> all{"submit"};
        all.insert(all.end(), args.begin(), args.end());
        all.insert(all.end(), {"--output", "json"});
        const CliResult submitted = cli(all);
        EXPECT_EQ(submitted.exitCode, 0) << submitted.err;
        const json session = json::parse(submitted.out, nullptr, false);
        return session.is_object() ? session.value("id", std::string()) : std::string();
    }

    // The session's first env.decision (made at its start).
    json startDecision(const std::string &id)
    {
        const auto decisions = ofKind(eventsOf(id), "env.decision");
        EXPECT_FALSE(decisions.empty());
        return decisions.empty() ? json::object() : decisions.front();
    }

    std::filesystem::path playbook(const std::string &name, const std::string &steps)
    {
        return writeFile(name + ".toml", "name = \"" + name + "\"\ngoal = \"" + name + " things\"\n" + steps);
    }

    void createAgent(const std::vector<std::string> &args)
    {
        std::vector<std::string> all{"agents", "create"};
        all.insert(all.end(), args.begin(), args.end());
        const CliResult created = cli(all);
        ASSERT_EQ(created.exitCode, 0) << created.err;
    }

    std::vector<json> decisions(const std::vector<std::string> &filters)
    {
        std::vector<std::string> args{"decisions", "ls", "--output", "json"};
        args.insert(args.end(), filters.begin(), filters.end());
        const CliResult listed = cli(args);
        EXPECT_EQ(listed.exitCode, 0) << listed.err;
        return jsonLines(listed.out);
    }
};

// The principal the broker names this test's paddockctl: its OS user (peer credentials).
std::string osUser()
{
    const passwd *pw = ::getpwuid(::geteuid());
    return pw ? pw->pw_name : "";
}

constexpr const char *kQuick = "[[step]]\ntool = \"run_command\"\ncommand = \"true\"\n";

TEST_F(Decisions, AgentsBadInputIsRefusedNamingTheFix)
{
    auto refused = [&](const std::vector<std::string> &args, int code, const std::string &text) {
        std::vector<std::string> all{"agents"};
        all.insert(all.end(), args.begin(), args.end());
        const CliResult result = cli(all);
        EXPECT_EQ(result.exitCode, code) << result.out << result.err;
        EXPECT_NE(result.err.find(text), std::string::npos) << result.err;
    };
    refused({"create", "bot", "--default-tier", "huge"}, 5, "unknown tier 'huge' in its default tier; the pools offer: big, other, small");
    refused({"create", "bot", "--allow", "small,nope"}, 5, "unknown tier 'nope'");
    refused({"create", "bot", "--default-tier", "big", "--allow", "small"}, 5, "default tier 'big' is not among its allowed tiers");
    refused({"create", "bot", "--budget-session", "-1"}, 5, "negative budget");
    refused({"create", "Bad Name"}, 5, "agent name 'Bad Name'");
    refused({"create", "default"}, 5, "built in");
    createAgent({"bot", "--allow", "small,big", "--mode", "agent"});
    refused({"create", "bot"}, 6, "already exists");
    refused({"show", "nobody"}, 3, "paddockctl agents create nobody");
    refused({"records", "set", "bot", "repo", "{not json"}, 5, "not a JSON document");
    refused({"edit", "bot", "--default-tier", "other"}, 5, "not among its allowed tiers");

    // Nothing of the refused edits stuck; a good record did.
    ASSERT_EQ(cli({"agents", "records", "set", "bot", "repo", R"({"branch": "main"})"}).exitCode, 0);
    const CliResult shown = cli({"agents", "show", "bot", "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    const json agent = json::parse(shown.out);
    EXPECT_EQ(agent["selection_mode"], "agent");
    EXPECT_EQ(agent["allowed_tiers"], json::array({"small", "big"}));
    EXPECT_EQ(agent["default_tier"], "");
    EXPECT_EQ(agent["records"]["repo"]["branch"], "main");
    EXPECT_EQ(agent["owner"], osUser());

    // A session of an agent that does not exist is refused, naming how to create it.
    const CliResult unknown = cli({"submit", "--playbook", playbook("quick", kQuick).string(), "--agent", "ghost"});
    EXPECT_EQ(unknown.exitCode, 5) << unknown.err;
    EXPECT_NE(unknown.err.find("paddockctl agents create ghost"), std::string::npos) << unknown.err;
    // A tier the agent may not use is refused at submit.
    const CliResult notAllowed = cli({"submit", "--playbook", playbook("quick", kQuick).string(), "--agent", "bot",
                                      "--tier", "other"});
    EXPECT_EQ(notAllowed.exitCode, 5) << notAllowed.err;
    EXPECT_NE(notAllowed.err.find("may not use tier 'other'"), std::string::npos) << notAllowed.err;

    const CliResult listed = cli({"agents", "ls"});
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    EXPECT_NE(listed.out.find("default"), std::string::npos);
    EXPECT_NE(listed.out.find("bot"), std::string::npos);
}

TEST_F(Decisions, EachSelectionModeChoosesAtStart)
{
    const auto quick = playbook("quick", kQuick).string();
    createAgent({"plain", "--default-tier", "other"});
    createAgent({"person", "--mode", "human"});
    createAgent({"rules", "--mode", "platform"});
    createAgent({"picker", "--mode", "agent", "--allow", "small,big"});

    // default: the agent's default tier, even without --tier.
    json d = startDecision(submit({"--playbook", quick, "--agent", "plain"}));
    EXPECT_EQ(d["chooser"], "default");
    EXPECT_EQ(d["chosen_tier"], "other");
    EXPECT_EQ(d["trigger"], "session_start");
    // Every tier the agent may use is an alternative with its estimated cost: 30 min at its price.
    ASSERT_EQ(d["alternatives"].size(), 3u) << d.dump();
    for (const auto &alt : d["alternatives"]) {
        if (alt["tier"] == "big") {
            EXPECT_EQ(alt["estimated_cost_micros"], 100000) << alt;   // $0.20/h for 30 min
        }
        if (alt["tier"] == "other") {
            EXPECT_EQ(alt["note"], "chosen");
        }
    }
    // human: the submitter's tier, else the default.
    d = startDecision(submit({"--playbook", quick, "--agent", "person", "--tier", "big"}));
    EXPECT_EQ(d["chooser"], "human");
    EXPECT_EQ(d["chosen_tier"], "big");
    EXPECT_EQ(d["who"], "") << "who is only for overrides";
    d = startDecision(submit({"--playbook", quick, "--agent", "person"}));
    EXPECT_EQ(d["chooser"], "default");
    EXPECT_EQ(d["chosen_tier"], "small");
    // platform: the first matching rule, on tags, on goal words and on the playbook.
    d = startDecision(submit({"--playbook", quick, "--agent", "rules", "--tag", "build"}));
    EXPECT_EQ(d["chooser"], "platform");
    EXPECT_EQ(d["rule"], "builds");
    EXPECT_EQ(d["chosen_tier"], "big");
    d = startDecision(submit({"--playbook", quick, "--agent", "rules", "--goal", "Compile the kernel"}));
    EXPECT_EQ(d["rule"], "compiling");
    EXPECT_EQ(d["chosen_tier"], "big");
    d = startDecision(submit({"--playbook", playbook("probe", kQuick).string(), "--agent", "rules"}));
    EXPECT_EQ(d["rule"], "probes");
    EXPECT_EQ(d["chosen_tier"], "other");
    d = startDecision(submit({"--playbook", quick, "--agent", "rules"}));
    EXPECT_EQ(d["chooser"], "default") << "no rule matches: the default tier";
    EXPECT_EQ(d["chosen_tier"], "small");
    // agent: starts on the default tier; the agent may ask for another later.
    const std::string picked = submit({"--playbook", quick, "--agent", "picker"});
    d = startDecision(picked);
    EXPECT_EQ(d["chooser"], "default");
    EXPECT_NE(d["reason"].get<std::string>().find("request_environment"), std::string::npos) << d;
    const CliResult shown = cli({"show", picked, "--output", "json"});
    EXPECT_EQ(json::parse(shown.out).value("tier_chooser", ""), "default") << shown.out;
    EXPECT_EQ(json::parse(shown.out).value("submitted_by", ""), osUser()) << shown.out;
}

TEST_F(Decisions, AgentRequestsWithinItsBoundAreGrantedAndBeyondRefused)
{
    createAgent({"picker", "--mode", "agent", "--allow", "small,big"});
    ASSERT_EQ(cli({"agents", "records", "set", "picker", "repos/paddock", R"({"branch": "main"})"}).exitCode, 0);
    ASSERT_EQ(cli({"agents", "records", "set", "picker", "notes", R"("keep it short")"}).exitCode, 0);
    const auto steps = playbook("asks", R"(
[[step]]
tool = "read_records"
prefix = "repos/"
expect_content = "main"

[[step]]
tool = "write_file"
path = "kept.txt"
content = "made on the small tier"

[[step]]
tool = "request_environment"
tier = "big"
reason = "the build needs memory"

[[step]]
tool = "run_command"
command = "cat kept.txt"
expect_stdout = "made on the small tier"

[[step]]
tool = "request_environment"
tier = "other"
reason = "just curious"
expect_error = "not among agent 'picker''s allowed tiers"
)");
    const std::string id = submitAndFollow({"--playbook", steps.string(), "--agent", "picker"});
    ASSERT_FALSE(id.empty());
    const json events = eventsOf(id);
    const auto decisions = ofKind(events, "env.decision");
    ASSERT_EQ(decisions.size(), 3u) << events.dump(1);
    EXPECT_EQ(decisions[1]["trigger"], "request_environment");
    EXPECT_EQ(decisions[1]["chooser"], "agent");
    EXPECT_EQ(decisions[1]["verdict"], "granted");
    EXPECT_EQ(decisions[1]["chosen_tier"], "big");
    EXPECT_EQ(decisions[2]["verdict"], "refused");
    EXPECT_EQ(decisions[2]["chosen_tier"], "big") << "a refusal keeps the tier";
    const auto moves = ofKind(events, "sandbox.moved");
    ASSERT_EQ(moves.size(), 1u) << events.dump(1);
    EXPECT_EQ(moves[0]["to_tier"], "big");
    // read_records returned the records under the prefix only.
    const auto results = ofKind(events, "tool.result");
    ASSERT_FALSE(results.empty());
    EXPECT_EQ(results[0]["records"]["repos/paddock"]["branch"], "main") << results[0];
    EXPECT_FALSE(results[0]["records"].contains("notes")) << results[0];
    const CliResult shown = cli({"show", id, "--output", "json"});
    EXPECT_EQ(json::parse(shown.out).value("tier_chooser", ""), "agent") << shown.out;
    EXPECT_EQ(json::parse(shown.out).value("tier", ""), "big") << shown.out;
}

TEST_F(Decisions, HybridRequestBeyondItsBoundBecomesATierEscalationItem)
{
    // The shipped demo playbook asks for standard; here the tiers are small < other < big.
    createAgent({"mixer", "--mode", "hybrid", "--default-tier", "small"});
    const std::string id = submit({"--playbook", playbook("escalates", R"(
[[step]]
tool = "write_file"
path = "plan.txt"
content = "written on small"

[[step]]
tool = "request_environment"
tier = "big"
reason = "the link step needs memory"
expect_error = "rejected by"

[[step]]
tool = "run_command"
command = "cat plan.txt"
expect_stdout = "written on small"
)").string(), "--agent", "mixer"});
    ASSERT_FALSE(id.empty());
    json item;
    for (int i = 0; i < 300 && item.is_null(); ++i) {
        const CliResult listed = cli({"reviews", "ls", "--kind", "tier_escalation", "--output", "json"});
        ASSERT_EQ(listed.exitCode, 0) << listed.err;
        for (const auto &candidate : json::parse(listed.out)) {
            if (candidate["session_id"] == id)
                item = candidate;
        }
        if (item.is_null())
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_FALSE(item.is_null()) << "no tier_escalation item for " << id << ": " << eventsOf(id).dump(1);
    EXPECT_EQ(item["summary"], "move session " + id + " from tier small to tier big");
    EXPECT_EQ(item["requester"], osUser());
    EXPECT_EQ(item["cost_micros"], 180000) << "$0.18/h more on big";
    EXPECT_EQ(json::parse(cli({"show", id, "--output", "json"}).out)["status"], "waiting_approval");
    const auto requested = ofKind(eventsOf(id), "env.decision");
    ASSERT_EQ(requested.size(), 2u);
    EXPECT_EQ(requested[1]["verdict"], "needs_review");
    EXPECT_EQ(requested[1]["max_tier_without_review"], "small");
    EXPECT_EQ(decisions({"--session", id, "--outcome", "needs_review"}).size(), 1u);

    // Its submitter cannot approve it, but may withdraw it; the session goes on where it was.
    const std::string reviewId = item["id"];
    const CliResult self = cli({"reviews", "approve", reviewId, "--reason", "mine"});
    EXPECT_NE(self.exitCode, 0);
    EXPECT_NE(self.err.find("nobody approves their own request"), std::string::npos) << self.err;
    const CliResult rejected = cli({"reviews", "reject", reviewId, "--reason", "small will do"});
    ASSERT_EQ(rejected.exitCode, 0) << rejected.err;
    json final;
    for (int i = 0; i < 300; ++i) {
        final = json::parse(cli({"show", id, "--output", "json"}).out);
        if (final["status"] == "succeeded" || final["status"] == "failed")
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(final["status"], "succeeded") << final.dump();
    EXPECT_EQ(final["tier"], "small");
    const json events = eventsOf(id);
    EXPECT_TRUE(ofKind(events, "sandbox.moved").empty());
    for (const auto &result : ofKind(events, "tool.result")) {
        if (result["name"] == "request_environment") {
            EXPECT_EQ(result["error"], "tier big was rejected by " + osUser() + ": small will do; the session stays on "
                                       "tier small");
        }
    }
}

TEST_F(Decisions, OutcomesComeFromTheSandboxSamples)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "the pool needs root for cgroup limits (no OOM kill without them)";
    // ok: holds about half of the small tier's 128 MiB for a few samples.
    const std::string ok = submitAndFollow({"--playbook", playbook("holds", R"(
[[step]]
tool = "run_command"
command = "python3 -c 'import time; b = bytearray(56 * 1024 * 1024); time.sleep(3.5)'"
)").string(), "--tier", "small"});
    // over_allocated: idles on the big tier.
    const std::string idle = submitAndFollow({"--playbook", playbook("idles", R"(
[[step]]
tool = "run_command"
command = "sleep 3.5"
)").string(), "--tier", "big"});
    // oom: allocates past the small tier's limit.
    const std::string oom = submitAndFollow({"--playbook", playbook("fills", R"(
[[step]]
tool = "run_command"
command = "sleep 1.5; exec tail /dev/zero"
)").string(), "--tier", "small"}, 7);
    ASSERT_FALSE(ok.empty());
    ASSERT_FALSE(idle.empty());
    ASSERT_FALSE(oom.empty());

    // The outcome is recorded with the release, which follows the session's end.
    auto outcomeOf = [&](const std::string &id) {
        for (int i = 0; i < 100; ++i) {
            const auto outcomes = ofKind(eventsOf(id), "env.outcome");
            if (!outcomes.empty())
                return outcomes.front();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        ADD_FAILURE() << "no env.outcome for " << id << ": " << eventsOf(id).dump(1);
        return json::object();
    };
    const json okOutcome = outcomeOf(ok);
    EXPECT_EQ(okOutcome["outcome"], "ok") << okOutcome;
    EXPECT_GT(okOutcome["peak_memory_bytes"].get<int64_t>(), 32 * 1024 * 1024) << okOutcome;
    EXPECT_EQ(okOutcome["memory_limit_bytes"], 128 * 1024 * 1024) << okOutcome;
    EXPECT_GE(okOutcome["samples"].get<int>(), 1) << okOutcome;
    const json idleOutcome = outcomeOf(idle);
    EXPECT_EQ(idleOutcome["outcome"], "over_allocated") << idleOutcome;
    EXPECT_EQ(idleOutcome["fitting_tier"], "small") << idleOutcome;
    EXPECT_LT(idleOutcome["mean_cpu_fraction"].get<double>(), 0.1) << idleOutcome;
    const json oomOutcome = outcomeOf(oom);
    EXPECT_EQ(oomOutcome["outcome"], "oom") << oomOutcome;
    EXPECT_EQ(oomOutcome["fitting_tier"], "other") << oomOutcome;
    EXPECT_EQ(oomOutcome["decision_id"], startDecision(oom)["id"]);

    // ListDecisions filters, newest first; the index row carries the outcome.
    auto listed = decisions({"--outcome", "over_allocated"});
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["session_id"], idle);
    EXPECT_EQ(listed[0]["fitting_tier"], "small");
    listed = decisions({"--tier", "small"});
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0]["session_id"], oom) << "newest first";
    EXPECT_EQ(listed[1]["session_id"], ok);
    listed = decisions({"--session", ok});
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["chooser"], "human");
    EXPECT_EQ(decisions({"--chooser", "platform"}).size(), 0u);
    EXPECT_EQ(decisions({"--agent", "default"}).size(), 3u);
    EXPECT_EQ(decisions({"--limit", "2"}).size(), 2u);
    const CliResult badFilter = cli({"decisions", "ls", "--outcome", "meh"});
    EXPECT_EQ(badFilter.exitCode, 5);
    EXPECT_NE(badFilter.err.find("unknown outcome 'meh'"), std::string::npos) << badFilter.err;

    // GetDecisionStats counts per tier.
    const CliResult stats = cli({"decisions", "stats", "--by", "tier", "--output", "json"});
    ASSERT_EQ(stats.exitCode, 0) << stats.err;
    std::map<std::string, json> byTier;
    for (auto &line : jsonLines(stats.out))
        byTier[line["tier"]] = line;
    ASSERT_EQ(byTier.size(), 2u) << stats.out;
    EXPECT_EQ(byTier["small"]["total"], 2);
    EXPECT_EQ(byTier["small"]["ok"], 1);
    EXPECT_EQ(byTier["small"]["oom"], 1);
    EXPECT_EQ(byTier["big"]["over_allocated"], 1);
    EXPECT_EQ(byTier["big"]["pending"], 0);
    const CliResult byChooser = cli({"decisions", "stats", "--by", "chooser"});
    ASSERT_EQ(byChooser.exitCode, 0) << byChooser.err;
    EXPECT_NE(byChooser.out.find("human"), std::string::npos) << byChooser.out;
}

} // namespace
} // namespace paddock::test
