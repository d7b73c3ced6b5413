// The console's view of what the principal may do.

#include "models/permissions.h"

#include <gtest/gtest.h>

namespace paddock::console {
namespace {

TEST(ConsolePermissions, UnknownAllowsEverythingKnownAllowsOnlyWhatTheBrokerSaid)
{
    const Permissions unknown;
    EXPECT_FALSE(unknown.known());
    EXPECT_TRUE(unknown.allows(QStringLiteral("CancelSession")));
    EXPECT_TRUE(unknown.reason(QStringLiteral("CancelSession")).isEmpty());
    EXPECT_TRUE(unknown.summary().isEmpty());

    const Permissions viewer(QStringLiteral("vera"), QStringLiteral("viewer"), QStringLiteral("unix"),
                             {QStringLiteral("ListSessions"), QStringLiteral("WhoAmI")});
    EXPECT_TRUE(viewer.known());
    EXPECT_TRUE(viewer.allows(QStringLiteral("ListSessions")));
    EXPECT_FALSE(viewer.allows(QStringLiteral("CancelSession")));
    const QString reason = viewer.reason(QStringLiteral("CancelSession"));
    for (const char *word : {"vera", "viewer", "CancelSession", "admin"})
        EXPECT_TRUE(reason.contains(QLatin1String(word))) << word << ": " << reason.toStdString();
    EXPECT_TRUE(viewer.reason(QStringLiteral("ListSessions")).isEmpty());
    EXPECT_EQ(viewer.summary(), QStringLiteral("vera · viewer"));
}

} // namespace
} // namespace paddock::console
