#pragma once
// paddock::ErrorCode <-> gRPC status codes, one to one, for every gRPC edge (broker/server,
// broker/pool_client, pool/server, cli, app/client).

#include "common/result.h"

#include <grpcpp/support/status.h>

namespace paddock::rpc {

grpc::StatusCode toGrpcCode(ErrorCode code);
grpc::Status toGrpcStatus(const Error &error);
ErrorCode fromGrpcCode(grpc::StatusCode code);

} // namespace paddock::rpc
