#pragma once
// The pool tests that run once per tier (pool_runtime_isolation_test, pool_host_isolation_test):
// the parameter (a tier and its runtime), its name in test names, and one harness per tier (a
// StartedPool and what the test keeps beside it), made when the tier's first test needs it and
// kept until the suite ends, since starting a pool is slow. Threads: the test's main thread.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>

namespace paddock::test {

struct TierCase {
    std::string tier;
    std::string runtime;
};

// The test name's suffix: "lite", not "0".
inline std::string tierCaseName(const ::testing::TestParamInfo<TierCase> &info) { return info.param.tier; }

// What ctest lists and a failure prints: "lite (bwrap)", not the struct's bytes.
inline void PrintTo(const TierCase &c, std::ostream *os) { *os << c.tier << " (" << c.runtime << ")"; }

// Every runtime's tier, named as in pool.toml's examples; a runtime missing here is the test's
// to skip.
inline auto everyTier()
{
    return ::testing::Values(TierCase{"lite", "bwrap"}, TierCase{"standard", "runsc"}, TierCase{"oci", "crun"});
}

// Harness is made from a TierCase; a suite's TearDownTestSuite calls clear().
template <class Harness>
class HarnessPerTier {
public:
    Harness &of(const TierCase &c)
    {
        auto &harness = m_byTier[c.tier];
        if (!harness)
            harness = std::make_unique<Harness>(c);
        return *harness;
    }
    void clear() { m_byTier.clear(); }

private:
    std::map<std::string, std::unique_ptr<Harness>> m_byTier;
};

} // namespace paddock::test
