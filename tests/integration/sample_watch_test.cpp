// WatchSandboxSamples end to end: the real pool and broker, a session whose command sleeps for a
// while, and the broker's stream of its sandbox's samples read over gRPC the way the console reads
// it: samples arrive while the command runs, and the stream ends with OK once the session is over
// and its sandbox released, each with what the pool measured: the workspace's disk use and the
// cgroup's CPU throttling counters. An unknown sandbox or pool is refused with NOT_FOUND.
#include "tests/integration/daemons_fixture.h"

#include "rpc/broker_stubs.h"
#include "paddock/v1/pool.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;

constexpr const char *kSleepy = R"(
name = "sleepy"
goal = "wait a little"
[[step]]
tool = "run_command"
command = "head -c 2097152 /dev/urandom > ballast && sync ballast && sleep 3"
)";

class SampleWatch : public DaemonsTest {
protected:
    std::unique_ptr<rpc::BrokerStubs> stub()
    {
        return std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel(m_broker->address, grpc::InsecureChannelCredentials()));
    }

    // The session's sandbox.claimed payload, waited for (bounded).
    json claimedOf(const std::string &id)
    {
        for (int i = 0; i < 300; ++i) {
            const CliResult events = cli({"events", id, "--output", "json"});
            for (const auto &e : jsonLines(events.out))
                if (e.value("kind", "") == "sandbox.claimed")
                    return e["payload"];
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        ADD_FAILURE() << "session " << id << " never claimed a sandbox";
        return {};
    }
};

} // namespace

TEST_F(SampleWatch, SamplesStreamWhileTheCommandRunsAndTheStreamEndsAtRelease)
{
    auto broker = stub();
    v1::SubmitSessionRequest submit;
    submit.set_playbook_toml(kSleepy);
    v1::Session session;
    {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        const auto status = broker->sessions->SubmitSession(&ctx, submit, &session);
        ASSERT_TRUE(status.ok()) << status.error_message();
    }
    const json claimed = claimedOf(session.id());
    ASSERT_TRUE(claimed.contains("sandbox_id")) << claimed.dump();

    v1::WatchSandboxSamplesRequest request;
    request.set_pool(claimed.value("pool", ""));
    request.set_sandbox_id(claimed.value("sandbox_id", ""));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    auto reader = broker->operations->WatchSandboxSamples(&ctx, request);
    v1::SandboxSamples batch;
    int samples = 0;
    int64_t last = 0;
    v1::ResourceSample newest;
    while (reader->Read(&batch)) {
        for (const auto &s : batch.samples()) {
            EXPECT_GT(s.time_unix_ms(), last) << "samples come oldest first, each once";
            last = s.time_unix_ms();
            EXPECT_GT(s.memory_bytes(), 0);
            EXPECT_GE(s.pids(), 1);
            EXPECT_LE(s.cpu_throttled_periods(), s.cpu_periods());
            EXPECT_GE(s.cpu_periods(), newest.cpu_periods()) << "counted since the sandbox started";
            newest = s;
            ++samples;
        }
    }
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << "the stream ends with OK when the sandbox is released: " << status.error_message();
    EXPECT_GE(samples, 2) << "a command of 3 s is sampled at least twice";
    // What the pool measures reaches the stream: the ballast in the workspace (where the pool
    // holds tiers to their disk_mb) and the periods the command ran under lite's cpu quota.
    v1::PoolStatusResponse pool;
    {
        auto poolStub = v1::PoolService::NewStub(grpc::CreateChannel(m_pool->endpoint, grpc::InsecureChannelCredentials()));
        grpc::ClientContext poolCtx;
        ASSERT_TRUE(poolStub->Status(&poolCtx, {}, &pool).ok());
    }
    if (pool.disk_limits() == "btrfs qgroups") {
        EXPECT_GE(newest.disk_bytes(), 2 << 20) << newest.DebugString();
    }
    if (pool.cgroup_version().rfind("v1", 0) == 0) {
        EXPECT_GT(newest.cpu_periods(), 0) << newest.DebugString();
    }

    // The sandbox went back because the session is over: it ends as succeeded.
    std::string shown;
    for (int i = 0; i < 300 && shown.find("succeeded") == std::string::npos; ++i) {
        shown = cli({"show", session.id(), "--output", "json"}).out;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_NE(shown.find("succeeded"), std::string::npos) << shown;
}

TEST_F(SampleWatch, UnknownSandboxOrPoolIsNotFound)
{
    auto broker = stub();
    v1::ListPoolsResponse pools;
    {
        grpc::ClientContext ctx;
        ASSERT_TRUE(broker->operations->ListPools(&ctx, {}, &pools).ok());
    }
    ASSERT_GE(pools.pools_size(), 1);
    // The real pool's TierStatus reaches ListPools whole: histogram buckets and the tier's limits.
    ASSERT_GE(pools.pools(0).tiers_size(), 1);
    for (const auto &tier : pools.pools(0).tiers()) {
        EXPECT_GT(tier.claim_latency_us_buckets_size(), 0) << tier.tier().name();
        EXPECT_EQ(tier.claim_latency_counts_size(), tier.claim_latency_us_buckets_size()) << tier.tier().name();
        EXPECT_GT(tier.tier().limits().pids(), 0) << tier.tier().name();
        EXPECT_GT(tier.tier().max_count(), 0) << tier.tier().name();
    }
    for (const auto &[pool, sandbox] : std::vector<std::pair<std::string, std::string>>{
             {pools.pools(0).name(), "no-such-sandbox"}, {"no-such-pool", "no-such-sandbox"}}) {
        v1::WatchSandboxSamplesRequest request;
        request.set_pool(pool);
        request.set_sandbox_id(sandbox);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        auto reader = broker->operations->WatchSandboxSamples(&ctx, request);
        v1::SandboxSamples batch;
        EXPECT_FALSE(reader->Read(&batch));
        const grpc::Status status = reader->Finish();
        EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << pool;
        EXPECT_NE(status.error_message().find("no-such"), std::string::npos) << status.error_message();
    }
}

} // namespace paddock::test
