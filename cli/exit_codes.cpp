#include "cli/exit_codes.h"

namespace paddock::cli {
namespace {

// A hint names its fix as a `command`; when the broker's message already carries that command the
// hint would only repeat it.
bool hintAlreadyGiven(std::string_view hint, std::string_view detail)
{
    const auto open = hint.find('`');
    const auto close = open == std::string_view::npos ? open : hint.find('`', open + 1);
    if (close == std::string_view::npos)
        return false;
    std::string_view command = hint.substr(open + 1, close - open - 1);
    // Compare the command word and its subcommand only: "paddockctl ls", "paddockctl show".
    const auto secondSpace = command.find(' ', command.find(' ') + 1);
    if (secondSpace != std::string_view::npos)
        command = command.substr(0, secondSpace);
    return detail.find(command) != std::string_view::npos;
}

} // namespace

ExitCode exitCodeFor(grpc::StatusCode code, bool connected)
{
    switch (code) {
    case grpc::StatusCode::OK:
        return ExitCode::Ok;
    case grpc::StatusCode::NOT_FOUND:
        return ExitCode::NotFound;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
        return ExitCode::InvalidArgument;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
        return ExitCode::Conflict;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
        return ExitCode::Denied;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        // A deadline that passes before any connection is the same as nobody answering.
        return connected ? ExitCode::Error : ExitCode::BrokerUnreachable;
    default:
        return ExitCode::Error;
    }
}

std::string_view exitCodeHelp()
{
    return "Exit codes:\n"
           "  0  ok\n"
           "  1  other error\n"
           "  2  usage error (bad flags or arguments)\n"
           "  3  not found (unknown session id, playbook or model)\n"
           "  4  broker unreachable\n"
           "  5  invalid argument (malformed playbook, bad seq, ...)\n"
           "  6  failed precondition or conflict (e.g. resuming a finished session)\n"
           "  7  the followed session ended failed or cancelled\n"
           "  8  denied: your role does not allow it, or the token is missing, wrong, revoked or expired\n"
           "  130  interrupted (Ctrl-C) while following\n";
}

std::string unreachableMessage(std::string_view address)
{
    return "no broker at " + std::string(address)
         + ": start it with `paddockd` or `scripts/run`, or pass --broker ADDR (or set PADDOCK_BROKER)";
}

std::string describeFailure(std::string_view action, const grpc::Status &status, bool connected,
                            std::string_view address, std::string_view hint)
{
    std::string message(action);
    message += ": ";
    const grpc::StatusCode code = status.error_code();
    if (!connected && (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED))
        return message + unreachableMessage(address);

    switch (code) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        message += "the broker at " + std::string(address)
                 + " did not answer in time; check its log, or raise --timeout";
        return message;
    case grpc::StatusCode::UNAVAILABLE:
        message += "lost the broker at " + std::string(address) + " (" + status.error_message()
                 + "); check that paddockd is still running and try again";
        return message;
    case grpc::StatusCode::UNIMPLEMENTED:
        message += "the broker at " + std::string(address)
                 + " does not implement this call; upgrade paddockd to the version of paddockctl";
        return message;
    default:
        break;
    }
    std::string detail = status.error_message();
    if (detail.empty())
        detail = "the broker gave no reason (status " + std::to_string(static_cast<int>(code)) + ")";
    // The broker often says what was being done itself ("cannot resume session s1: it is
    // succeeded"); saying it twice reads like a stutter.
    if (detail.starts_with(action))
        message = detail;
    else
        message += detail;
    if (!hint.empty() && !hintAlreadyGiven(hint, detail)) {
        while (!message.empty() && message.back() == '.')
            message.pop_back();
        message += "; ";
        message += hint;
    }
    return message;
}

} // namespace paddock::cli
