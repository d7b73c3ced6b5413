#include "common/result.h"

namespace paddock {

const char *errorCodeName(ErrorCode code)
{
    switch (code) {
    case ErrorCode::InvalidArgument: return "invalid_argument";
    case ErrorCode::NotFound: return "not_found";
    case ErrorCode::AlreadyExists: return "already_exists";
    case ErrorCode::FailedPrecondition: return "failed_precondition";
    case ErrorCode::Aborted: return "aborted";
    case ErrorCode::OutOfRange: return "out_of_range";
    case ErrorCode::Unavailable: return "unavailable";
    case ErrorCode::DeadlineExceeded: return "deadline_exceeded";
    case ErrorCode::ResourceExhausted: return "resource_exhausted";
    case ErrorCode::PermissionDenied: return "permission_denied";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::Unimplemented: return "unimplemented";
    case ErrorCode::DataLoss: return "data_loss";
    case ErrorCode::Internal: return "internal";
    }
    return "unknown";
}

} // namespace paddock
