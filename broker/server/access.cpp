#include "broker/server/access.h"

#include "common/clock.h"
#include "rpc/status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

namespace paddock::server {

namespace {

std::string statusName(grpc::StatusCode code)
{
    switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
    }
}

std::string whoCanCall(auth::Role needed)
{
    switch (needed) {
    case auth::Role::Viewer: return "any role";
    case auth::Role::Engineer: return "engineer, approver, operator or admin";
    case auth::Role::Approver: return "approver or admin";
    case auth::Role::Operator: return "operator or admin";
    case auth::Role::Admin: return "admin";
    }
    return "admin";
}

// The method a call names in its ":path" pseudo-header ("/paddock.v1.AccessService/WhoAmI" ->
// "WhoAmI"), for the audit record of a call refused before it reached its handler.
std::string methodOf(const grpc::AuthMetadataProcessor::InputMetadata &metadata)
{
    auto it = metadata.find(":path");
    if (it == metadata.end())
        return "(unknown method)";
    const std::string_view path(it->second.data(), it->second.size());
    const auto slash = path.rfind('/');
    constexpr size_t kMaxMethodChars = 128;   // the client chose it; a record stays a line
    return std::string((slash == std::string_view::npos ? path : path.substr(slash + 1)).substr(0, kMaxMethodChars));
}

class TokenProcessor final : public grpc::AuthMetadataProcessor {
public:
    explicit TokenProcessor(Access &access) : m_access(access) {}

    // Blocking: a refused call's audit record is committed before the caller hears the refusal,
    // so gRPC runs this on its own threads rather than inline.
    bool IsBlocking() const override { return true; }

    grpc::Status Process(const InputMetadata &metadata, grpc::AuthContext *context, OutputMetadata *consumed,
                         OutputMetadata *) override
    {
        auto it = metadata.find("authorization");
        if (it == metadata.end())
            return refuse(metadata, {},
                          "this broker requires 'authorization: Bearer <token>' over TCP and the call had none; pass "
                          "--token-file FILE (or set PADDOCK_TOKEN) with a token from `paddockctl tokens create`");
        const std::string_view value(it->second.data(), it->second.size());
        const std::string_view token = bearerToken(value);
        if (token.empty())
            return refuse(metadata, {},
                          "the authorization metadata is not 'Bearer <token>'; send the token from `paddockctl tokens "
                          "create` as a bearer token");
        bool persist = false;
        const int64_t now = nowUnixMs();
        auto info = m_access.tokens().verify(token, now, &persist);
        if (!info)
            return refuse(metadata, auth::tokenIdOf(token), info.error().message);
        auto identity = m_access.principals().byName(info->principal);
        if (!identity)
            return refuse(metadata, info->id, "token " + info->id + " names principal '" + info->principal
                                                  + "', which the broker's config no longer lists: "
                                                  + identity.error().message);
        if (persist) {
            // Fire and forget: last_used is a hint, and the call must not wait for a commit.
            store::AppendRequest touch;
            touch.writes.push_back(store::tokenTouch(info->id, now));
            (void)m_access.store().append(std::move(touch));
        }
        context->AddProperty(kPrincipalProperty, identity->principal);
        context->AddProperty(kRoleProperty, std::string(auth::roleName(identity->role)));
        consumed->insert({"authorization", std::string(value)});   // handlers never see the token
        return grpc::Status::OK;
    }

private:
    // UNAUTHENTICATED with why, after its audit record: principal unknown, the token's id as the
    // target when the token parsed (never the token itself: no message here contains it).
    grpc::Status refuse(const InputMetadata &metadata, std::string tokenId, std::string why)
    {
        m_access.recordUnauthenticated(methodOf(metadata), std::move(tokenId), why);
        return {grpc::StatusCode::UNAUTHENTICATED, std::move(why)};
    }

    Access &m_access;
};

} // namespace

grpc::ServerUnaryReactor *finishUnary(grpc::CallbackServerContext *context, const grpc::Status &status)
{
    auto *reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
}

std::string_view bearerToken(std::string_view authorization)
{
    constexpr std::string_view kScheme = "bearer ";
    if (authorization.size() <= kScheme.size())
        return {};
    for (size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i])
            return {};
    }
    return authorization.substr(kScheme.size());
}

Access::Access(store::EventStore &store, std::shared_ptr<const auth::PrincipalMap> principals)
    : m_store(store), m_principals(std::move(principals))
{
}

Status Access::loadTokens()
{
    auto records = store::loadTokens(m_store);
    if (!records)
        return std::unexpected(records.error());
    m_tokens.load(std::move(*records));
    return {};
}

store::AuditEntry Access::entryOf(const Call &call, std::string result, std::string detail) const
{
    return {0, nowUnixMs(), call.caller.principal, call.caller.role, call.method, call.target, std::move(result),
            std::move(detail)};
}

Status Access::write(const store::AuditEntry &entry)
{
    store::AppendRequest request;
    request.writes.push_back(store::auditInsert(entry));
    auto written = m_store.appendSync(std::move(request));
    if (!written)
        return std::unexpected(written.error());
    return {};
}

Result<Access::Call> Access::authorize(const grpc::CallbackServerContext *context, std::string_view method,
                                       std::string target)
{
    Call call{callerOf(context), std::string(method), std::move(target)};
    const auth::MethodRule *rule = auth::findMethodRule(method);
    call.mutating = rule && rule->mutating;
    Error refusal;
    const auto role = auth::parseRole(call.caller.role);
    if (!call.caller.unknownReason.empty()) {
        refusal = {ErrorCode::PermissionDenied, call.caller.unknownReason};
    } else if (!rule) {
        refusal = {ErrorCode::PermissionDenied,
                   std::string(method) + " is not in the broker's permission table, so nobody may call it; this is a "
                                         "bug in this build of paddockd: report it"};
    } else if (!role) {
        refusal = {ErrorCode::PermissionDenied, "principal '" + call.caller.principal + "' has role '" + call.caller.role
                                                    + "', which is none of " + std::string(auth::roleNames())};
    } else if (!auth::roleIncludes(*role, rule->needed)) {
        refusal = {ErrorCode::PermissionDenied,
                   "principal '" + call.caller.principal + "' (role " + call.caller.role + ") may not call "
                       + std::string(method) + ": it needs " + whoCanCall(rule->needed)
                       + ". Ask an admin to change its role in the broker's config ([[principal]], docs/permissions.md)"};
    } else {
        return call;
    }
    const auto status = rpc::toGrpcStatus(refusal);
    if (auto written = write(entryOf(call, statusName(status.error_code()), refusal.message)); !written)
        spdlog::error("audit: could not record a refused {} by {}: {}", call.method, call.caller.principal,
                      written.error().message);
    return std::unexpected(refusal);
}

void Access::recordUnauthenticated(std::string method, std::string tokenId, std::string detail)
{
    const store::AuditEntry entry{0, nowUnixMs(), "(unknown)", "", std::move(method), std::move(tokenId),
                                  "UNAUTHENTICATED", std::move(detail)};
    if (auto written = write(entry); !written)
        spdlog::error("audit: could not record an unauthenticated {}: {}", entry.method, written.error().message);
}

store::SqlStatement Access::auditOf(Call &call, std::string detail)
{
    call.carried = true;
    return store::auditInsert(entryOf(call, "OK", std::move(detail)));
}

grpc::Status Access::conclude(Call &call, const grpc::Status &status, std::string detail)
{
    if (!call.mutating || call.recorded || (call.carried && status.ok()))
        return status;
    call.recorded = true;
    if (detail.empty() && !status.ok())
        detail = status.error_message();
    auto written = write(entryOf(call, statusName(status.error_code()), std::move(detail)));
    if (written || !status.ok())
        return status;
    return {grpc::StatusCode::INTERNAL, call.method + " was done but its audit record could not be written ("
                                            + written.error().message + "); check the broker's disk and database"};
}

Status Access::recordNow(Call &call, std::string detail)
{
    call.recorded = true;
    auto written = write(entryOf(call, "OK", std::move(detail)));
    if (!written)
        return fail(ErrorCode::Internal, call.method + " was refused because its audit record could not be written ("
                                             + written.error().message + "); check the broker's disk and database");
    return {};
}

std::shared_ptr<grpc::AuthMetadataProcessor> Access::tokenProcessor()
{
    return std::make_shared<TokenProcessor>(*this);
}

} // namespace paddock::server
