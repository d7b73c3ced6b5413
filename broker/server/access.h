#pragma once
// Applies the permissions (broker/auth) to calls: who the caller is (caller.h), whether its role
// allows the method (auth::findMethodRule), and the audit log: every mutating call and every
// refused call leaves an audit record (broker/store/auth_tables.h), a TCP call refused for its
// bearer token too. A call whose audit record cannot be written fails. Also owns the bearer tokens
// and the check that lets TCP callers in.
//
// How a handler uses it:
//   auto call = m_access.authorize(context, "CancelSession", request->id());
//   if (!call) return finish(context, call.error());
//   ... append with append.writes.push_back(m_access.auditOf(*call)) (same transaction), then
//   return finish(context, m_access.conclude(*call, status));
//
// Threads: every method may be called from any gRPC thread; the token registry has its own lock.

#include "broker/auth/principals.h"
#include "broker/auth/tokens.h"
#include "broker/server/caller.h"
#include "broker/store/auth_tables.h"
#include "broker/store/event_store.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <memory>
#include <string>
#include <string_view>

namespace paddock::server {

class Access {
public:
    struct Call {
        Caller caller;
        std::string method;
        std::string target;
        bool mutating = false;
        bool carried = false;    // auditOf() gave its record to an append
        bool recorded = false;   // its record is written
    };

    Access(store::EventStore &store, std::shared_ptr<const auth::PrincipalMap> principals);

    // Reads the tokens table into memory. Call once before serving.
    Status loadTokens();

    // The call, when the caller is known and its role allows method. Otherwise UNAUTHENTICATED or
    // PERMISSION_DENIED naming the principal, its role, the method and the role it needs; the
    // refusal is audited.
    Result<Call> authorize(const grpc::CallbackServerContext *context, std::string_view method,
                           std::string target = {});
    // The audit record of a successful change, to append in the same transaction as the change
    // (AppendRequest::writes): when the call then answers OK, the record was written with it.
    store::SqlStatement auditOf(Call &call, std::string detail = {});
    // What to answer: a mutating call's outcome is recorded unless its append already carried it.
    // When that record cannot be written, an OK turns into INTERNAL saying so.
    grpc::Status conclude(Call &call, const grpc::Status &status, std::string detail = {});
    // Writes the call's record now, before its work starts (handlers that finish asynchronously).
    Status recordNow(Call &call, std::string detail);

    // Records a call the token check refused (UNAUTHENTICATED) before any handler saw it: principal
    // "(unknown)", the token's id as the target when the token parsed (never the token).
    void recordUnauthenticated(std::string method, std::string tokenId, std::string detail);

    // The caller's principal and role with the methods it may call (WhoAmI).
    Result<Call> whoAmI(const grpc::CallbackServerContext *context) { return authorize(context, "WhoAmI"); }

    auth::TokenRegistry &tokens() { return m_tokens; }
    const auth::PrincipalMap &principals() const { return *m_principals; }
    const std::shared_ptr<const auth::PrincipalMap> &principalMap() const { return m_principals; }
    store::EventStore &store() { return m_store; }

    // The check that every call on the TCP listener passes before any handler: a valid bearer token
    // of a principal the config lists, or UNAUTHENTICATED naming the fix.
    std::shared_ptr<grpc::AuthMetadataProcessor> tokenProcessor();

private:
    Status write(const store::AuditEntry &entry);
    store::AuditEntry entryOf(const Call &call, std::string result, std::string detail) const;

    store::EventStore &m_store;
    std::shared_ptr<const auth::PrincipalMap> m_principals;
    auth::TokenRegistry m_tokens;
};

// The token in "Bearer <token>" (scheme case-insensitive), or empty.
std::string_view bearerToken(std::string_view authorization);

// A unary call answered with status at once.
grpc::ServerUnaryReactor *finishUnary(grpc::CallbackServerContext *context, const grpc::Status &status);

// A server stream that ends at once with the error (a refused or invalid call).
template <typename T>
grpc::ServerWriteReactor<T> *refusedStream(const grpc::Status &status)
{
    class Refusal : public grpc::ServerWriteReactor<T> {
    public:
        explicit Refusal(const grpc::Status &s) { this->Finish(s); }
        void OnDone() override { delete this; }
    };
    return new Refusal(status);
}

} // namespace paddock::server
