#include "cli/exit_codes.h"

#include <gtest/gtest.h>

namespace paddock::cli {
namespace {

using grpc::StatusCode;

TEST(ExitCodes, MapGrpcStatusToTheDocumentedCodes)
{
    EXPECT_EQ(exitCodeFor(StatusCode::OK, true), ExitCode::Ok);
    EXPECT_EQ(exitCodeFor(StatusCode::NOT_FOUND, true), ExitCode::NotFound);
    EXPECT_EQ(exitCodeFor(StatusCode::INVALID_ARGUMENT, true), ExitCode::InvalidArgument);
    EXPECT_EQ(exitCodeFor(StatusCode::OUT_OF_RANGE, true), ExitCode::InvalidArgument);
    EXPECT_EQ(exitCodeFor(StatusCode::FAILED_PRECONDITION, true), ExitCode::Conflict);
    EXPECT_EQ(exitCodeFor(StatusCode::ALREADY_EXISTS, true), ExitCode::Conflict);
    EXPECT_EQ(exitCodeFor(StatusCode::ABORTED, true), ExitCode::Conflict);
    EXPECT_EQ(exitCodeFor(StatusCode::INTERNAL, true), ExitCode::Error);
    EXPECT_EQ(exitCodeFor(StatusCode::PERMISSION_DENIED, true), ExitCode::Denied);
    EXPECT_EQ(exitCodeFor(StatusCode::UNAUTHENTICATED, true), ExitCode::Denied);
    EXPECT_EQ(exitCodeFor(StatusCode::UNIMPLEMENTED, true), ExitCode::Error);
}

TEST(ExitCodes, UnavailableIsUnreachableOnlyWithoutAConnection)
{
    EXPECT_EQ(exitCodeFor(StatusCode::UNAVAILABLE, false), ExitCode::BrokerUnreachable);
    EXPECT_EQ(exitCodeFor(StatusCode::DEADLINE_EXCEEDED, false), ExitCode::BrokerUnreachable);
    // The broker answered UNAVAILABLE itself (a pool is down): that is not "no broker".
    EXPECT_EQ(exitCodeFor(StatusCode::UNAVAILABLE, true), ExitCode::Error);
    EXPECT_EQ(exitCodeFor(StatusCode::DEADLINE_EXCEEDED, true), ExitCode::Error);
}

TEST(ExitCodes, NumbersAreTheContract)
{
    EXPECT_EQ(toInt(ExitCode::Usage), 2);
    EXPECT_EQ(toInt(ExitCode::NotFound), 3);
    EXPECT_EQ(toInt(ExitCode::BrokerUnreachable), 4);
    EXPECT_EQ(toInt(ExitCode::InvalidArgument), 5);
    EXPECT_EQ(toInt(ExitCode::Conflict), 6);
    EXPECT_EQ(toInt(ExitCode::SessionFailed), 7);
    for (const char *line : {"0  ok", "2  usage", "3  not found", "4  broker unreachable", "5  invalid argument",
                             "6  failed precondition", "7  the followed session"})
        EXPECT_NE(exitCodeHelp().find(line), std::string_view::npos) << line;
}

TEST(ExitCodes, UnreachableMessageSaysHowToStartTheBroker)
{
    const std::string message =
        describeFailure("cannot list sessions", grpc::Status(StatusCode::UNAVAILABLE, "connect failed"), false,
                        "unix:/tmp/b.sock");
    EXPECT_EQ(message.rfind("cannot list sessions: no broker at unix:/tmp/b.sock", 0), 0u) << message;
    EXPECT_NE(message.find("paddockd"), std::string::npos);
    EXPECT_NE(message.find("scripts/run"), std::string::npos);
    EXPECT_NE(message.find("--broker"), std::string::npos);
}

TEST(ExitCodes, BrokerMessageIsPrefixedWithTheActionAndFollowedByTheHint)
{
    const std::string message = describeFailure("cannot show session s1",
                                                grpc::Status(StatusCode::NOT_FOUND, "no session s1"), true,
                                                "unix:/tmp/b.sock", "`paddockctl ls` lists sessions");
    EXPECT_EQ(message, "cannot show session s1: no session s1; `paddockctl ls` lists sessions");
}

TEST(ExitCodes, NothingIsSaidTwice)
{
    // The broker already named the action: no second "cannot resume session s1".
    EXPECT_EQ(describeFailure("cannot resume session s1",
                              grpc::Status(StatusCode::FAILED_PRECONDITION, "cannot resume session s1: it is succeeded"),
                              true, "a:1", "only a paused session can be resumed"),
              "cannot resume session s1: it is succeeded; only a paused session can be resumed");
    // The broker already gave the fix the hint would give.
    EXPECT_EQ(describeFailure("cannot show session s1",
                              grpc::Status(StatusCode::NOT_FOUND, "no session 's1': list sessions with `paddockctl ls`"),
                              true, "a:1", "check the id; `paddockctl ls` lists sessions"),
              "cannot show session s1: no session 's1': list sessions with `paddockctl ls`");
    // A trailing period does not end up before the semicolon.
    EXPECT_EQ(describeFailure("cannot submit", grpc::Status(StatusCode::INVALID_ARGUMENT, "bad step."), true, "a:1",
                              "fix p.toml"),
              "cannot submit: bad step; fix p.toml");
}

TEST(ExitCodes, DeadlineOnAConnectedBrokerSuggestsATimeout)
{
    const std::string message = describeFailure(
        "cannot list sessions", grpc::Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), true, "h:1");
    EXPECT_NE(message.find("--timeout"), std::string::npos) << message;
}

} // namespace
} // namespace paddock::cli
