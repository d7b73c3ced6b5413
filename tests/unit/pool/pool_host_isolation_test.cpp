// Nothing of the host is readable from a sandbox, on every tier, with the pool run as root like the
// packaged system unit: a 0600 root-owned file where docs/deployment.md keeps the pool's key and
// token, and a world-readable sentinel elsewhere under the host's /etc, are both invisible;
// sandbox root is an unprivileged host uid of its own (never shared by two sandboxes); every tier
// runs under the seccomp filter, and keyctl, a user namespace, bpf and mount fail with EPERM; a second sandbox's workspace is unreachable by any path, /proc included; owners
// survive a snapshot restored into another sandbox; and what agents really run (gcc, python3, a
// shell pipeline) still works.
//
// Needs root (ids other than its own, bwrap as root); skips with a message otherwise. A runtime
// missing from this machine is skipped too (scripts/setup-deps installs all three).

#include "pool/core/sandbox_pool.h"
#include "pool/init/seccomp_policy.h"
#include "pool/runtimes/minimal_etc.h"
#include "tests/support/started_pool.h"
#include "tests/support/tier_cases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

using test::TierCase;

// Where docs/deployment.md tells operators to keep the pool's TLS key and bearer token.
const fs::path kSecretDir = "/etc/paddock";

// The host files the test plants, removed when the suite ends.
struct HostBait {
    fs::path secret = kSecretDir / ("pool-token.isolation-test-" + std::to_string(::getpid()));
    fs::path sentinel = fs::path("/etc") / ("paddock-sentinel-" + std::to_string(::getpid()));
    bool madeSecretDir = false;
    std::string secretText = "SECRET-" + std::to_string(::getpid()) + "-do-not-leak";
    std::string sentinelText = "SENTINEL-" + std::to_string(::getpid());

    HostBait()
    {
        std::error_code ec;
        madeSecretDir = fs::create_directories(kSecretDir, ec);
        std::ofstream(secret) << secretText << "\n";
        ::chown(secret.c_str(), 0, 0);
        ::chmod(secret.c_str(), 0600);
        std::ofstream(sentinel) << sentinelText << "\n";
        ::chmod(sentinel.c_str(), 0644);
    }
    ~HostBait()
    {
        std::error_code ec;
        fs::remove(secret, ec);
        fs::remove(sentinel, ec);
        if (madeSecretDir)
            fs::remove(kSecretDir, ec);
    }
};

struct Harness {
    std::unique_ptr<HostBait> bait;   // before the pool, which builds its /etc at start
    std::unique_ptr<test::StartedPool> started;
    pool::SandboxPool *sandboxPool = nullptr;
    std::string skipReason;

    explicit Harness(const TierCase &c)
    {
        if (::geteuid() != 0) {
            skipReason = "needs root: the pool gives sandboxes host ids of their own only as root";
            return;
        }
        if (auto rt = pool::makeRuntime(c.runtime); !rt) {
            skipReason = "runtime '" + c.runtime + "' is not usable here (" + rt.error().message + ")";
            return;
        }
        bait = std::make_unique<HostBait>();
        const pool::TierConfig tier{.name = c.tier, .runtime = c.runtime, .warmCount = 0, .maxCount = 4,
                                    .memoryBytes = 512ll << 20, .diskBytes = 64ll << 20};
        started = std::make_unique<test::StartedPool>(
            "paddock-host-iso", test::testPoolConfig({tier}, "host-iso-" + std::to_string(::getpid())));
        sandboxPool = &started->pool();
    }
};

test::HarnessPerTier<Harness> &harnesses()
{
    static test::HarnessPerTier<Harness> all;
    return all;
}

class HostIsolation : public ::testing::TestWithParam<TierCase> {
protected:
    static void TearDownTestSuite() { harnesses().clear(); }

    void SetUp() override
    {
        Harness &h = harnesses().of(GetParam());
        if (!h.skipReason.empty())
            GTEST_SKIP() << h.skipReason;
        m_harness = &h;
        m_id = claim();
        ASSERT_FALSE(m_id.empty());
    }
    void TearDown() override
    {
        for (const auto &id : m_claimed)
            (void)pool().release(id);
    }

    pool::SandboxPool &pool() { return *m_harness->sandboxPool; }
    const HostBait &bait() { return *m_harness->bait; }
    bool gvisor() const { return GetParam().runtime == "runsc"; }

    std::string claim()
    {
        auto c = pool().claim(GetParam().tier, "host-isolation", "");
        EXPECT_TRUE(c) << (c ? "" : c.error().message);
        if (!c)
            return {};
        m_claimed.push_back(c->sandboxId);
        return c->sandboxId;
    }
    fs::path workspaceOf(const std::string &id) { return m_harness->started->sandboxDir(id) / "workspace"; }

    struct Run {
        int exitCode = -1;
        std::string out, err;
    };
    Run sh(const std::string &line, const std::string &id = {})
    {
        pool::ExecRequest req;
        req.sandboxId = id.empty() ? m_id : id;
        req.argv = {"/bin/sh", "-c", line};
        req.timeoutMs = 120000;
        Run result;
        auto r = pool().exec(req, [&](int stream, std::string_view chunk) { (stream == 1 ? result.out : result.err).append(chunk); });
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        if (r)
            result.exitCode = r->exit.exitCode;
        return result;
    }

    // "uid:gid path" per path, through Python: coreutils' stat uses statx, which fails under this
    // machine's gVisor.
    static std::string ownersOf(const std::string &paths)
    {
        return "python3 -c 'import os, sys\nfor p in sys.argv[1:]: s = os.lstat(p); print(f\"{s.st_uid}:{s.st_gid} {p}\")' " + paths;
    }

    Harness *m_harness = nullptr;
    std::string m_id;
    std::vector<std::string> m_claimed;
};

TEST_P(HostIsolation, TheHostsSecretsAndSentinelAreInvisible)
{
    ASSERT_TRUE(fs::exists(bait().secret));
    auto r = sh("cat " + bait().secret.string() + "; cat " + bait().sentinel.string() + "; echo /etc/* /etc/paddock/*; "
                "grep -rs -e " + bait().secretText + " -e " + bait().sentinelText + " /etc /run /tmp /workspace /proc/1/root/etc; "
                "echo done");
    EXPECT_EQ(r.out.find(bait().secretText), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(bait().sentinelText), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("done"), std::string::npos) << r.err;
    // /etc holds only the pool's list (and its subdirectories), nothing of the host's beyond it.
    // (Python, not ls: coreutils' statx fails under this machine's gVisor.)
    std::set<std::string> allowed;
    for (const auto &entry : pool::minimalEtcEntries())
        allowed.insert(fs::path(entry.path).begin()->string());
    auto listing = sh("python3 -c 'import os; print(\"\\n\".join(sorted(os.listdir(\"/etc\"))))'");
    std::istringstream names(listing.out);
    for (std::string name; std::getline(names, name);)
        EXPECT_TRUE(allowed.count(name)) << "/etc/" << name << " is not on the minimal /etc list";
    EXPECT_NE(listing.out.find("passwd"), std::string::npos);
    EXPECT_EQ(sh("cat /etc/shadow").exitCode == 0, false) << "no shadow file at all";
}

TEST_P(HostIsolation, SandboxRootIsAnUnprivilegedHostUidOfItsOwn)
{
    const std::string other = claim();
    ASSERT_FALSE(other.empty());
    EXPECT_EQ(sh("id -u; id -g").out, "0\n0\n");
    if (!gvisor()) {
        // gVisor shows its own emulated map; its ids show on the host side below.
        auto map = sh("cat /proc/self/uid_map");
        std::istringstream fields(map.out);
        uint64_t inside = 1, host = 0, count = 0;
        fields >> inside >> host >> count;
        EXPECT_EQ(inside, 0u) << map.out;
        EXPECT_NE(host, 0u) << "sandbox root is host root: " << map.out;
        EXPECT_GE(host, pool::IdentityRange{}.firstId) << map.out;
    }
    ASSERT_EQ(sh("echo mine > /workspace/owner-probe").exitCode, 0);
    ASSERT_EQ(sh("echo theirs > /workspace/owner-probe", other).exitCode, 0);
    struct stat mine {}, theirs {};
    ASSERT_EQ(::stat((workspaceOf(m_id) / "owner-probe").c_str(), &mine), 0);
    ASSERT_EQ(::stat((workspaceOf(other) / "owner-probe").c_str(), &theirs), 0);
    EXPECT_GE(mine.st_uid, pool::IdentityRange{}.firstId) << "a file written inside belongs to the sandbox's host uid";
    EXPECT_EQ(mine.st_gid, mine.st_uid);
    EXPECT_NE(mine.st_uid, theirs.st_uid) << "two sandboxes share host uid " << mine.st_uid;
    // Sub-ranges do not overlap: the other's block starts at least a block away.
    const uint32_t block = pool::IdentityRange{}.idsPerSandbox;
    EXPECT_GE(mine.st_uid > theirs.st_uid ? mine.st_uid - theirs.st_uid : theirs.st_uid - mine.st_uid, block);
}

TEST_P(HostIsolation, DeniedCallsFailWithEpermAndTheFilterIsLoaded)
{
    // Filter mode 2 on every tier: under runsc, gVisor's kernel enforces it.
    auto status = sh("grep -E '^Seccomp' /proc/self/status");
    EXPECT_NE(status.out.find("Seccomp:\t2"), std::string::npos) << status.out;
    const char *probe = R"PY(
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = libc.syscall(*args)
    print(name, 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
call('keyctl', 250, 0, -3, 0)                      # KEYCTL_GET_KEYRING_ID of the session keyring
call('bpf', 321, 5, 0, 0)                          # BPF_PROG_LOAD
call('unshare', 272, 0x10000000)                   # CLONE_NEWUSER
call('mount', 165, b'none', b'/tmp', b'tmpfs', 0, 0)
call('userfaultfd', 323, 0)
)PY";
    auto r = sh(std::string("python3 -c \"") + probe + "\"");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    for (const char *call : {"keyctl", "bpf", "unshare", "mount", "userfaultfd"})
        EXPECT_NE(r.out.find(std::string(call) + " EPERM"), std::string::npos) << call << ": " << r.out;
    auto unshare = sh("unshare -U true 2>&1; echo exit=$?");
    EXPECT_NE(unshare.out.find("Operation not permitted"), std::string::npos) << unshare.out;
    EXPECT_EQ(unshare.out.find("exit=0"), std::string::npos) << unshare.out;
}

TEST_P(HostIsolation, AnotherSandboxsWorkspaceIsUnreachable)
{
    const std::string other = claim();
    ASSERT_FALSE(other.empty());
    const std::string marker = "marker-" + other;
    ASSERT_EQ(sh("echo " + marker + " > /workspace/" + marker + "; sleep 31 >/dev/null 2>&1 &", other).exitCode, 0);
    auto r = sh("cat " + (workspaceOf(other) / marker).string() + " /proc/[0-9]*/root/workspace/" + marker +
                " /proc/[0-9]*/cwd/" + marker + " 2>/dev/null; ls /workspace; echo pids $(ls -d /proc/[0-9]* | wc -l)");
    EXPECT_EQ(r.out.find(marker), std::string::npos) << "the other sandbox's file was read: " << r.out;
    EXPECT_NE(r.out.find("pids "), std::string::npos) << r.err;
    // While the other sandbox runs `sleep 3.5`, it is not among our processes ("3[.]5": grep's
    // own argument must not match itself), while the other sandbox sees it (the control).
    std::thread sleeper([&] { sh("sleep 3.5", other); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const std::string count = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -cx '3[.]5'";
    EXPECT_EQ(sh(count).out, "0\n");
    EXPECT_EQ(sh(count, other).out, "1\n") << "control: the other sandbox sees its own sleep";
    sleeper.join();
}

TEST_P(HostIsolation, TheKernelsHostDetailsAreMaskedInProc)
{
    auto r = sh("for f in /proc/kcore /proc/keys /proc/timer_list /proc/sysrq-trigger; do "
                "[ -e $f ] && echo \"$f $(head -c 64 $f 2>/dev/null | wc -c)\"; done; "
                "echo b > /proc/sysrq-trigger 2>/dev/null && echo sysrq-written; true");
    EXPECT_EQ(r.out.find("sysrq-written"), std::string::npos) << r.out;
    std::istringstream lines(r.out);
    int checked = 0;
    for (std::string line; std::getline(lines, line); ++checked)
        EXPECT_EQ(line.substr(line.rfind(' ') + 1), "0") << line << " shows the host's data";
    if (!gvisor()) {
        // The same /proc files as the host's kernel has, each read and found empty: not skipped.
        int onHost = 0;
        for (const char *f : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sysrq-trigger"})
            onHost += fs::exists(f) ? 1 : 0;
        EXPECT_GT(onHost, 0);
        EXPECT_EQ(checked, onHost) << r.out;
    }
}

TEST_P(HostIsolation, OwnersSurviveARestoreIntoAnotherSandbox)
{
    ASSERT_EQ(sh("mkdir -p /workspace/d && echo a > /workspace/f && echo b > /workspace/d/g").exitCode, 0);
    // Sandbox processes have no CAP_CHOWN: give d/g to id 1000:1001 of the block from the host.
    struct stat mine {};
    ASSERT_EQ(::stat((workspaceOf(m_id) / "f").c_str(), &mine), 0);
    ASSERT_EQ(::lchown((workspaceOf(m_id) / "d/g").c_str(), mine.st_uid + 1000, mine.st_gid + 1001), 0);
    ASSERT_EQ(sh(ownersOf("/workspace/d/g")).out, "1000:1001 /workspace/d/g\n");
    auto snap = pool().snapshot(m_id);
    ASSERT_TRUE(snap) << snap.error().message;
    const std::string other = claim();
    ASSERT_FALSE(other.empty());
    auto restored = pool().restore(other, snap->ref);
    ASSERT_TRUE(restored) << restored.error().message;
    EXPECT_EQ(sh(ownersOf("/workspace/f /workspace/d/g"), other).out, "0:0 /workspace/f\n1000:1001 /workspace/d/g\n");
    struct stat f {}, g {};
    ASSERT_EQ(::stat((workspaceOf(other) / "f").c_str(), &f), 0);
    ASSERT_EQ(::stat((workspaceOf(other) / "d/g").c_str(), &g), 0);
    EXPECT_GE(f.st_uid, pool::IdentityRange{}.firstId);
    EXPECT_NE(f.st_uid, mine.st_uid) << "restored into the other sandbox's block";
    EXPECT_EQ(g.st_uid, f.st_uid + 1000) << "the same id inside, in the restoring sandbox's block outside";
    EXPECT_EQ(g.st_gid, f.st_gid + 1001);
    EXPECT_EQ(sh("echo more >> /workspace/f && cat /workspace/f /workspace/d/g", other).out, "a\nmore\nb\n")
        << "root inside owns what it wrote before the move";
}

TEST_P(HostIsolation, WhatAgentsRunStillWorks)
{
    auto gcc = sh("cd /workspace && printf '#include <stdio.h>\\nint main(void){puts(\"compiled\");return 0;}\\n' > t.c && "
                  "gcc -O1 t.c -o t && ./t");
    EXPECT_EQ(gcc.out, "compiled\n") << gcc.err;
    auto py = sh("python3 -c 'import json, ssl, hashlib; print(json.dumps({\"ok\": hashlib.sha256(b\"x\").hexdigest()[:8]}))'");
    EXPECT_EQ(py.out, "{\"ok\": \"2d711642\"}\n") << py.err;
    EXPECT_EQ(sh("printf 'b\\na\\nc\\n' | sort | head -2 | tr a-z A-Z").out, "A\nB\n");
    EXPECT_EQ(sh("python3 -c 'import os, pwd; print(pwd.getpwuid(os.stat(\"/workspace\").st_uid).pw_name)'; whoami").out,
              "root\nroot\n")
        << "names come from the minimal passwd";
    EXPECT_EQ(sh("test -s /etc/ssl/certs/ca-certificates.crt && echo bundle").out, "bundle\n") << "the CA bundle for HTTPS";
}

INSTANTIATE_TEST_SUITE_P(Tiers, HostIsolation, test::everyTier(), test::tierCaseName);

TEST(SeccompPolicy, EveryGroupNamesItsReasonAndKnownCalls)
{
    EXPECT_GE(pool::init::seccompGroups().size(), 8u);
    std::set<std::string> seen;
    for (const auto &group : pool::init::seccompGroups()) {
        EXPECT_GT(std::string(group.reason).size(), 20u) << group.name;
        EXPECT_FALSE(group.syscalls.empty()) << group.name;
        for (const char *call : group.syscalls)
            EXPECT_TRUE(seen.insert(call).second) << call << " is listed twice";
    }
    for (const char *required : {"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
                                 "init_module", "open_by_handle_at", "mount", "setns"})
        EXPECT_TRUE(seen.count(required)) << required;
}

} // namespace
