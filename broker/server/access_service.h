#pragma once
// AccessService (proto/paddock/v1/access.proto): who the caller is, bearer tokens for TCP callers,
// the audit log (docs/permissions.md), and named secrets (docs/secrets.md). The checks themselves
// live in Access (access.h), which every service shares.
//
// Threads: methods run on gRPC's callback threads and do their (short) work inline.

#include "broker/server/service_context.h"

#include "paddock/v1/access.grpc.pb.h"

namespace paddock::server {

class AccessService final : public v1::AccessService::CallbackService {
public:
    explicit AccessService(ServiceContext &context) : m_context(context) {}

    grpc::ServerUnaryReactor *WhoAmI(grpc::CallbackServerContext *context, const v1::WhoAmIRequest *request,
                                     v1::Principal *response) override;
    grpc::ServerUnaryReactor *CreateToken(grpc::CallbackServerContext *context, const v1::CreateTokenRequest *request,
                                          v1::CreatedToken *response) override;
    grpc::ServerUnaryReactor *ListTokens(grpc::CallbackServerContext *context, const v1::ListTokensRequest *request,
                                         v1::ListTokensResponse *response) override;
    grpc::ServerUnaryReactor *RevokeToken(grpc::CallbackServerContext *context, const v1::RevokeTokenRequest *request,
                                          v1::TokenInfo *response) override;
    grpc::ServerUnaryReactor *ListAudit(grpc::CallbackServerContext *context, const v1::ListAuditRequest *request,
                                        v1::ListAuditResponse *response) override;

    grpc::ServerUnaryReactor *SetSecret(grpc::CallbackServerContext *context, const v1::SetSecretRequest *request,
                                        v1::SetSecretResponse *response) override;
    grpc::ServerUnaryReactor *ListSecrets(grpc::CallbackServerContext *context, const v1::ListSecretsRequest *request,
                                          v1::ListSecretsResponse *response) override;
    grpc::ServerUnaryReactor *DeleteSecret(grpc::CallbackServerContext *context,
                                           const v1::DeleteSecretRequest *request,
                                           v1::DeleteSecretResponse *response) override;

private:
    ServiceContext &m_context;
};

} // namespace paddock::server
