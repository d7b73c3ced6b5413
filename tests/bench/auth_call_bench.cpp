// What the permission check costs per call. One broker service (real store, real gRPC server) is
// served two ways: through the broker's own unix listener (peer credentials read at accept, the
// connection handed to gRPC by fd) and through gRPC's own unix listener. Sequential unary calls,
// each way:
//   health    grpc.health.v1.Health/Check: no role check; the raw mechanism
//   listpools OperationsService/ListPools with no pools: callerOf + the role check + an empty answer
//   whoami    AccessService/WhoAmI: the same plus the permitted-methods list
// Prints the median and p99 of each, and the ratios against health on the same connection and
// against health on gRPC's own listener. Not a test.
//
//   auth_call_bench [calls=20000]

#include "broker/server/broker_api.h"
#include "broker/server/stream_hub.h"
#include "broker/server/unix_listener.h"
#include "broker/store/sqlite_event_store.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <vector>

using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

double percentile(std::vector<double> values, double p)
{
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[std::min(values.size() - 1, static_cast<size_t>(p * double(values.size())))];
}

template <typename Call>
std::vector<double> timeCalls(int n, Call call)
{
    for (int i = 0; i < n / 10; ++i)
        call();   // warm up
    std::vector<double> us;
    us.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const auto start = Clock::now();
        if (!call()) {
            std::fprintf(stderr, "a call failed\n");
            std::exit(1);
        }
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    return us;
}

bool healthCheck(grpc::GenericStub &stub)
{
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::ByteBuffer request;   // HealthCheckRequest{service: ""} serializes to nothing
    grpc::Slice empty("");
    request = grpc::ByteBuffer(&empty, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                   [&](grpc::Status status) { done.set_value(status); });
    return done.get_future().get().ok();
}

void report(const char *name, const std::vector<double> &us, double baseMedian, double rawMedian)
{
    const double median = percentile(us, 0.5);
    std::printf("%-10s median %7.1f us  p99 %7.1f us  x%.2f of health on this connection, x%.2f of health on "
                "gRPC's own listener\n",
                name, median, percentile(us, 0.99), median / baseMedian, median / rawMedian);
}

} // namespace

int main(int argc, char **argv)
{
    const int calls = argc > 1 ? std::max(100, std::atoi(argv[1])) : 20000;
    spdlog::set_level(spdlog::level::warn);
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-auth-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto store = store::openSqliteEventStore(dir / "broker.db");
    if (!store) {
        std::fprintf(stderr, "%s\n", store.error().message.c_str());
        return 1;
    }
    server::StreamHub hub(**store);
    hub.start();
    placement::PoolSet pools;
    server::BrokerApi service(**store, hub, pools, [](const std::string &) -> llm::ModelAdapter * { return nullptr; },
                                  {});
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    const std::string rawAddress = "unix:" + (dir / "raw.sock").string();
    builder.AddListeningPort(rawAddress, grpc::InsecureServerCredentials());
    service.registerOn(builder);
    auto server = builder.BuildAndStart();
    auto listener = server::UnixListener::listen(dir / "broker.sock", 0600);
    if (!server || !listener) {
        std::fprintf(stderr, "cannot serve in %s\n", dir.c_str());
        return 1;
    }
    (*listener)->start(server.get(), std::make_shared<const auth::PrincipalMap>(auth::PrincipalMap::embeddedDefault(::getuid())));

    auto channel = grpc::CreateChannel("unix:" + (dir / "broker.sock").string(), grpc::InsecureChannelCredentials());
    auto rawChannel = grpc::CreateChannel(rawAddress, grpc::InsecureChannelCredentials());
    grpc::GenericStub generic(channel);
    grpc::GenericStub rawGeneric(rawChannel);
    auto stub = std::make_unique<rpc::BrokerStubs>(channel);

    const auto raw = timeCalls(calls, [&] { return healthCheck(rawGeneric); });
    const auto health = timeCalls(calls, [&] { return healthCheck(generic); });
    const auto listPools = timeCalls(calls, [&] {
        grpc::ClientContext context;
        v1::ListPoolsResponse response;
        return stub->operations->ListPools(&context, {}, &response).ok();
    });
    const auto whoami = timeCalls(calls, [&] {
        grpc::ClientContext context;
        v1::Principal me;
        return stub->access->WhoAmI(&context, {}, &me).ok();
    });
    std::printf("%d sequential unary calls each, one connection, this machine\n", calls);
    const double rawMedian = percentile(raw, 0.5), base = percentile(health, 0.5);
    report("raw", raw, base, rawMedian);
    report("health", health, base, rawMedian);
    report("listpools", listPools, base, rawMedian);
    report("whoami", whoami, base, rawMedian);

    (*listener)->stop();
    hub.beginShutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    hub.stop();
    (*store)->close();
    std::filesystem::remove_all(dir);
    return 0;
}
