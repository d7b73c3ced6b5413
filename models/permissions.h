#pragma once
// What the connected principal may do, as the broker said (WhoAmI's permitted_methods), so views
// can disable what the role does not allow and say why in the tooltip. Views ask by the
// broker method's short name (unique across its four services): allows("CancelSession").
//
// Before the broker has answered (or when it cannot say: an older broker) nothing is disabled for
// permissions' sake: the broker still checks every call and its refusal is shown.
//
// Threads: a value type; copy it freely.

#include <QMetaType>
#include <QSet>
#include <QString>
#include <QStringList>

namespace paddock::console {

class Permissions {
public:
    Permissions() = default;   // unknown: allows everything
    Permissions(QString principal, QString role, QString via, const QStringList &permittedMethods);

    bool known() const { return m_known; }
    QString principal() const { return m_principal; }
    QString role() const { return m_role; }
    QString via() const { return m_via; }   // "unix" or "token"

    bool allows(const QString &method) const;
    // Empty when allowed; otherwise, for people: who, which role, what is refused and what to do.
    QString reason(const QString &method) const;
    // For the status bar: "ada · admin".
    QString summary() const;

    bool operator==(const Permissions &other) const = default;

private:
    bool m_known = false;
    QString m_principal;
    QString m_role;
    QString m_via;
    QSet<QString> m_permitted;
};

} // namespace paddock::console

Q_DECLARE_METATYPE(paddock::console::Permissions)
