// Secrets end to end: the real broker and pool, driven through paddockctl. A granted secret reaches
// the session's commands as $NAME, and nothing recorded (events, logs) holds its value in any of the
// forms the redactor covers; a session not granted it, and a warm sandbox, never see it.
#include "tests/integration/daemons_fixture.h"

#include <sys/stat.h>

#include <fstream>
#include <set>

namespace paddock::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Random-looking, and in no other text of the test except where it is set.
const std::string kValue = "tok-7Hq2-zP9w-SECRET-4xLm";
const std::string kOtherValue = "other-Vb3n-SECRET-never-granted";

std::string base64Of(std::string_view bytes)
{
    static const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    uint32_t bits = 0;
    int held = 0;
    for (unsigned char c : bytes) {
        bits = (bits << 8) | c;
        held += 8;
        while (held >= 6) {
            held -= 6;
            out += alphabet[(bits >> held) & 63];
        }
    }
    if (held > 0)
        out += alphabet[(bits << (6 - held)) & 63];
    return out;
}

class Secrets : public DaemonsTest {
protected:
    fs::path secretsFile() const { return *m_dir / "xdg/config/paddock/secrets.toml"; }

    CliResult setSecret(const std::string &name, const std::string &input)
    {
        return runCliWithInput({"--broker", m_broker->address, "secrets", "set", name}, input);
    }

    // The run_command results, by command.
    static std::map<std::string, json> resultsByCommand(const json &events)
    {
        std::map<std::string, json> out;
        for (const auto &event : events) {
            if (event.value("kind", "") == "tool.result" && event["payload"].contains("command"))
                out[event["payload"].value("command", "")] = event["payload"];
        }
        return out;
    }
};

TEST_F(Secrets, GrantedSessionGetsTheValueAndTheLogHoldsOnlyTheMarker)
{
    const CliResult set = setSecret("DEPLOY_TOKEN", kValue + "\n");
    ASSERT_EQ(set.exitCode, 0) << set.err;
    EXPECT_NE(set.out.find("secret DEPLOY_TOKEN set (sha256:"), std::string::npos) << set.out;
    ASSERT_EQ(setSecret("OTHER_TOKEN", kOtherValue).exitCode, 0);

    struct stat st {};
    ASSERT_EQ(::stat(secretsFile().c_str(), &st), 0) << secretsFile();
    EXPECT_EQ(st.st_mode & 0777, 0600u);

    const CliResult list = cli({"secrets", "ls", "--output", "json"});
    ASSERT_EQ(list.exitCode, 0) << list.err;
    EXPECT_EQ(list.out.find(kValue), std::string::npos) << list.out;
    const json listed = json::parse(list.out);
    ASSERT_EQ(listed["secrets"].size(), 2u) << list.out;
    EXPECT_EQ(listed["secrets"][0]["name"], "DEPLOY_TOKEN");
    const std::string fingerprint = listed["secrets"][0]["fingerprint"];
    ASSERT_TRUE(fingerprint.starts_with("sha256:")) << fingerprint;
    const CliResult table = cli({"secrets", "ls"});
    EXPECT_NE(table.out.find("DEPLOY_TOKEN"), std::string::npos) << table.out;
    EXPECT_EQ(table.out.find(kValue), std::string::npos) << table.out;

    const auto playbook = writeFile("uses-secret.toml", R"(
name = "uses-secret"
goal = "use a granted secret"

[[step]]
tool = "run_command"
command = 'echo "$DEPLOY_TOKEN"'

[[step]]
tool = "run_command"
command = "env"

[[step]]
tool = "run_command"
command = 'echo "$DEPLOY_TOKEN" >&2'

[[step]]
tool = "run_command"
command = 'printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-12'

[[step]]
tool = "run_command"
command = 'printf %s "$DEPLOY_TOKEN" | base64'

[[step]]
tool = "run_command"
command = 'printf %s "$DEPLOY_TOKEN" | od -An -tx1 | tr -d " \n"'

[[step]]
tool = "run_command"
command = 'printf %s "$DEPLOY_TOKEN" | head -c 9; sleep 0.3; printf %s "$DEPLOY_TOKEN" | tail -c +10'

[[step]]
tool = "run_command"
command = 'echo "[$OTHER_TOKEN]"'

[[step]]
tool = "run_command"
command = 'tr "\0" "\n" < /proc/1/environ'

[[step]]
tool = "run_command"
command = 'printf "%s" "$DEPLOY_TOKEN" > token.txt'

[[step]]
tool = "read_file"
path = "token.txt"

[[step]]
tool = "run_command"
command = 'echo "failing with $DEPLOY_TOKEN" >&2; exit 3'
expect_exit = 3
)");
    const std::string id = submitAndFollow({"--playbook", playbook.string(), "--secret", "DEPLOY_TOKEN"});
    ASSERT_FALSE(id.empty());
    const json events = eventsOf(id);
    const std::string dumped = events.dump();

    // Nothing recorded holds the value, its base64 or its hex, nor the value never granted.
    EXPECT_EQ(dumped.find(kValue), std::string::npos);
    EXPECT_EQ(dumped.find(base64Of(kValue).substr(0, 24)), std::string::npos);
    EXPECT_EQ(dumped.find("746f6b2d3748"), std::string::npos);   // hex of "tok-7H"
    EXPECT_EQ(dumped.find("SECRET"), std::string::npos) << dumped;
    EXPECT_EQ(dumped.find(kOtherValue), std::string::npos);

    // The grant, by name only, is in session.created.
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events[0]["kind"], "session.created");
    EXPECT_EQ(events[0]["payload"]["secrets"], json::array({"DEPLOY_TOKEN"}));

    auto results = resultsByCommand(events);
    const std::string marker = "[REDACTED:DEPLOY_TOKEN]";
    EXPECT_EQ(results[R"(echo "$DEPLOY_TOKEN")"]["stdout"], marker + "\n");
    const std::string env = results["env"]["stdout"];
    EXPECT_NE(env.find("DEPLOY_TOKEN=" + marker), std::string::npos) << env;
    EXPECT_EQ(env.find("OTHER_TOKEN"), std::string::npos) << env;   // granted ones only
    EXPECT_EQ(results[R"(echo "$DEPLOY_TOKEN" >&2)"]["stderr"], marker + "\n");
    // The value in the command's environment is the one the broker keeps.
    EXPECT_EQ(results[R"(printf %s "$DEPLOY_TOKEN" | sha256sum | cut -c1-12)"]["stdout"],
              fingerprint.substr(7) + "\n");
    EXPECT_NE(results[R"(printf %s "$DEPLOY_TOKEN" | base64)"].value("stdout", "").find(marker), std::string::npos);
    EXPECT_EQ(results[R"(printf %s "$DEPLOY_TOKEN" | od -An -tx1 | tr -d " \n")"]["stdout"], marker);
    // Printed in two pieces, 300 ms apart: the chunks are assembled before they are redacted.
    EXPECT_EQ(results[R"(printf %s "$DEPLOY_TOKEN" | head -c 9; sleep 0.3; printf %s "$DEPLOY_TOKEN" | tail -c +10)"]
                     ["stdout"],
              marker);
    EXPECT_EQ(results[R"(echo "[$OTHER_TOKEN]")"]["stdout"], "[]\n");
    // The sandbox's first process started before the grant existed and never had it.
    const std::string initEnv = results[R"(tr "\0" "\n" < /proc/1/environ)"].value("stdout", "");
    EXPECT_EQ(initEnv.find("DEPLOY_TOKEN"), std::string::npos) << initEnv;
    EXPECT_EQ(initEnv.find("REDACTED"), std::string::npos) << initEnv;
    EXPECT_EQ(results[R"(echo "failing with $DEPLOY_TOKEN" >&2; exit 3)"]["stderr"], "failing with " + marker + "\n");

    bool readBack = false;
    for (const auto &event : events) {
        if (event.value("kind", "") == "tool.result" && event["payload"].value("name", "") == "read_file") {
            EXPECT_EQ(event["payload"]["content"], marker);
            readBack = true;
        }
    }
    EXPECT_TRUE(readBack) << dumped;

    // The failing command left a post-mortem on the pool, which keeps its output as it was; what
    // the broker serves of it is redacted.
    std::string postMortem;
    for (const auto &event : events) {
        if (event.value("kind", "") == "tool.result" && event["payload"].contains("post_mortem"))
            postMortem = event["payload"]["post_mortem"].value("pool", "") + "/"
                + event["payload"]["post_mortem"].value("sandbox_id", "");
    }
    ASSERT_FALSE(postMortem.empty()) << "no post-mortem named in " << dumped;
    const CliResult pm = cli({"postmortems", "show", postMortem, "--output", "json"});
    ASSERT_EQ(pm.exitCode, 0) << pm.err;
    EXPECT_EQ(pm.out.find(kValue), std::string::npos) << pm.out;
    EXPECT_EQ(json::parse(pm.out).value("last_stderr", ""), "failing with " + marker + "\n") << pm.out;
    // A debug shell restored from its snapshot reads the file the session wrote the value into: the
    // operator sees the marker, and the audit event in the session's log names no value.
    const CliResult shell = cli({"debug-shell", postMortem, "-c", "cat token.txt; echo; base64 token.txt"});
    EXPECT_EQ(shell.exitCode, 0) << shell.err;
    EXPECT_NE(shell.out.find(marker), std::string::npos) << shell.out;
    EXPECT_EQ(shell.out.find(kValue), std::string::npos) << shell.out;
    EXPECT_EQ(shell.out.find(base64Of(kValue).substr(0, 24)), std::string::npos) << shell.out;

    const CliResult show = cli({"show", id, "--output", "json"});
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_EQ(json::parse(show.out)["secrets"], json::array({"DEPLOY_TOKEN"}));
    EXPECT_EQ(json::parse(show.out)["status"], "succeeded") << show.out;

    // Nor do the daemons' logs.
    EXPECT_EQ(m_broker->daemon.logText().find(kValue), std::string::npos);
    EXPECT_EQ(m_pool->daemon.logText().find(kValue), std::string::npos);
}

TEST_F(Secrets, ASessionNotGrantedTheSecretDoesNotSeeIt)
{
    ASSERT_EQ(setSecret("DEPLOY_TOKEN", kValue).exitCode, 0);
    const auto playbook = writeFile("no-grant.toml", R"(
goal = "look for a secret that was not granted"
[[step]]
tool = "run_command"
command = 'echo "[$DEPLOY_TOKEN]"; env'
expect_stdout = "[]"
)");
    const std::string id = submitAndFollow({"--playbook", playbook.string()});
    ASSERT_FALSE(id.empty());
    const std::string dumped = eventsOf(id).dump();
    EXPECT_EQ(dumped.find("DEPLOY_TOKEN="), std::string::npos) << dumped;
    EXPECT_EQ(dumped.find("REDACTED"), std::string::npos) << dumped;
    const CliResult show = cli({"show", id, "--output", "json"});
    EXPECT_EQ(json::parse(show.out)["secrets"], json::array());
}

// Every process the pool has started (warm sandboxes waiting for a claim included) is looked at
// from the host, through /proc/<pid>/environ: none holds a secret, even right after a session that
// was granted one ran in a sandbox of that pool.
TEST_F(Secrets, NoPooledSandboxHasTheSecretInItsEnvironment)
{
    ASSERT_EQ(setSecret("DEPLOY_TOKEN", kValue).exitCode, 0);
    const auto playbook = writeFile("grant.toml", R"(
goal = "use the secret"
[[step]]
tool = "run_command"
command = 'test -n "$DEPLOY_TOKEN"'
)");
    ASSERT_FALSE(submitAndFollow({"--playbook", playbook.string(), "--secret", "DEPLOY_TOKEN"}).empty());

    auto parentOf = [](pid_t pid) -> pid_t {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), {});
        const auto close = text.rfind(')');
        if (close == std::string::npos)
            return 0;
        std::istringstream rest(text.substr(close + 2));
        char state = 0;
        pid_t ppid = 0;
        rest >> state >> ppid;
        return ppid;
    };
    int sandboxProcesses = 0;
    for (const auto &entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])))
            continue;
        const pid_t pid = std::stoi(name);
        bool underPool = false;
        for (pid_t p = parentOf(pid), hops = 0; p > 1 && hops < 64; p = parentOf(p), ++hops) {
            if (p == m_pool->daemon.pid()) {
                underPool = true;
                break;
            }
        }
        if (!underPool)
            continue;
        ++sandboxProcesses;
        std::ifstream environ(entry.path() / "environ", std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(environ)), {});
        EXPECT_EQ(text.find(kValue), std::string::npos) << "process " << pid << " of the pool holds the secret";
        EXPECT_EQ(text.find("DEPLOY_TOKEN"), std::string::npos) << "process " << pid;
    }
    // The pool keeps warm sandboxes (--warm 2): there were processes to look at.
    EXPECT_GE(sandboxProcesses, 2);
}

TEST_F(Secrets, UnknownSecretAtSubmitIsRefusedAndNothingIsRecorded)
{
    ASSERT_EQ(setSecret("KNOWN_TOKEN", kValue).exitCode, 0);
    const CliResult submit = cli({"submit", "--playbook", "hello-c", "--secret", "KNOWN_TOKEN", "--secret", "NOPE_ONE",
                                  "--secret", "NOPE_TWO"});
    EXPECT_EQ(submit.exitCode, 5) << submit.err;
    EXPECT_NE(submit.err.find("unknown secrets NOPE_ONE, NOPE_TWO"), std::string::npos) << submit.err;
    EXPECT_NE(submit.err.find("paddockctl secrets set NOPE_ONE"), std::string::npos) << submit.err;
    EXPECT_NE(submit.err.find("KNOWN_TOKEN"), std::string::npos) << submit.err;
    const CliResult list = cli({"ls", "--output", "json"});
    ASSERT_EQ(list.exitCode, 0) << list.err;
    EXPECT_EQ(json::parse(list.out), json::array());
}

TEST_F(Secrets, BadSecretsAreRefusedWithTheFixNamed)
{
    const CliResult tooShort = setSecret("SHORT", "abc\n");
    EXPECT_EQ(tooShort.exitCode, 5) << tooShort.err;
    EXPECT_NE(tooShort.err.find("at least 4"), std::string::npos) << tooShort.err;
    const CliResult badName = setSecret("BAD-NAME", kValue);
    EXPECT_EQ(badName.exitCode, 5) << badName.err;
    EXPECT_NE(badName.err.find("environment variable"), std::string::npos) << badName.err;
    const CliResult removeUnknown = cli({"secrets", "rm", "NOT_THERE"});
    EXPECT_EQ(removeUnknown.exitCode, 3) << removeUnknown.err;
    EXPECT_NE(removeUnknown.err.find("paddockctl secrets ls"), std::string::npos) << removeUnknown.err;
    EXPECT_FALSE(fs::exists(secretsFile()));

    ASSERT_EQ(setSecret("GONE_TOKEN", kValue).exitCode, 0);
    const CliResult removed = cli({"secrets", "rm", "GONE_TOKEN"});
    EXPECT_EQ(removed.exitCode, 0) << removed.err;
    const CliResult empty = cli({"secrets", "ls"});
    EXPECT_NE(empty.out.find("no secrets"), std::string::npos) << empty.out;
}

// Not the fixture: this broker must be started over a secrets file others may read.
TEST(SecretsFile, AWorldReadableFileStopsTheBrokerWithTheFixNamed)
{
    PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
    TempDir dir;
    const fs::path file = dir / "xdg/config/paddock/secrets.toml";
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "[secrets]\nDEPLOY_TOKEN = \"" << kValue << "\"\n";
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read
                              | fs::perms::others_read);
    fs::create_directories(dir / "xdg/run");
    const std::map<std::string, std::string> env{{"XDG_CONFIG_HOME", (dir / "xdg/config").string()},
                                                 {"XDG_DATA_HOME", (dir / "xdg/data").string()},
                                                 {"XDG_RUNTIME_DIR", (dir / "xdg/run").string()}};
    const std::vector<std::string> argv{binaryPath("paddockd").string(), "--data-dir", (dir / "broker").string(),
                                        "--socket", (dir / "run/broker.sock").string(), "--pool",
                                        "local=127.0.0.1:1", "--allow-local-execution"};
    auto broker = Daemon::start(argv, dir / "broker.log", env);
    ASSERT_TRUE(broker) << broker.error().message;
    const auto exit = broker->waitExit(30s);
    ASSERT_TRUE(exit.has_value()) << "paddockd kept running over a 0644 secrets file:\n" << broker->logTail();
    EXPECT_EQ(*exit, 3) << broker->logTail();
    const std::string log = broker->logText();
    EXPECT_NE(log.find("mode 0644"), std::string::npos) << log;
    EXPECT_NE(log.find("chmod 600 " + file.string()), std::string::npos) << log;
    EXPECT_EQ(log.find(kValue), std::string::npos) << log;

    // The fix it names works.
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    auto fixed = Daemon::start(argv, dir / "broker2.log", env);
    ASSERT_TRUE(fixed) << fixed.error().message;
    ASSERT_TRUE(waitForHealthy("unix:" + (dir / "run/broker.sock").string(), 30s, &*fixed)) << fixed->logTail();
    const CliResult list = runCli({"--broker", "unix:" + (dir / "run/broker.sock").string(), "secrets", "ls"});
    EXPECT_EQ(list.exitCode, 0) << list.err;
    EXPECT_NE(list.out.find("DEPLOY_TOKEN"), std::string::npos) << list.out;
    EXPECT_EQ(fixed->terminate(), 0) << fixed->logTail();
}

} // namespace
} // namespace paddock::test
