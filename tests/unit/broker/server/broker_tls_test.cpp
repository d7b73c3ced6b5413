// The whole broker (daemon::Broker: store, pools, engine, gRPC) with a TCP listener on loopback:
// TLS with a certificate made by openssl for the test, bearer tokens created over the unix socket by
// the admin, and a client of another OS user on the unix socket (a child process run as nobody).

#include "broker/daemon/broker.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace paddock::daemon {
namespace {

using namespace std::chrono_literals;
using broker_config::defaultBrokerConfig;
using broker_config::validateBrokerConfig;
namespace fs = std::filesystem;

std::string readFile(const fs::path &path)
{
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

class BrokerTlsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::system("command -v openssl >/dev/null 2>&1") != 0)
            GTEST_SKIP() << "no openssl to make the test certificate: run scripts/setup-deps";
        // Short: the socket path inside must fit sockaddr_un (108 bytes).
        static int serial = 0;
        m_dir = fs::temp_directory_path() / ("paddock-tls-" + std::to_string(::getpid()) + "-" + std::to_string(++serial));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        fs::permissions(m_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
        const std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
            + (m_dir / "broker.key").string() + " -out " + (m_dir / "broker.pem").string()
            + " -days 2 -subj /CN=paddock-test -addext subjectAltName=IP:127.0.0.1 >" + (m_dir / "openssl.log").string()
            + " 2>&1";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << readFile(m_dir / "openssl.log");
    }

    void TearDown() override
    {
        m_broker.reset();
        if (!m_dir.empty())
            fs::remove_all(m_dir);
    }

    BrokerConfig config()
    {
        BrokerConfig config = defaultBrokerConfig();
        config.configFile = m_dir / "broker.toml";   // secrets.toml goes beside it
        config.dataDir = m_dir / "data";
        config.socketPath = m_dir / "run" / "broker.sock";
        config.pools = {{"nowhere", "127.0.0.1:9"}};  // never answers; nothing here needs a sandbox
        config.allowLocalExecution = true;
        config.workers = 1;
        config.listenTcp = "127.0.0.1:0";
        config.tlsCert = m_dir / "broker.pem";
        config.tlsKey = m_dir / "broker.key";
        config.principals = {{"ada", auth::Role::Admin, {}, {::getuid()}, "test:1"},
                             {"ci", auth::Role::Engineer, {}, {}, "test:5"}};
        return config;
    }

    void start()
    {
        m_broker = std::make_unique<daemon::Broker>(config());
        auto started = m_broker->start();
        ASSERT_TRUE(started) << started.error().message;
        m_unix = std::make_unique<rpc::BrokerStubs>(
            grpc::CreateChannel("unix:" + (m_dir / "run" / "broker.sock").string(), grpc::InsecureChannelCredentials()));
    }

    // A TLS client trusting the test certificate, with token (none when empty).
    std::unique_ptr<rpc::BrokerStubs> tcpClient(const std::string &token)
    {
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = readFile(m_dir / "broker.pem");
        auto credentials = grpc::SslCredentials(ssl);
        if (!token.empty())
            credentials = grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
        return std::make_unique<rpc::BrokerStubs>(
            grpc::CreateChannel("127.0.0.1:" + std::to_string(m_broker->tcpPort()), credentials));
    }

    static std::unique_ptr<grpc::ClientContext> context()
    {
        auto context = std::make_unique<grpc::ClientContext>();
        context->set_deadline(std::chrono::system_clock::now() + 20s);
        return context;
    }

    fs::path m_dir;
    std::unique_ptr<daemon::Broker> m_broker;
    std::unique_ptr<rpc::BrokerStubs> m_unix;
};

TEST_F(BrokerTlsTest, APlaintextTcpListenerIsRefusedAtStart)
{
    BrokerConfig plain = config();
    plain.tlsCert.clear();
    plain.tlsKey.clear();
    auto valid = validateBrokerConfig(plain);
    ASSERT_FALSE(valid);
    EXPECT_NE(valid.error().message.find("tls_cert"), std::string::npos) << valid.error().message;
    daemon::Broker broker(plain);
    EXPECT_FALSE(broker.start());
}

TEST_F(BrokerTlsTest, OverTlsAMissingOrWrongTokenIsUnauthenticatedAndARevokedTokenStopsWorking)
{
    start();
    ASSERT_GT(m_broker->tcpPort(), 0);

    v1::Principal me;
    const auto missing = tcpClient({})->access->WhoAmI(context().get(), {}, &me);
    ASSERT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << missing.error_message();
    EXPECT_NE(missing.error_message().find("--token-file"), std::string::npos) << missing.error_message();

    v1::CreateTokenRequest create;
    create.set_principal("ci");
    v1::CreatedToken created;
    auto status = m_unix->access->CreateToken(context().get(), create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();

    std::string wrong = created.token();
    wrong.back() = wrong.back() == '0' ? '1' : '0';
    const auto bad = tcpClient(wrong)->access->WhoAmI(context().get(), {}, &me);
    ASSERT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(bad.error_message().find(wrong), std::string::npos) << "never echo a token";
    EXPECT_EQ(tcpClient("Basic-nonsense")->access->WhoAmI(context().get(), {}, &me).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);

    auto ci = tcpClient(created.token());
    status = ci->access->WhoAmI(context().get(), {}, &me);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(me.name(), "ci");
    EXPECT_EQ(me.role(), "engineer");
    EXPECT_EQ(me.via(), "token");
    v1::ListSessionsResponse sessions;
    EXPECT_TRUE(ci->sessions->ListSessions(context().get(), {}, &sessions).ok());
    const auto denied = ci->access->CreateToken(context().get(), create, &created);
    EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(denied.error_message().find("'ci' (role engineer)"), std::string::npos) << denied.error_message();

    v1::ListTokensResponse tokens;
    ASSERT_TRUE(m_unix->access->ListTokens(context().get(), {}, &tokens).ok());
    ASSERT_EQ(tokens.tokens_size(), 1);
    EXPECT_GT(tokens.tokens(0).last_used_unix_ms(), 0) << "last_used is recorded";

    v1::RevokeTokenRequest revoke;
    revoke.set_id(tokens.tokens(0).id());
    v1::TokenInfo info;
    ASSERT_TRUE(m_unix->access->RevokeToken(context().get(), revoke, &info).ok());
    const auto revoked = ci->access->WhoAmI(context().get(), {}, &me);
    ASSERT_EQ(revoked.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(revoked.error_message().find("revoked"), std::string::npos) << revoked.error_message();

    // The revocation survives a restart: the table, not memory, is the record.
    m_broker.reset();
    start();
    EXPECT_EQ(tcpClient(created.token())->access->WhoAmI(context().get(), {}, &me).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(BrokerTlsTest, EveryRefusedTokenIsAuditedWithItsIdAndNeverItsSecret)
{
    start();
    v1::CreateTokenRequest create;
    create.set_principal("ci");
    v1::CreatedToken created;
    ASSERT_TRUE(m_unix->access->CreateToken(context().get(), create, &created).ok());
    const std::string id = created.info().id();
    std::string wrong = created.token();
    wrong.back() = wrong.back() == '0' ? '1' : '0';

    v1::Principal me;
    v1::ListSessionsResponse sessions;
    ASSERT_EQ(tcpClient({})->access->WhoAmI(context().get(), {}, &me).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    ASSERT_EQ(tcpClient("not-a-paddock-token")->sessions->ListSessions(context().get(), {}, &sessions).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    ASSERT_EQ(tcpClient(wrong)->sessions->ListSessions(context().get(), {}, &sessions).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::RevokeTokenRequest revoke;
    revoke.set_id(id);
    v1::TokenInfo info;
    ASSERT_TRUE(m_unix->access->RevokeToken(context().get(), revoke, &info).ok());
    ASSERT_EQ(tcpClient(created.token())->access->WhoAmI(context().get(), {}, &me).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);

    // Committed before each refusal was answered: no waiting here.
    v1::ListAuditRequest query;
    query.set_page_size(100);
    v1::ListAuditResponse audit;
    auto status = m_unix->access->ListAudit(context().get(), query, &audit);
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::vector<v1::AuditRecord> refused;
    for (const auto &record : audit.records()) {
        if (record.result() == "UNAUTHENTICATED")
            refused.push_back(record);
        EXPECT_EQ(record.detail().find(created.token()), std::string::npos) << "never record a token";
        EXPECT_EQ(record.detail().find(wrong), std::string::npos) << "never record a token";
        EXPECT_EQ(record.target().find(created.token().substr(17)), std::string::npos) << "never record a secret";
    }
    ASSERT_EQ(refused.size(), 4u);
    std::reverse(refused.begin(), refused.end());   // newest first -> call order
    for (const auto &record : refused) {
        EXPECT_EQ(record.principal(), "(unknown)");
        EXPECT_EQ(record.role(), "");
    }
    EXPECT_EQ(refused[0].method(), "WhoAmI");
    EXPECT_EQ(refused[0].target(), "") << "no token at all";
    EXPECT_NE(refused[0].detail().find("had none"), std::string::npos) << refused[0].detail();
    EXPECT_EQ(refused[1].method(), "ListSessions");
    EXPECT_EQ(refused[1].target(), "") << "not a Paddock token: no id to name";
    EXPECT_EQ(refused[2].method(), "ListSessions");
    EXPECT_EQ(refused[2].target(), id) << "a wrong secret names the id it claimed";
    EXPECT_EQ(refused[3].method(), "WhoAmI");
    EXPECT_EQ(refused[3].target(), id);
    EXPECT_NE(refused[3].detail().find("revoked"), std::string::npos) << refused[3].detail();

    // An admin finds them by method, like any other refusal.
    query.set_method("ListSessions");
    ASSERT_TRUE(m_unix->access->ListAudit(context().get(), query, &audit).ok());
    EXPECT_EQ(audit.records_size(), 2);
}

// Run in a child as another OS user (see the next test): calls WhoAmI on the socket and prints
// the result.
TEST(BrokerTlsHelper, WhoAmIOnTheSocketAsThisUser)
{
    const char *socket = std::getenv("PADDOCK_AUTH_TEST_SOCKET");
    if (!socket)
        GTEST_SKIP() << "only run by UnixPeerOfAnotherUserIsRefusedNamingTheConfigKey";
    auto stub = std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel(std::string("unix:") + socket,
                                                               grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    v1::Principal me;
    const auto status = stub->access->WhoAmI(&context, {}, &me);
    std::printf("RESULT %d %s\n", static_cast<int>(status.error_code()), status.error_message().c_str());
}

TEST_F(BrokerTlsTest, UnixPeerOfAnotherUserIsRefusedNamingTheConfigKey)
{
    if (::getuid() != 0)
        GTEST_SKIP() << "needs root to run a client as another user";
    start();
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const std::string socket = (m_dir / "run" / "broker.sock").string();
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Only async-signal-safe calls until exec: the parent's gRPC threads are not here.
        ::dup2(out[1], STDOUT_FILENO);
        ::close(out[0]);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0)
            ::_exit(90);
        const std::string env = "PADDOCK_AUTH_TEST_SOCKET=" + socket;
        char *argv[] = {const_cast<char *>(self.c_str()),
                        const_cast<char *>("--gtest_filter=BrokerTlsHelper.WhoAmIOnTheSocketAsThisUser"), nullptr};
        char *envp[] = {const_cast<char *>(env.c_str()), nullptr};
        ::execve(self.c_str(), argv, envp);
        ::_exit(91);
    }
    ::close(out[1]);
    std::string output;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(out[0], buffer, sizeof buffer)) > 0)
        output.append(buffer, static_cast<size_t>(n));
    ::close(out[0]);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    ASSERT_TRUE(WIFEXITED(wstatus)) << output;
    ASSERT_NE(WEXITSTATUS(wstatus), 90) << "could not become nobody";
    const auto at = output.find("RESULT ");
    ASSERT_NE(at, std::string::npos) << output;
    const std::string result = output.substr(at + 7);
    EXPECT_TRUE(result.starts_with(std::to_string(static_cast<int>(grpc::StatusCode::PERMISSION_DENIED)) + " "))
        << result;
    EXPECT_NE(result.find("nobody"), std::string::npos) << result;
    EXPECT_NE(result.find("unix_users = [\"nobody\"]"), std::string::npos) << result;
}

// The broker's four services, each named by grpc.health.v1 and by server reflection, so a load
// balancer's health check and grpcurl both see what paddockd serves. Both protocols are spoken
// through the generic stub with their few bytes encoded here, which keeps their generated code out.
TEST_F(BrokerTlsTest, HealthAndReflectionNameEachOfTheFourServices)
{
    start();
    auto channel = grpc::CreateChannel("unix:" + (m_dir / "run" / "broker.sock").string(),
                                       grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    const std::vector<std::string> services{"paddock.v1.SessionService", "paddock.v1.GovernanceService",
                                            "paddock.v1.OperationsService", "paddock.v1.AccessService"};
    auto health = [&](const std::string &service) -> std::string {
        // HealthCheckRequest{service}: field 1, length-delimited.
        const std::string bytes = std::string{'\x0a', static_cast<char>(service.size())} + service;
        grpc::Slice slice(bytes);
        grpc::ByteBuffer request(&slice, 1), response;
        auto ctx = context();
        std::mutex mutex;
        std::condition_variable cv;
        std::optional<grpc::Status> done;
        stub.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                       [&](grpc::Status status) {
                           std::lock_guard lock(mutex);
                           done = status;
                           cv.notify_all();
                       });
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return done.has_value(); });
        if (!done->ok())
            return "error " + done->error_message();
        std::vector<grpc::Slice> slices;
        EXPECT_TRUE(response.Dump(&slices).ok());
        std::string out;
        for (const auto &s : slices)
            out.append(reinterpret_cast<const char *>(s.begin()), s.size());
        return out;
    };
    const std::string serving{'\x08', '\x01'};   // HealthCheckResponse{status: SERVING}
    for (const auto &service : services)
        EXPECT_EQ(health(service), serving) << service;
    EXPECT_NE(health("paddock.v1.BrokerService"), serving) << "the old single service is gone";

    // ServerReflectionRequest{list_services: ""} (field 7) on the bidirectional stream; the answer
    // carries each service's full name.
    auto ctx = context();
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(ctx.get(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
    void *tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void *>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    const std::string listServices{'\x3a', '\x00'};
    grpc::Slice slice(listServices);
    grpc::ByteBuffer request(&slice, 1), response;
    call->Write(request, reinterpret_cast<void *>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
    call->Read(&response, reinterpret_cast<void *>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok) && ok) << "no reflection answer";
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(response.Dump(&slices).ok());
    std::string listed;
    for (const auto &s : slices)
        listed.append(reinterpret_cast<const char *>(s.begin()), s.size());
    for (const auto &service : services)
        EXPECT_NE(listed.find(service), std::string::npos) << service << " is not listed by reflection";
    ctx->TryCancel();
    grpc::Status finished;
    call->Finish(&finished, reinterpret_cast<void *>(4));
    while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void *>(4)) {
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
}

} // namespace
} // namespace paddock::daemon
