// AccessService (proto/paddock/v1/access.proto): who the caller is, bearer tokens and the audit log
// (docs/permissions.md), and named secrets (docs/secrets.md): values go in and never come out.

#include "broker/server/access_service.h"

#include "broker/server/convert.h"
#include "common/clock.h"

namespace paddock::server {


namespace {

constexpr int64_t kMaxTokenTtlSeconds = int64_t{10} * 365 * 24 * 3600;
constexpr size_t kMaxDescriptionBytes = 256;

void toProto(const auth::TokenInfo &info, v1::TokenInfo *out)
{
    out->set_id(info.id);
    out->set_principal(info.principal);
    out->set_description(info.description);
    out->set_created_unix_ms(info.createdUnixMs);
    out->set_expires_unix_ms(info.expiresUnixMs);
    out->set_last_used_unix_ms(info.lastUsedUnixMs);
    out->set_revoked(info.revoked);
}

} // namespace

grpc::ServerUnaryReactor *AccessService::WhoAmI(grpc::CallbackServerContext *context, const v1::WhoAmIRequest *,
                                                v1::Principal *response)
{
    auto call = m_context.access.authorize(context, "WhoAmI");
    if (!call)
        return finishUnary(context, toGrpcStatus(call.error()));
    response->set_name(call->caller.principal);
    response->set_role(call->caller.role);
    response->set_via(call->caller.via);
    if (auto role = auth::parseRole(call->caller.role)) {
        for (auto &method : auth::permittedMethods(*role))
            response->add_permitted_methods(std::move(method));
    }
    return finishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *AccessService::CreateToken(grpc::CallbackServerContext *context,
                                                     const v1::CreateTokenRequest *request, v1::CreatedToken *response)
{
    auto call = m_context.access.authorize(context, "CreateToken", request->principal());
    if (!call)
        return finishUnary(context, toGrpcStatus(call.error()));
    auto refuse = [&](ErrorCode code, std::string message) {
        return finishUnary(context, m_context.access.conclude(*call, toGrpcStatus({code, std::move(message)})));
    };
    if (request->principal().empty())
        return refuse(ErrorCode::InvalidArgument, "no principal given: name the principal the token acts as (one of the "
                                                  "broker config's [[principal]] names)");
    if (auto known = m_context.access.principals().byName(request->principal()); !known)
        return refuse(ErrorCode::InvalidArgument, known.error().message);
    if (request->ttl_seconds() < 0 || request->ttl_seconds() > kMaxTokenTtlSeconds)
        return refuse(ErrorCode::InvalidArgument, "ttl_seconds " + std::to_string(request->ttl_seconds())
                                                      + " is out of range: give 0 (no expiry) up to "
                                                      + std::to_string(kMaxTokenTtlSeconds) + " (ten years)");
    if (request->description().size() > kMaxDescriptionBytes)
        return refuse(ErrorCode::InvalidArgument, "the description is longer than "
                                                      + std::to_string(kMaxDescriptionBytes) + " bytes; shorten it");
    auto created = auth::generateToken(request->principal(), request->description(), nowUnixMs(),
                                       request->ttl_seconds());
    call->target = created.record.info.id;
    // The token row and its audit record commit together.
    store::AppendRequest append;
    append.writes.push_back(store::tokenInsert(created.record));
    append.writes.push_back(m_context.access.auditOf(*call, "for " + request->principal()));
    auto written = m_context.store.appendSync(std::move(append));
    if (written) {
        m_context.access.tokens().add(created.record);
        toProto(created.record.info, response->mutable_info());
        response->set_token(created.token);
    }
    return finishUnary(context, m_context.access.conclude(*call, written ? grpc::Status::OK : toGrpcStatus(written.error())));
}

grpc::ServerUnaryReactor *AccessService::ListTokens(grpc::CallbackServerContext *context, const v1::ListTokensRequest *,
                                                    v1::ListTokensResponse *response)
{
    if (auto call = m_context.access.authorize(context, "ListTokens"); !call)
        return finishUnary(context, toGrpcStatus(call.error()));
    for (const auto &info : m_context.access.tokens().list())
        toProto(info, response->add_tokens());
    return finishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *AccessService::RevokeToken(grpc::CallbackServerContext *context,
                                                     const v1::RevokeTokenRequest *request, v1::TokenInfo *response)
{
    auto call = m_context.access.authorize(context, "RevokeToken", request->id());
    if (!call)
        return finishUnary(context, toGrpcStatus(call.error()));
    auto before = m_context.access.tokens().find(request->id());
    if (!before)
        return finishUnary(context, m_context.access.conclude(*call, toGrpcStatus(before.error())));
    // Revoked in memory first, so no call gets in while the row is written; undone if it cannot be.
    auto revoked = m_context.access.tokens().revoke(request->id());
    store::AppendRequest append;
    append.writes.push_back(store::tokenRevoke(request->id()));
    append.writes.push_back(m_context.access.auditOf(*call, "of " + before->principal));
    auto written = m_context.store.appendSync(std::move(append));
    if (!written)
        m_context.access.tokens().restore(*before);
    else
        toProto(*revoked, response);
    return finishUnary(context, m_context.access.conclude(*call, written ? grpc::Status::OK : toGrpcStatus(written.error())));
}

grpc::ServerUnaryReactor *AccessService::ListAudit(grpc::CallbackServerContext *context,
                                                   const v1::ListAuditRequest *request, v1::ListAuditResponse *response)
{
    if (auto call = m_context.access.authorize(context, "ListAudit"); !call)
        return finishUnary(context, toGrpcStatus(call.error()));
    store::AuditQuery query{request->principal(), request->method(), request->from_unix_ms(), request->page_size(),
                            request->page_token()};
    auto page = store::listAudit(m_context.store, query);
    if (!page)
        return finishUnary(context, toGrpcStatus(page.error()));
    for (const auto &entry : page->entries) {
        auto *out = response->add_records();
        out->set_id(entry.id);
        out->set_time_unix_ms(entry.timeUnixMs);
        out->set_principal(entry.principal);
        out->set_role(entry.role);
        out->set_method(entry.method);
        out->set_target(entry.target);
        out->set_result(entry.result);
        out->set_detail(entry.detail);
    }
    response->set_next_page_token(page->nextPageToken);
    return finishUnary(context, grpc::Status::OK);
}


// ---- Secrets ----

namespace {

std::string noSecretStore()
{
    return "this broker keeps no secrets (it was started without a secret store); restart paddockd, which "
           "keeps them in secrets.toml next to its config file";
}

} // namespace

grpc::ServerUnaryReactor *AccessService::SetSecret(grpc::CallbackServerContext *context,
                                                   const v1::SetSecretRequest *request, v1::SetSecretResponse *response)
{
    auto call = m_context.access.authorize(context, "SetSecret", request->name());
    if (!call)
        return finish(context, call);
    if (!m_context.options.secrets)
        return finish(context, m_context.access.conclude(*call, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()})));
    auto replaced = m_context.options.secrets->set(request->name(), request->value());
    if (replaced) {
        response->mutable_secret()->set_name(request->name());
        response->mutable_secret()->set_fingerprint(secrets::fingerprint(request->value()));
        response->set_replaced(*replaced);
    }
    return finish(context, m_context.access.conclude(*call, statusOf(replaced), replaced && *replaced ? "replaced" : ""));
}

grpc::ServerUnaryReactor *AccessService::ListSecrets(grpc::CallbackServerContext *context,
                                                     const v1::ListSecretsRequest *, v1::ListSecretsResponse *response)
{
    if (auto call = m_context.access.authorize(context, "ListSecrets"); !call)
        return finish(context, call);
    if (!m_context.options.secrets)
        return finish(context, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()}));
    for (const auto &info : m_context.options.secrets->list()) {
        auto *out = response->add_secrets();
        out->set_name(info.name);
        out->set_fingerprint(info.fingerprint);
    }
    response->set_file(m_context.options.secrets->file().string());
    return finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *AccessService::DeleteSecret(grpc::CallbackServerContext *context,
                                                      const v1::DeleteSecretRequest *request, v1::DeleteSecretResponse *)
{
    auto call = m_context.access.authorize(context, "DeleteSecret", request->name());
    if (!call)
        return finish(context, call);
    if (!m_context.options.secrets)
        return finish(context, m_context.access.conclude(*call, toGrpcStatus({ErrorCode::FailedPrecondition, noSecretStore()})));
    if (request->name().empty())
        return finish(context, m_context.access.conclude(*call, toGrpcStatus({ErrorCode::InvalidArgument,
                                                                      "no secret name given: `paddockctl secrets ls` lists them"})));
    auto removed = m_context.options.secrets->remove(request->name());
    return finish(context, m_context.access.conclude(*call, removed ? grpc::Status::OK : toGrpcStatus(removed.error())));
}

} // namespace paddock::server
