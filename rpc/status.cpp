#include "rpc/status.h"

namespace paddock::rpc {

grpc::StatusCode toGrpcCode(ErrorCode code)
{
    switch (code) {
    case ErrorCode::InvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::AlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::FailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::Aborted: return grpc::StatusCode::ABORTED;
    case ErrorCode::OutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case ErrorCode::Unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::DeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::ResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::PermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::Cancelled: return grpc::StatusCode::CANCELLED;
    case ErrorCode::Unimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorCode::DataLoss: return grpc::StatusCode::DATA_LOSS;
    case ErrorCode::Internal: return grpc::StatusCode::INTERNAL;
    }
    return grpc::StatusCode::UNKNOWN;
}

grpc::Status toGrpcStatus(const Error &error)
{
    return grpc::Status(toGrpcCode(error.code), error.message);
}

ErrorCode fromGrpcCode(grpc::StatusCode code)
{
    switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return ErrorCode::InvalidArgument;
    case grpc::StatusCode::NOT_FOUND: return ErrorCode::NotFound;
    case grpc::StatusCode::ALREADY_EXISTS: return ErrorCode::AlreadyExists;
    case grpc::StatusCode::FAILED_PRECONDITION: return ErrorCode::FailedPrecondition;
    case grpc::StatusCode::ABORTED: return ErrorCode::Aborted;
    case grpc::StatusCode::OUT_OF_RANGE: return ErrorCode::OutOfRange;
    case grpc::StatusCode::UNAVAILABLE: return ErrorCode::Unavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return ErrorCode::DeadlineExceeded;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ErrorCode::ResourceExhausted;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: return ErrorCode::PermissionDenied;
    case grpc::StatusCode::CANCELLED: return ErrorCode::Cancelled;
    case grpc::StatusCode::UNIMPLEMENTED: return ErrorCode::Unimplemented;
    case grpc::StatusCode::DATA_LOSS: return ErrorCode::DataLoss;
    default: return ErrorCode::Internal;
    }
}

} // namespace paddock::rpc
