#pragma once
// A client's way into paddockd: one stub per service over one channel. The broker serves four
// services (proto/paddock/v1): sessions and their logs, governance, operations and access; every
// client (paddockctl, the console, tests, benchmarks) holds all four, made together.
//
// Threads: gRPC stubs are thread-safe; a BrokerStubs may be shared by any threads that share its
// channel.

#include "paddock/v1/access.grpc.pb.h"
#include "paddock/v1/governance.grpc.pb.h"
#include "paddock/v1/operations.grpc.pb.h"
#include "paddock/v1/sessions.grpc.pb.h"

#include <grpcpp/channel.h>

#include <memory>
#include <type_traits>

namespace paddock::rpc {

struct BrokerStubs {
    explicit BrokerStubs(const std::shared_ptr<grpc::ChannelInterface> &channel)
        : sessions(v1::SessionService::NewStub(channel)),
          governance(v1::GovernanceService::NewStub(channel)),
          operations(v1::OperationsService::NewStub(channel)),
          access(v1::AccessService::NewStub(channel))
    {
    }

    // The callback interface that serves Interface's methods, for code that holds a method pointer
    // (&v1::XService::StubInterface::async_interface::Method) and must find its stub.
    template <typename Interface>
    Interface *async() const
    {
        if constexpr (std::is_same_v<Interface, v1::SessionService::StubInterface::async_interface>)
            return sessions->async();
        else if constexpr (std::is_same_v<Interface, v1::GovernanceService::StubInterface::async_interface>)
            return governance->async();
        else if constexpr (std::is_same_v<Interface, v1::OperationsService::StubInterface::async_interface>)
            return operations->async();
        else {
            static_assert(std::is_same_v<Interface, v1::AccessService::StubInterface::async_interface>,
                          "not a method of the broker's services");
            return access->async();
        }
    }

    std::unique_ptr<v1::SessionService::Stub> sessions;       // sessions, their logs and live streams
    std::unique_ptr<v1::GovernanceService::Stub> governance;  // agents, decisions, reviews, cost
    std::unique_ptr<v1::OperationsService::Stub> operations;  // pools, post-mortems, snapshots, shells
    std::unique_ptr<v1::AccessService::Stub> access;          // who am I, tokens, audit, secrets
};

} // namespace paddock::rpc
