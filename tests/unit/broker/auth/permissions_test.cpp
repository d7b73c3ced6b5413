// The permission table against the service it guards: every RPC of the broker's services has a rule (a new
// RPC without one is refused to everybody, so this test names it), roles nest as documented, and
// tokens verify only as issued.

#include "broker/auth/permissions.h"
#include "broker/auth/principals.h"
#include "broker/auth/tokens.h"

#include "rpc/broker_stubs.h"

#include <algorithm>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <unistd.h>

namespace paddock::auth {
namespace {

TEST(Permissions, EveryRpcOfTheBrokersServicesIsInTheTableAndNothingElse)
{
    // Through a message of each service's own file, so its generated descriptor is linked in.
    const std::vector<const google::protobuf::ServiceDescriptor *> services{
        v1::SubmitSessionRequest::descriptor()->file()->FindServiceByName("SessionService"),
        v1::GetAgentRequest::descriptor()->file()->FindServiceByName("GovernanceService"),
        v1::ListPoolsRequest::descriptor()->file()->FindServiceByName("OperationsService"),
        v1::WhoAmIRequest::descriptor()->file()->FindServiceByName("AccessService"),
    };
    int methods = 0;
    for (const auto *service : services) {
        ASSERT_NE(service, nullptr);
        methods += service->method_count();
        for (int i = 0; i < service->method_count(); ++i)
            EXPECT_NE(findMethodRule(service->method(i)->name()), nullptr)
                << service->full_name() << "/" << service->method(i)->name()
                << " has no rule in broker/auth/permissions.cpp: nobody may call it";
    }
    for (const auto &rule : methodRules()) {
        const bool served = std::ranges::any_of(services, [&](const auto *service) {
            return service->FindMethodByName(std::string(rule.method)) != nullptr;
        });
        EXPECT_TRUE(served) << rule.method << " is in the table but in none of the broker's services";
    }
    // Method names are unique across the services: the table is keyed by the short name.
    EXPECT_EQ(static_cast<int>(methodRules().size()), methods);
}

TEST(Permissions, RolesNestAndApproverAndOperatorAreSiblings)
{
    EXPECT_TRUE(roleIncludes(Role::Engineer, Role::Viewer));
    EXPECT_FALSE(roleIncludes(Role::Viewer, Role::Engineer));
    EXPECT_TRUE(roleIncludes(Role::Approver, Role::Engineer));
    EXPECT_TRUE(roleIncludes(Role::Operator, Role::Engineer));
    EXPECT_FALSE(roleIncludes(Role::Approver, Role::Operator));
    EXPECT_FALSE(roleIncludes(Role::Operator, Role::Approver));
    EXPECT_TRUE(roleIncludes(Role::Admin, Role::Approver));
    EXPECT_TRUE(roleIncludes(Role::Admin, Role::Operator));

    const auto viewer = permittedMethods(Role::Viewer);
    EXPECT_NE(std::find(viewer.begin(), viewer.end(), "ListSessions"), viewer.end());
    EXPECT_EQ(std::find(viewer.begin(), viewer.end(), "CancelSession"), viewer.end());
    const auto approver = permittedMethods(Role::Approver);
    EXPECT_NE(std::find(approver.begin(), approver.end(), "DecideReviewItems"), approver.end());
    EXPECT_EQ(std::find(approver.begin(), approver.end(), "OpenDebugShell"), approver.end());
    EXPECT_EQ(permittedMethods(Role::Admin).size(), methodRules().size());
    for (const auto &rule : methodRules()) {
        if (rule.mutating) {
            EXPECT_NE(rule.needed, Role::Viewer) << rule.method << " changes something but a viewer may call it";
        }
    }
    EXPECT_EQ(findMethodRule("NoSuchMethod"), nullptr);
}

TEST(Principals, TheDefaultMakesTheOwnerAdminAndNamesTheKeyForOthers)
{
    const auto map = PrincipalMap::embeddedDefault(::getuid());
    auto owner = map.forUid(::getuid());
    ASSERT_TRUE(owner);
    EXPECT_EQ(owner->role, Role::Admin);
    EXPECT_EQ(owner->principal, userName(::getuid()));
    auto other = map.forUid(::getuid() + 4242);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().code, ErrorCode::PermissionDenied);
    EXPECT_NE(other.error().message.find("[[principal]]"), std::string::npos) << other.error().message;
}

TEST(Principals, ConfigMapsUsersAndUidsAndRefusesAUserGivenTwice)
{
    std::vector<PrincipalConfig> config = {{"alice", Role::Viewer, {}, {::getuid()}, "t:1"},
                                           {"ci", Role::Engineer, {}, {}, "t:4"}};
    auto map = PrincipalMap::fromConfig(config, ::getuid());
    ASSERT_TRUE(map) << map.error().message;
    EXPECT_EQ(map->forUid(::getuid())->principal, "alice");
    EXPECT_EQ(map->byName("ci")->role, Role::Engineer);
    EXPECT_FALSE(map->byName("bob"));

    config.push_back({"again", Role::Admin, {}, {::getuid()}, "t:7"});
    auto twice = PrincipalMap::fromConfig(config, ::getuid());
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("t:7"), std::string::npos) << twice.error().message;

    auto unknown = PrincipalMap::fromConfig({{"x", Role::Viewer, {"no-such-user-paddock"}, {}, "t:9"}}, ::getuid());
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("no-such-user-paddock"), std::string::npos);
}

TEST(Tokens, VerifyAcceptsOnlyTheIssuedTokenUntilRevokedOrExpired)
{
    TokenRegistry registry;
    auto issued = generateToken("ci", "build bot", 1000, 60);
    EXPECT_EQ(issued.record.hash, sha256Hex(issued.token));
    EXPECT_EQ(issued.record.hash.find(issued.token), std::string::npos);
    registry.add(issued.record);

    auto ok = registry.verify(issued.token, 2000);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->principal, "ci");
    EXPECT_EQ(registry.find(issued.record.info.id)->lastUsedUnixMs, 2000);

    std::string wrong = issued.token;
    wrong.back() = wrong.back() == 'a' ? 'b' : 'a';
    auto bad = registry.verify(wrong, 2000);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, ErrorCode::PermissionDenied);
    EXPECT_EQ(bad.error().message.find(wrong), std::string::npos) << "an error must never echo a token";
    EXPECT_FALSE(registry.verify("not-a-token", 2000));

    auto expired = registry.verify(issued.token, 1000 + 60 * 1000);
    ASSERT_FALSE(expired);
    EXPECT_NE(expired.error().message.find("expired"), std::string::npos);

    ASSERT_TRUE(registry.revoke(issued.record.info.id));
    auto revoked = registry.verify(issued.token, 2000);
    ASSERT_FALSE(revoked);
    EXPECT_NE(revoked.error().message.find("revoked"), std::string::npos);
}

TEST(Tokens, TokenIdOfNamesTheIdOfAWellFormedTokenOnly)
{
    auto issued = generateToken("ci", "", 1000, 0);
    EXPECT_EQ(tokenIdOf(issued.token), issued.record.info.id);
    std::string wrongSecret = issued.token;
    wrongSecret.back() = wrongSecret.back() == 'a' ? 'b' : 'a';
    EXPECT_EQ(tokenIdOf(wrongSecret), issued.record.info.id) << "the id, whether or not the secret matches";
    EXPECT_EQ(tokenIdOf("pdk_0123456789ab_"), "") << "no secret";
    EXPECT_EQ(tokenIdOf("pdk_0123456789AB_secret"), "") << "the id is lower-case hex";
    EXPECT_EQ(tokenIdOf("pdk_01234'6789ab_secret"), "");
    EXPECT_EQ(tokenIdOf("ghp_0123456789ab_secret"), "");
    EXPECT_EQ(tokenIdOf(""), "");
}

} // namespace
} // namespace paddock::auth
