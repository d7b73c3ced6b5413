#pragma once
// A GoogleTest fixture with a real pool and broker in a temporary directory, started per test (each
// test runs in its own process under ctest, so nothing could be shared across tests anyway).

#include "tests/integration/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>

namespace paddock::test {

inline const std::vector<std::string> kDaemonBinaries{"paddockd", "paddock-pool", "paddock-sandbox-init",
                                                      "paddockctl"};

// Skips (naming what is missing) only when a binary is truly not built.
#define PADDOCK_SKIP_IF_MISSING(names)                                                                      \
    do {                                                                                                    \
        const auto missing_ = ::paddock::test::missingBinaries(names);                                      \
        if (!missing_.empty()) {                                                                            \
            std::string list_;                                                                              \
            for (const auto &name_ : missing_)                                                              \
                list_ += " " + ::paddock::test::binaryPath(name_).string();                                 \
            GTEST_SKIP() << "not built:" << list_;                                                          \
        }                                                                                                   \
    } while (0)

class DaemonsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        m_dir = std::make_unique<TempDir>();
        // The daemons read $XDG_CONFIG_HOME/paddock/*.toml (hermeticEnv points it into m_dir).
        const auto configDir = *m_dir / "xdg/config/paddock";
        std::filesystem::create_directories(configDir);
        for (const auto &[name, text] : configFiles())
            std::ofstream(configDir / name) << text;
        auto pool = startPool(*m_dir, 30s, poolArgs());
        ASSERT_TRUE(pool) << "cannot start paddock-pool: " << pool.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*pool));
        auto broker = startBroker(*m_dir, m_pool->endpoint);
        ASSERT_TRUE(broker) << "cannot start paddockd: " << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    // More paddock-pool flags for this fixture's pool (default: none, one lite tier).
    virtual std::vector<std::string> poolArgs() const { return {}; }
    // Files written to the daemons' config directory before they start, by name (e.g. "pool.toml").
    virtual std::map<std::string, std::string> configFiles() const { return {}; }

    void TearDown() override
    {
        // Print the daemons' logs when something failed: that is where the reason usually is.
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->daemon.logTail(80);
            if (m_pool)
                std::cerr << "---- paddock-pool log (tail) ----\n" << m_pool->daemon.logTail(80);
        }
        if (m_broker)
            m_broker->daemon.terminate();
        if (m_pool)
            m_pool->daemon.terminate();
    }

    // paddockctl against this test's broker.
    CliResult cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 180s)
    {
        args.insert(args.begin(), {"--broker", m_broker->address});
        return runCli(args, {}, timeout);
    }

    std::filesystem::path writeFile(std::string_view name, std::string_view text)
    {
        const auto path = *m_dir / name;
        std::ofstream(path) << text;
        return path;
    }

    static std::vector<nlohmann::json> jsonLines(const std::string &text)
    {
        std::vector<nlohmann::json> out;
        for (const auto &line : splitLines(text)) {
            auto value = nlohmann::json::parse(line, nullptr, false);
            EXPECT_FALSE(value.is_discarded()) << "not JSON: " << line;
            if (!value.is_discarded())
                out.push_back(std::move(value));
        }
        return out;
    }

    // `paddockctl events ID --output json`, every event as one array.
    nlohmann::json eventsOf(const std::string &id)
    {
        const CliResult events = cli({"events", id, "--output", "json"});
        EXPECT_EQ(events.exitCode, 0) << events.err;
        nlohmann::json all = nlohmann::json::array();
        for (auto &line : jsonLines(events.out))
            all.push_back(std::move(line));
        return all;
    }

    // submit ... -f --output json: the first line is the session, the rest its events.
    std::string submitAndFollow(const std::vector<std::string> &submitArgs, int expectedExit = 0)
    {
        std::vector<std::string> args{"submit"};
        args.insert(args.end(), submitArgs.begin(), submitArgs.end());
        args.insert(args.end(), {"-f", "--output", "json"});
        const CliResult result = cli(args);
        EXPECT_EQ(result.exitCode, expectedExit) << "stderr: " << result.err << "\nstdout: " << result.out;
        const auto lines = jsonLines(result.out);
        if (lines.empty() || !lines.front().contains("id")) {
            ADD_FAILURE() << "submit -f printed no session first: " << result.out;
            return {};
        }
        return lines.front()["id"].get<std::string>();
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<BrokerProcess> m_broker;
};

} // namespace paddock::test
