#pragma once
// Errors travel as values: every fallible call returns Result<T>. The codes mirror gRPC's status
// codes so the servers translate them one to one at the edge.

#include <expected>
#include <string>
#include <utility>

namespace paddock {

enum class ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Aborted,            // a compare-and-append lost the race: re-read and decide again
    OutOfRange,
    Unavailable,        // retry later: a peer or resource is down
    DeadlineExceeded,
    ResourceExhausted,
    PermissionDenied,
    Cancelled,
    Unimplemented,
    DataLoss,           // stored bytes are damaged or missing: name what, never guess
    Internal,
};

struct Error {
    ErrorCode code = ErrorCode::Internal;
    std::string message;   // says what went wrong and what to do about it
};

template <typename T>
using Result = std::expected<T, Error>;

using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(ErrorCode code, std::string message)
{
    return std::unexpected(Error{code, std::move(message)});
}

const char *errorCodeName(ErrorCode code);

} // namespace paddock
