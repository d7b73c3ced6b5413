// SandboxPool's egress part: allowlists per tier, one proxy socket per sandbox of an allowlist
// tier, and the attempts reported with each exec (kept per idempotency key for replays).

#include "pool/core/sandbox_pool.h"

#include <spdlog/spdlog.h>

namespace paddock::pool {
namespace fs = std::filesystem;

Result<std::map<std::string, std::shared_ptr<const egress::Allowlist>>> SandboxPool::egressPolicies(const PoolConfig &config)
{
    std::map<std::string, std::shared_ptr<const egress::Allowlist>> out;
    for (const auto &tier : config.tiers) {
        if (tier.network == "none") {
            if (!tier.allowlist.empty())
                spdlog::warn("tier '{}' has network = \"none\": its allowlist is ignored", tier.name);
            continue;
        }
        if (tier.network != "allowlist")
            return fail(ErrorCode::InvalidArgument, "tier '" + tier.name + "': network = \"" + tier.network +
                                                        "\" is not known; use \"none\" or \"allowlist\"");
        auto list = egress::Allowlist::parse(tier.allowlist);
        if (!list)
            return fail(ErrorCode::InvalidArgument, "tier '" + tier.name + "': " + list.error().message);
        if (list->empty())
            spdlog::warn("tier '{}' has network = \"allowlist\" and an empty allowlist: every attempt is refused", tier.name);
        out.emplace(tier.name, std::make_shared<const egress::Allowlist>(std::move(*list)));
    }
    return out;
}

Status SandboxPool::startEgress(const TierConfig &tier, const std::string &sandboxId, const fs::path &dir, SandboxSpec &spec)
{
    auto it = m_allowlists.find(tier.name);
    if (it == m_allowlists.end() || !m_egress)
        return {};
    const fs::path egressDir = dir / "egress";
    std::error_code ec;
    fs::create_directories(egressDir, ec);
    if (ec)
        return fail(ErrorCode::FailedPrecondition, "cannot create " + egressDir.string() + ": " + ec.message() +
                                                       "; check that the pool's --state-dir is writable");
    fs::permissions(egressDir, fs::perms::owner_all, ec);
    spec.egressSocket = egressDir / "egress.sock";
    if (auto st = m_egress->addSandbox(sandboxId, spec.egressSocket, it->second); !st)
        return st;
    // The sandbox's root connects to the socket (and its runtime binds it in through the directory).
    if (spec.identity.mapped()) {
        Status given = giveToSandbox(egressDir, spec.identity, 0700);
        if (given)
            given = giveToSandbox(spec.egressSocket, spec.identity, 0600);
        if (!given) {
            m_egress->removeSandbox(sandboxId);
            return given;
        }
    }
    std::lock_guard lock(m_egressMutex);
    m_egressSandboxes.insert(sandboxId);
    return {};
}

void SandboxPool::stopEgress(const std::string &sandboxId)
{
    {
        std::lock_guard lock(m_egressMutex);
        if (!m_egressSandboxes.erase(sandboxId))
            return;
    }
    m_egress->removeSandbox(sandboxId);
}

Result<std::shared_ptr<const egress::Grants>> SandboxPool::egressGrants(const ExecRequest &request)
{
    if (request.egressGrants.empty())
        return nullptr;
    auto grants = std::make_shared<egress::Grants>();
    for (const auto &spec : request.egressGrants) {
        auto grant = egress::Grant::parse(spec.host, spec.reviewId);
        if (!grant)
            return std::unexpected(grant.error());
        grants->push_back(std::move(*grant));
    }
    {
        std::lock_guard lock(m_egressMutex);
        if (!m_egressSandboxes.count(request.sandboxId))
            return nullptr;   // no network: nothing to open (the broker's tool result says so)
    }
    return grants;
}

uint64_t SandboxPool::holdEgress(const std::string &sandboxId, std::shared_ptr<const egress::Grants> grants)
{
    if (!grants || !m_egress)
        return 0;
    const uint64_t holder = m_nextGrantHolder++;
    m_egress->addGrants(sandboxId, holder, std::move(grants));
    return holder;
}

void SandboxPool::revokeEgress(const std::string &sandboxId, uint64_t holder)
{
    if (holder != 0 && m_egress)
        m_egress->revokeGrants(sandboxId, holder);
}

void SandboxPool::egressForExec(const std::string &sandboxId, const std::string &idempotencyKey, bool replayed,
                                EgressDone done)
{
    const std::string key = sandboxId + "\n" + idempotencyKey;
    std::vector<egress::EgressAttempt> earlier;
    bool enabled = false;
    {
        std::lock_guard lock(m_egressMutex);
        enabled = m_egressSandboxes.count(sandboxId) > 0;
        if (replayed && !idempotencyKey.empty()) {
            auto it = m_egressByKey.find(key);
            if (it != m_egressByKey.end())
                earlier = it->second;
        }
    }
    if (replayed || !enabled || !m_egress) {
        done(std::move(earlier));
        return;
    }
    m_egress->takeAttempts(sandboxId, kEgressSettleMs,
                           [this, key, keyed = !idempotencyKey.empty(), done = std::move(done)](std::vector<egress::EgressAttempt> attempts) {
                               if (keyed && !attempts.empty()) {
                                   std::lock_guard lock(m_egressMutex);
                                   if (m_egressByKey.emplace(key, attempts).second)
                                       m_egressKeyOrder.push_back(key);
                                   while (m_egressKeyOrder.size() > kEgressKeysKept) {
                                       m_egressByKey.erase(m_egressKeyOrder.front());
                                       m_egressKeyOrder.pop_front();
                                   }
                               }
                               done(std::move(attempts));
                           });
}

} // namespace paddock::pool
