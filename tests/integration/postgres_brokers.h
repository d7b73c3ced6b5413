#pragma once
// Brokers of one team: paddockd processes on one database of the test's own PostgreSQL
// (tests/support/started_postgres.h), each with a socket and a data directory of its own in a
// temporary directory.
// - By default (the clients' failover tests) they run on flags (`--store`, `--pool`) with a pool
//   address nothing listens on, so the sessions stay queued and what reaches their logs is what the
//   test appends through paddockctl, on the broker it names (pause and resume append
//   state.changed; cancel ends the session).
// - With a config file (brokers_on_postgres_test), every broker runs on it: a real pool, the
//   store with a password file, whatever else the test puts there; one start may name another.
//
// Threads: the test's main thread.

#include "tests/integration/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace paddock::test {

class PostgresBrokers {
public:
    // Brokers on flags: the store at conninfo, a pool nothing listens on.
    PostgresBrokers(const TempDir &dir, std::string conninfo, int count)
        : m_dir(dir), m_conninfo(std::move(conninfo)), m_daemons(static_cast<size_t>(count))
    {
        m_pool = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    }
    // Brokers on a broker.toml (its [store] and [[pool]] included), with `workers` step threads.
    PostgresBrokers(const TempDir &dir, std::filesystem::path config, int count, int workers)
        : m_dir(dir), m_config(std::move(config)), m_workers(workers), m_daemons(static_cast<size_t>(count))
    {
    }

    ~PostgresBrokers()
    {
        for (auto &daemon : m_daemons) {
            if (daemon)
                daemon->terminate();
        }
    }

    // Starts paddockd as broker i (its socket and data directory) without waiting for it; on
    // config instead of the brokers' own file when given.
    Result<Daemon> launch(int i, const std::filesystem::path &config = {})
    {
        const std::string name = "broker-" + std::to_string(i);
        std::filesystem::create_directories(m_dir / "run");
        std::filesystem::create_directories(m_dir / name);
        std::vector<std::string> args{binaryPath("paddockd").string(), "--data-dir", (m_dir / name).string(),
                                      "--socket", socket(i), "--playbook-dir", playbookDir().string(),
                                      "--workers", std::to_string(m_workers)};
        if (!config.empty() || !m_config.empty())
            args.insert(args.end(), {"--config", (config.empty() ? m_config : config).string()});
        else
            args.insert(args.end(), {"--pool", "local=" + m_pool, "--allow-local-execution", "--store", m_conninfo});
        const std::map<std::string, std::string> env{{"XDG_CONFIG_HOME", (m_dir / "xdg/config").string()},
                                                     {"XDG_DATA_HOME", (m_dir / "xdg/data").string()},
                                                     {"XDG_RUNTIME_DIR", (m_dir / "xdg/run").string()},
                                                     {"PGPASSFILE", (m_dir / "no.pgpass").string()}};
        return Daemon::start(args, m_dir / (name + "-" + std::to_string(++m_starts) + ".log"), env);
    }

    // Starts broker i (again, after a kill) and waits until it serves.
    Status start(int i, const std::filesystem::path &config = {})
    {
        auto daemon = launch(i, config);
        if (!daemon)
            return std::unexpected(daemon.error());
        if (m_daemons.size() <= static_cast<size_t>(i))
            m_daemons.resize(static_cast<size_t>(i) + 1);
        m_daemons[static_cast<size_t>(i)] = std::make_unique<Daemon>(std::move(*daemon));
        return waitForHealthy(address(i), 60s, m_daemons[static_cast<size_t>(i)].get());
    }

    void kill9(int i) { m_daemons[static_cast<size_t>(i)]->kill9(); }
    Daemon &daemon(int i) { return *m_daemons[static_cast<size_t>(i)]; }
    size_t size() const { return m_daemons.size(); }

    std::string socket(int i) const { return (m_dir / ("run/broker-" + std::to_string(i) + ".sock")).string(); }
    std::string address(int i) const { return "unix:" + socket(i); }

    // paddockctl against broker i alone.
    CliResult cli(int i, std::vector<std::string> args, std::chrono::milliseconds timeout = 180s) const
    {
        args.insert(args.begin(), {"--broker", address(i)});
        return runCli(args, {}, timeout);
    }

    // A new session submitted through broker i: its id, or "" (with a failure added).
    std::string submit(int i, const std::string &requestId = {}) const
    {
        std::vector<std::string> args{"submit", "--playbook", "hello-c", "--output", "json"};
        if (!requestId.empty())
            args.insert(args.end(), {"--request-id", requestId});
        const CliResult result = cli(i, args);
        EXPECT_EQ(result.exitCode, 0) << result.err;
        const auto session = nlohmann::json::parse(result.out, nullptr, false);
        return session.is_object() ? session.value("id", std::string()) : std::string();
    }

    // Pauses, then resumes, the session through broker i: two state.changed events.
    void pauseAndResume(int i, const std::string &id) const
    {
        for (const char *verb : {"pause", "resume"}) {
            const CliResult result = cli(i, {verb, id});
            EXPECT_EQ(result.exitCode, 0) << verb << ": " << result.err;
        }
    }

    // The seqs of the session's log as broker i reads it from the database.
    std::vector<int64_t> seqs(int i, const std::string &id) const
    {
        const CliResult result = cli(i, {"events", id, "--output", "json"});
        EXPECT_EQ(result.exitCode, 0) << result.err;
        return seqsIn(result.out);
    }

    // The seqs of the JSON event lines in text (other lines, messages on stderr, are skipped).
    static std::vector<int64_t> seqsIn(const std::string &text)
    {
        std::vector<int64_t> out;
        for (const auto &line : splitLines(text)) {
            const auto event = nlohmann::json::parse(line, nullptr, false);
            if (event.is_object() && event.contains("seq") && event.contains("kind"))
                out.push_back(event["seq"].get<int64_t>());
        }
        return out;
    }

    // The logs' tails, for a failure message.
    std::string logs() const
    {
        std::string out;
        for (size_t i = 0; i < m_daemons.size(); ++i) {
            if (m_daemons[i])
                out += "---- paddockd " + std::to_string(i) + " log (tail) ----\n" + m_daemons[i]->logTail(30);
        }
        return out;
    }

private:
    const TempDir &m_dir;
    std::string m_conninfo;
    std::string m_pool;
    std::filesystem::path m_config;
    int m_workers = 2;
    std::vector<std::unique_ptr<Daemon>> m_daemons;
    int m_starts = 0;
};

} // namespace paddock::test
