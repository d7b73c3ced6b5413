#include "cli/exit_codes.h"

namespace paddock::cli {

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
    message += status.error_message().empty() ? std::string("the broker gave no reason (status ")
                                                    + std::to_string(static_cast<int>(code)) + ")"
                                              : status.error_message();
    if (!hint.empty()) {
        message += "; ";
        message += hint;
    }
    return message;
}

} // namespace paddock::cli
