#include "cli/broker_call.h"

#include "cli/exit_codes.h"

namespace paddock::cli {

int BrokerCall::fail(std::ostream &err, std::string_view action, const grpc::Status &status,
                     std::string_view hint) const
{
    const bool isConnected = connected();
    err << "paddockctl: " << describeFailure(action, status, isConnected, shownAddress, hint) << "\n";
    return toInt(exitCodeFor(status.error_code(), isConnected));
}

} // namespace paddock::cli
