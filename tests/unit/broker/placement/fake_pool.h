#pragma once
// A PoolClient the test drives: its Status, its tiers' counts, and whether it answers at all.
//
// Threads: any; every member is guarded by m_mutex.

#include "broker/pool_client/pool_client.h"

#include <mutex>
#include <string>
#include <vector>

namespace paddock::pool_client::test {

class FakePool final : public PoolClient {
public:
    explicit FakePool(std::string name) : m_name(std::move(name)) {}

    std::string name() const override { return m_name; }
    std::string endpoint() const override { return m_name + ":7701"; }

    Result<ClaimedSandbox> claim(const std::string &tier, const std::string &, const std::string &) override
    {
        std::lock_guard lock(m_mutex);
        if (down)
            return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
        ++claims;
        return ClaimedSandbox{m_name + "-sb-" + std::to_string(claims), tier, "fake", m_name, true, 0.1};
    }
    Result<ExecOutcome> exec(const ExecSpec &spec, const OutputSink &) override
    {
        std::lock_guard lock(m_mutex);
        if (down)
            return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
        ++execs;
        if (execs == downAfterExecs)
            down = true;   // this exec is answered; the snapshot after it is not
        execKeys.push_back(spec.sandboxId + " " + spec.argv.back());
        execGrants.push_back(spec.egressGrants);
        ExecOutcome out;
        out.egress = egressPerExec;
        out.stdoutData = "ran on " + m_name + "\n";
        return out;
    }
    Result<std::string> readFile(const std::string &, const std::string &, int64_t) override { return std::string(); }
    Status writeFile(const std::string &, const std::string &, const std::string &, uint32_t) override { return {}; }
    Result<std::vector<DirEntry>> listDir(const std::string &, const std::string &) override { return {}; }
    Status release(const std::string &) override
    {
        std::lock_guard lock(m_mutex);
        if (down)
            return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
        ++releases;
        return {};
    }
    Result<PoolStatus> status() override
    {
        std::lock_guard lock(m_mutex);
        ++statuses;
        if (down)
            return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
        PoolStatus out;
        out.poolId = m_name;
        out.tiers = tiers;
        return out;
    }
    // Snapshots only when `snapshots` is set (the default pool has none, like an old pool agent):
    // a ref per snapshot, and each restore remembered as "sandbox <- ref".
    Result<SnapshotInfo> snapshot(const std::string &sandboxId) override
    {
        std::lock_guard lock(m_mutex);
        if (!snapshots)
            return PoolClient::snapshot(sandboxId);
        if (down)
            return fail(ErrorCode::Unavailable, "pool '" + m_name + "' is unreachable (test)");
        ++snapshotCount;
        return SnapshotInfo{"snap-" + std::to_string(snapshotCount) + "-" + sandboxId, 100, 1, 0.1};
    }
    Result<SnapshotInfo> restore(const std::string &sandboxId, const std::string &ref) override
    {
        std::lock_guard lock(m_mutex);
        if (!snapshots)
            return PoolClient::restore(sandboxId, ref);
        restores.push_back(sandboxId + " <- " + ref);
        return SnapshotInfo{ref, 100, 1, 0.1};
    }
    void cancelInFlight() override {}

    void setDown(bool value)
    {
        std::lock_guard lock(m_mutex);
        down = value;
    }
    void setTier(const std::string &tier, int warm, int claimed, int max)
    {
        std::lock_guard lock(m_mutex);
        for (auto &t : tiers) {
            if (t.name == tier) {
                t.warm = warm;
                t.claimed = claimed;
                t.max = max;
                return;
            }
        }
        tiers.push_back({tier, "fake", warm, claimed, max, 1.0, 0});
    }
    int count(const int &field)
    {
        std::lock_guard lock(m_mutex);
        return field;
    }

    std::mutex m_mutex;
    const std::string m_name;
    bool down = false;
    std::vector<TierStatus> tiers;
    int claims = 0;
    int execs = 0;
    int downAfterExecs = 0;   // > 0: the pool dies right after answering that many execs
    int releases = 0;
    int statuses = 0;
    std::vector<std::string> execKeys;
    std::vector<std::vector<EgressGrant>> execGrants;   // the approved hosts each exec carried
    std::vector<EgressAttempt> egressPerExec;            // what every exec reports as its attempts
    bool snapshots = false;
    int snapshotCount = 0;
    std::vector<std::string> restores;
};

} // namespace paddock::pool_client::test
