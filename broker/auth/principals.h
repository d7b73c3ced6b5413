#pragma once
// Who may call the broker, from its config's [[principal]] entries (docs/permissions.md): a name,
// a role, and the OS users (unix_users, uids) whose connections on the unix socket are that
// principal. A principal without OS users is reached by bearer token only.
//
// With no [[principal]] at all (the embedded default) the OS user running paddockd is admin on
// the unix socket, named after its user name, and nobody else is anything.
//
// Threads: built once at start, then immutable; call from anywhere.

#include "broker/auth/permissions.h"
#include "common/result.h"

#include <sys/types.h>

#include <string>
#include <vector>

namespace paddock::auth {

struct PrincipalConfig {
    std::string name;
    Role role = Role::Viewer;
    std::vector<std::string> unixUsers;   // resolved to uids when the map is built
    std::vector<uid_t> uids;
    std::string where;                    // "file:line" of its entry, for messages
};

struct Identity {
    std::string principal;
    Role role = Role::Viewer;
};

class PrincipalMap {
public:
    // The embedded default: ownerUid is admin.
    static PrincipalMap embeddedDefault(uid_t ownerUid);
    // Errors name the entry (file:line), the problem and the fix: an unknown user, a name or a
    // uid given to two principals.
    static Result<PrincipalMap> fromConfig(const std::vector<PrincipalConfig> &principals, uid_t ownerUid);

    // The principal of a connection from uid, or PermissionDenied naming the config key to add.
    Result<Identity> forUid(uid_t uid) const;
    // The principal a token names; NotFound when the config no longer lists it.
    Result<Identity> byName(const std::string &name) const;
    bool configured() const { return m_configured; }
    std::vector<Identity> all() const;

private:
    struct Entry {
        Identity identity;
        std::vector<uid_t> uids;
    };
    std::vector<Entry> m_entries;
    bool m_configured = false;
};

// The user name of uid, or "uid N" when it has none.
std::string userName(uid_t uid);

} // namespace paddock::auth
