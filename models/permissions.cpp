#include "models/permissions.h"

#include <QCoreApplication>

namespace paddock::console {

Permissions::Permissions(QString principal, QString role, QString via, const QStringList &permittedMethods)
    : m_known(true)
    , m_principal(std::move(principal))
    , m_role(std::move(role))
    , m_via(std::move(via))
    , m_permitted(permittedMethods.begin(), permittedMethods.end())
{
}

bool Permissions::allows(const QString &method) const
{
    return !m_known || m_permitted.contains(method);
}

QString Permissions::reason(const QString &method) const
{
    if (allows(method))
        return {};
    return QCoreApplication::translate("Permissions",
                                       "Not allowed: %1 (role %2) may not call %3. Ask an admin for a role that may "
                                       "(docs/permissions.md).")
        .arg(m_principal, m_role, method);
}

QString Permissions::summary() const
{
    if (!m_known)
        return {};
    return m_principal + QStringLiteral(" · ") + m_role;
}

} // namespace paddock::console
