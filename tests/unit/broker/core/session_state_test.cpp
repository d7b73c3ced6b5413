// The fold from events to session state, on plain event lists.
#include "broker/core/session_state.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace paddock::core {
namespace {

class Log {
public:
    Log &add(std::string kind, std::string payload = "{}", int64_t costMicros = 0)
    {
        const int64_t seq = static_cast<int64_t>(m_events.size()) + 1;
        m_events.push_back(Event{"s1", seq, 1000 + seq, std::move(kind), std::move(payload), costMicros});
        return *this;
    }
    Log &status(const std::string &name, const std::string &reason = "")
    {
        return add(kind::StateChanged, R"({"status":")" + name + R"(","reason":")" + reason + R"("})");
    }
    SessionState fold() const { return foldEvents(m_events); }

private:
    std::vector<Event> m_events;
};

Log created()
{
    Log log;
    log.add(kind::SessionCreated, R"({"agent":"builder","goal":"compile hello","model":"scripted",
        "playbook":"hello-c","tier":"lite","tags":["demo", 7, "ci"]})");
    return log;
}

TEST(SessionStateTest, CreatedFillsIdentityAndQueues)
{
    const auto state = created().fold();
    EXPECT_EQ(state.id, "s1");
    EXPECT_EQ(state.agent, "builder");
    EXPECT_EQ(state.goal, "compile hello");
    EXPECT_EQ(state.model, "scripted");
    EXPECT_EQ(state.playbook, "hello-c");
    EXPECT_EQ(state.tier, "lite");
    EXPECT_EQ(state.tags, (std::vector<std::string>{"demo", "ci"}));   // non-strings skipped
    EXPECT_EQ(state.status, SessionStatus::Queued);
    EXPECT_EQ(state.createdUnixMs, 1001);
    EXPECT_EQ(state.lastSeq, 1);
    EXPECT_EQ(state.lastEventKind, kind::SessionCreated);
    EXPECT_TRUE(state.needsWork());
}

TEST(SessionStateTest, StatusTransitions)
{
    auto log = created();
    log.status("running");
    EXPECT_EQ(log.fold().status, SessionStatus::Running);
    EXPECT_TRUE(log.fold().needsWork());
    log.status("waiting_approval", "bulk change");
    EXPECT_EQ(log.fold().status, SessionStatus::WaitingApproval);
    EXPECT_EQ(log.fold().statusReason, "bulk change");
    EXPECT_FALSE(log.fold().needsWork());
    log.status("paused");
    EXPECT_EQ(log.fold().status, SessionStatus::Paused);
    EXPECT_FALSE(log.fold().needsWork());
    log.status("running", "resumed");
    log.status("no_such_status", "ignored");
    EXPECT_EQ(log.fold().status, SessionStatus::Running);
    EXPECT_EQ(log.fold().statusReason, "resumed");   // an unknown status changes nothing
}

TEST(SessionStateTest, TerminalIsFinal)
{
    for (const char *terminal : {"succeeded", "failed", "cancelled"}) {
        auto log = created();
        log.status("running").status(terminal, "done").status("running").status("paused");
        const auto state = log.fold();
        EXPECT_EQ(statusName(state.status), std::string(terminal));
        EXPECT_TRUE(isTerminal(state.status));
        EXPECT_FALSE(state.needsWork());
        EXPECT_EQ(state.lastSeq, 5);
    }
}

TEST(SessionStateTest, SandboxClaimedAndReleased)
{
    auto log = created();
    log.status("running");
    log.add(kind::SandboxClaimed, R"({"sandbox_id":"sb-1","pool":"local","tier":"standard"})");
    auto state = log.fold();
    EXPECT_EQ(state.sandboxId, "sb-1");
    EXPECT_EQ(state.pool, "local");
    EXPECT_EQ(state.tier, "standard");

    // A finished session that still holds a sandbox needs a worker to give it back.
    log.status("succeeded");
    EXPECT_TRUE(log.fold().needsWork());
    log.add(kind::SandboxReleased, R"({"sandbox_id":"sb-1"})");
    state = log.fold();
    EXPECT_TRUE(state.sandboxId.empty());
    EXPECT_FALSE(state.needsWork());
}

TEST(SessionStateTest, SandboxFailedClearsTheSandbox)
{
    auto log = created();
    log.add(kind::SandboxClaimed, R"({"sandbox_id":"sb-2","pool":"p"})");
    log.add(kind::SandboxFailed, R"({"sandbox_id":"sb-2","reason":"oom_killed"})");
    const auto state = log.fold();
    EXPECT_TRUE(state.sandboxId.empty());
    EXPECT_EQ(state.tier, "lite");   // a claim without a tier keeps the old one
}

TEST(SessionStateTest, StepsCountToolResults)
{
    auto log = created();
    log.add(kind::ToolCall, R"({"tool":"run_command"})");
    log.add(kind::ToolResult, R"({"exit_code":0})");
    log.add(kind::ToolCall, R"({"tool":"read_file"})");
    log.add(kind::ToolResult, R"({"exit_code":1})");
    EXPECT_EQ(log.fold().steps, 2);
}

TEST(SessionStateTest, CostSumsOverEveryKind)
{
    auto log = created();
    log.add(kind::ModelResponse, "{}", 1500);
    log.add(kind::Cost, R"({"what":"sandbox"})", 250);
    log.add("some.future.kind", "{}", 5);
    const auto state = log.fold();
    EXPECT_EQ(state.costMicros, 1755);
    EXPECT_EQ(state.lastEventKind, "some.future.kind");
    EXPECT_EQ(state.updatedUnixMs, 1004);
}

TEST(SessionStateTest, UnreadablePayloadIsSkipped)
{
    auto log = created();
    log.add(kind::StateChanged, "not json");
    log.add(kind::SandboxClaimed, "[1,2]");
    const auto state = log.fold();
    EXPECT_EQ(state.status, SessionStatus::Queued);
    EXPECT_TRUE(state.sandboxId.empty());
    EXPECT_EQ(state.lastSeq, 3);
}

// An approved egress_exception adds its host to the session's approved hosts, once, with the
// review that approved it; a rejected or expired one, a decision for another item and a replayed
// decision add nothing.
TEST(SessionStateTest, ApprovedEgressExceptionsAddHostsToTheSession)
{
    auto log = created();
    log.status("running");
    auto ask = [&](const std::string &review, const std::string &host) {
        log.add(kind::ApprovalRequested, R"({"review_id":")" + review + R"(","kind":"egress_exception","summary":"reach )"
                                             + host + R"("})");
    };
    auto decide = [&](const std::string &review, const std::string &host, bool approved) {
        log.add(kind::ApprovalDecided, R"({"review_id":")" + review + R"(","kind":"egress_exception","approved":)"
                                           + (approved ? "true" : "false") + R"(,"host":")" + host
                                           + R"(","decider":"alice","reason":"ok"})");
    };
    ask("r-1", "other.test");
    EXPECT_TRUE(log.fold().approvedHosts.empty());   // asking grants nothing
    decide("r-1", "other.test", true);
    auto state = log.fold();
    EXPECT_EQ(state.status, SessionStatus::Running);
    EXPECT_EQ(state.approvedHosts, (std::vector<ApprovedHost>{{"other.test", "r-1"}}));

    decide("r-1", "other.test", true);                 // a replay: r-1 is no longer pending
    decide("r-9", "sneaky.test", true);                // never requested
    ask("r-2", "rejected.test");
    decide("r-2", "rejected.test", false);
    ask("r-3", "other.test");
    decide("r-3", "other.test", true);                 // the same host again: kept once, first review
    ask("r-4", "169.254.169.254");
    decide("r-4", "169.254.169.254", true);            // recorded; the pool refuses it whatever it says
    state = log.fold();
    EXPECT_EQ(state.approvedHosts,
              (std::vector<ApprovedHost>{{"other.test", "r-1"}, {"169.254.169.254", "r-4"}}));
    // Secrets and hosts are separate grants.
    EXPECT_TRUE(state.secrets.empty());
    // Other kinds add no host.
    log.add(kind::ApprovalRequested, R"({"review_id":"r-5","kind":"secret_access","summary":"x"})");
    log.add(kind::ApprovalDecided, R"({"review_id":"r-5","kind":"secret_access","approved":true,"secret":"TOKEN"})");
    EXPECT_EQ(log.fold().approvedHosts.size(), 2u);
}

TEST(SessionStateTest, StatusNamesRoundTrip)
{
    for (auto status : {SessionStatus::Queued, SessionStatus::Running, SessionStatus::WaitingApproval,
                        SessionStatus::Paused, SessionStatus::Succeeded, SessionStatus::Failed,
                        SessionStatus::Cancelled}) {
        EXPECT_EQ(statusFromName(statusName(status)), status);
    }
    EXPECT_FALSE(statusFromName("bogus").has_value());
}

} // namespace
} // namespace paddock::core
