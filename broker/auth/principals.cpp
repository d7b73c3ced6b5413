#include "broker/auth/principals.h"

#include <pwd.h>

#include <algorithm>

namespace paddock::auth {

std::string userName(uid_t uid)
{
    passwd entry{};
    passwd *found = nullptr;
    char buffer[4096];
    if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
        return found->pw_name;
    return "uid " + std::to_string(uid);
}

PrincipalMap PrincipalMap::embeddedDefault(uid_t ownerUid)
{
    PrincipalMap map;
    map.m_entries.push_back({{userName(ownerUid), Role::Admin}, {ownerUid}});
    return map;
}

Result<PrincipalMap> PrincipalMap::fromConfig(const std::vector<PrincipalConfig> &principals, uid_t ownerUid)
{
    if (principals.empty())
        return embeddedDefault(ownerUid);
    PrincipalMap map;
    map.m_configured = true;
    for (const auto &config : principals) {
        if (config.name.empty())
            return fail(ErrorCode::InvalidArgument, config.where + ": a [[principal]] needs name = \"...\"");
        for (const auto &entry : map.m_entries) {
            if (entry.identity.principal == config.name)
                return fail(ErrorCode::InvalidArgument, config.where + ": principal '" + config.name
                                + "' is listed twice: merge the two [[principal]] entries");
        }
        Entry entry{{config.name, config.role}, config.uids};
        for (const auto &user : config.unixUsers) {
            passwd pw{};
            passwd *found = nullptr;
            char buffer[4096];
            if (getpwnam_r(user.c_str(), &pw, buffer, sizeof buffer, &found) != 0 || !found)
                return fail(ErrorCode::InvalidArgument, config.where + ": principal '" + config.name
                                + "' names unix user '" + user + "', which this machine does not have: fix the "
                                "name, or give its uid in uids = [...]");
            entry.uids.push_back(found->pw_uid);
        }
        for (uid_t uid : entry.uids) {
            for (const auto &other : map.m_entries) {
                if (std::find(other.uids.begin(), other.uids.end(), uid) != other.uids.end())
                    return fail(ErrorCode::InvalidArgument, config.where + ": " + userName(uid) + " is given to both '"
                                    + other.identity.principal + "' and '" + config.name
                                    + "': an OS user is one principal; remove it from one of them");
            }
        }
        map.m_entries.push_back(std::move(entry));
    }
    return map;
}

Result<Identity> PrincipalMap::forUid(uid_t uid) const
{
    for (const auto &entry : m_entries) {
        if (std::find(entry.uids.begin(), entry.uids.end(), uid) != entry.uids.end())
            return entry.identity;
    }
    const std::string user = userName(uid);
    const std::string example = user.starts_with("uid ") ? "uids = [" + user.substr(4) + "]"
                                                         : "unix_users = [\"" + user + "\"]";
    return fail(ErrorCode::PermissionDenied,
                "the broker does not know " + user + ": add a [[principal]] with a name, a role and " + example
                    + " to the broker's config (docs/permissions.md), then restart paddockd");
}

Result<Identity> PrincipalMap::byName(const std::string &name) const
{
    for (const auto &entry : m_entries) {
        if (entry.identity.principal == name)
            return entry.identity;
    }
    return fail(ErrorCode::NotFound, "the broker's config lists no principal '" + name
                                         + "': add a [[principal]] with name = \"" + name + "\" and a role");
}

std::vector<Identity> PrincipalMap::all() const
{
    std::vector<Identity> out;
    for (const auto &entry : m_entries)
        out.push_back(entry.identity);
    return out;
}

} // namespace paddock::auth
