// BrokerService's permission calls: WhoAmI, bearer tokens and the audit log (docs/permissions.md).

#include "broker/server/broker_service.h"

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

grpc::ServerUnaryReactor *BrokerService::WhoAmI(grpc::CallbackServerContext *context, const v1::WhoAmIRequest *,
                                                v1::Principal *response)
{
    auto call = m_access.authorize(context, "WhoAmI");
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

grpc::ServerUnaryReactor *BrokerService::CreateToken(grpc::CallbackServerContext *context,
                                                     const v1::CreateTokenRequest *request, v1::CreatedToken *response)
{
    auto call = m_access.authorize(context, "CreateToken", request->principal());
    if (!call)
        return finishUnary(context, toGrpcStatus(call.error()));
    auto refuse = [&](ErrorCode code, std::string message) {
        return finishUnary(context, m_access.conclude(*call, toGrpcStatus({code, std::move(message)})));
    };
    if (request->principal().empty())
        return refuse(ErrorCode::InvalidArgument, "no principal given: name the principal the token acts as (one of the "
                                                  "broker config's [[principal]] names)");
    if (auto known = m_access.principals().byName(request->principal()); !known)
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
    append.writes.push_back(m_access.auditOf(*call, "for " + request->principal()));
    auto written = m_store.appendSync(std::move(append));
    if (written) {
        m_access.tokens().add(created.record);
        toProto(created.record.info, response->mutable_info());
        response->set_token(created.token);
    }
    return finishUnary(context, m_access.conclude(*call, written ? grpc::Status::OK : toGrpcStatus(written.error())));
}

grpc::ServerUnaryReactor *BrokerService::ListTokens(grpc::CallbackServerContext *context, const v1::ListTokensRequest *,
                                                    v1::ListTokensResponse *response)
{
    if (auto call = m_access.authorize(context, "ListTokens"); !call)
        return finishUnary(context, toGrpcStatus(call.error()));
    for (const auto &info : m_access.tokens().list())
        toProto(info, response->add_tokens());
    return finishUnary(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *BrokerService::RevokeToken(grpc::CallbackServerContext *context,
                                                     const v1::RevokeTokenRequest *request, v1::TokenInfo *response)
{
    auto call = m_access.authorize(context, "RevokeToken", request->id());
    if (!call)
        return finishUnary(context, toGrpcStatus(call.error()));
    auto before = m_access.tokens().find(request->id());
    if (!before)
        return finishUnary(context, m_access.conclude(*call, toGrpcStatus(before.error())));
    // Revoked in memory first, so no call gets in while the row is written; undone if it cannot be.
    auto revoked = m_access.tokens().revoke(request->id());
    store::AppendRequest append;
    append.writes.push_back(store::tokenRevoke(request->id()));
    append.writes.push_back(m_access.auditOf(*call, "of " + before->principal));
    auto written = m_store.appendSync(std::move(append));
    if (!written)
        m_access.tokens().restore(*before);
    else
        toProto(*revoked, response);
    return finishUnary(context, m_access.conclude(*call, written ? grpc::Status::OK : toGrpcStatus(written.error())));
}

grpc::ServerUnaryReactor *BrokerService::ListAudit(grpc::CallbackServerContext *context,
                                                   const v1::ListAuditRequest *request, v1::ListAuditResponse *response)
{
    if (auto call = m_access.authorize(context, "ListAudit"); !call)
        return finishUnary(context, toGrpcStatus(call.error()));
    store::AuditQuery query{request->principal(), request->method(), request->from_unix_ms(), request->page_size(),
                            request->page_token()};
    auto page = store::listAudit(m_store, query);
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

} // namespace paddock::server
