#pragma once
// Sessions whose steps leave a mark, for the tests that kill brokers mid-run (fleet_crash_test,
// brokers_on_postgres_test): each of markedSteps commands appends "step-N" to marker.txt in the
// workspace and sleeps, a last command `cat`s the file, and checkMarkedLog reads a session's log
// after the kills:
// - dense seqs;
// - one tool.result per command and per call: no command run again once its result is recorded;
// - every step in the marker, each at most 1 + kills times, and all the repeats of the session at
//   most kills: at most one step repeated per crash.
// Each broken rule is one line in problems, so that hundreds of sessions do not make hundreds of
// failures.
//
// Threads: the test's main thread.

#include "tests/integration/harness.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace paddock::test {

inline std::string markerPlaybook(const std::string &name, int markedSteps, int commandSeconds)
{
    std::string text = "name = \"" + name + "\"\ngoal = \"Append one line per step to a marker file\"\n";
    for (int step = 1; step <= markedSteps; ++step) {
        text += "\n[[step]]\ntool = \"run_command\"\ncommand = \"echo step-" + std::to_string(step)
            + " >> marker.txt && sleep " + std::to_string(commandSeconds) + "\"\n";
    }
    text += "\n[[step]]\ntool = \"run_command\"\ncommand = \"cat marker.txt\"\n";
    text += "\n[[step]]\ntool = \"finish\"\nsummary = \"all steps ran\"\n";
    return text;
}

// `paddockctl ls --all --output json`, by session id (empty when it failed).
inline std::map<std::string, nlohmann::json> sessionRows(const CliResult &listed)
{
    std::map<std::string, nlohmann::json> out;
    const auto list = nlohmann::json::parse(listed.out, nullptr, false);
    if (listed.exitCode == 0 && list.is_array()) {
        for (const auto &row : list)
            out[row.value("id", std::string())] = row;
    }
    return out;
}

// The warm sandboxes of tier in `paddockctl pools --output json`; -1 when the broker did not answer.
inline int warmSandboxesOf(const CliResult &pools, const std::string &tier)
{
    const auto parsed = nlohmann::json::parse(pools.out, nullptr, false);
    if (pools.exitCode != 0 || !parsed.is_object())
        return -1;
    int warm = 0;
    for (const auto &pool : parsed.value("pools", nlohmann::json::array())) {
        for (const auto &row : pool.value("tiers", nlohmann::json::array()))
            warm += row.value("name", std::string()) == tier ? row.value("warm", 0) : 0;
    }
    return warm;
}

inline bool sessionEnded(const nlohmann::json &row)
{
    const std::string status = row.value("status", std::string());
    return status == "succeeded" || status == "failed" || status == "cancelled";
}

// Running one of the marked steps' commands, as far as the broker's log says.
inline bool midCommand(const nlohmann::json &row, int markedSteps)
{
    return row.value("status", std::string()) == "running" && row.value("last_event_kind", std::string()) == "tool.call"
        && row.value("steps", 0) < markedSteps;
}

// Whether every session of cohort (id: its results when it was taken) has ended or has more
// results in rows.
inline bool cohortMovedOn(const std::map<std::string, int> &cohort, const std::map<std::string, nlohmann::json> &rows)
{
    return std::all_of(cohort.begin(), cohort.end(), [&](const auto &entry) {
        const auto row = rows.find(entry.first);
        return row != rows.end() && (sessionEnded(row->second) || row->second.value("steps", 0) > entry.second);
    });
}

inline bool allEnded(const std::vector<std::string> &ids, const std::map<std::string, nlohmann::json> &rows)
{
    return std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
        const auto row = rows.find(id);
        return row != rows.end() && sessionEnded(row->second);
    });
}

// What one session's log showed.
struct MarkedLog {
    int repeats = 0;    // steps run twice, by the marker
    int replayed = 0;   // results the pool answered from its idempotency record
};

inline MarkedLog checkMarkedLog(const std::string &id, const std::vector<nlohmann::json> &log, int markedSteps,
                                int kills, std::vector<std::string> &problems)
{
    using nlohmann::json;
    MarkedLog out;
    for (size_t i = 0; i < log.size(); ++i) {
        if (log[i].value("seq", int64_t{0}) != static_cast<int64_t>(i) + 1) {
            problems.push_back(id + ": seq " + std::to_string(log[i].value("seq", int64_t{0})) + " at position "
                               + std::to_string(i + 1) + " (a gap or a duplicate)");
            break;
        }
    }

    std::string marker;
    std::map<std::string, int> resultsOfCommand;
    std::map<std::string, int> resultsOfCall;
    for (const auto &event : log) {
        if (event.value("kind", std::string()) != "tool.result")
            continue;
        const json payload = event.value("payload", json::object());
        if (payload.value("name", std::string()) != "run_command")
            continue;
        const std::string command = payload.value("command", std::string());
        ++resultsOfCommand[command];
        ++resultsOfCall[payload.value("call_id", std::string())];
        out.replayed += payload.value("replayed", false);
        if (command == "cat marker.txt")
            marker = payload.value("stdout", std::string());
    }
    if (resultsOfCommand.size() != static_cast<size_t>(markedSteps + 1))
        problems.push_back(id + ": results of " + std::to_string(resultsOfCommand.size()) + " commands, not "
                           + std::to_string(markedSteps + 1));
    for (const auto &[command, n] : resultsOfCommand) {
        if (n != 1)
            problems.push_back(id + ": " + std::to_string(n) + " results of `" + command + "`: a command ran again "
                               "after its result was recorded");
    }
    for (const auto &[callId, n] : resultsOfCall) {
        if (n != 1)
            problems.push_back(id + ": " + std::to_string(n) + " results of call " + callId);
    }

    std::map<std::string, int> seen;
    for (const auto &line : splitLines(marker))
        ++seen[line];
    for (int step = 1; step <= markedSteps; ++step) {
        const int count = seen["step-" + std::to_string(step)];
        if (count < 1 || count > 1 + kills)
            problems.push_back(id + ": step " + std::to_string(step) + " ran " + std::to_string(count)
                               + " times; marker: " + marker);
        out.repeats += std::max(0, count - 1);
    }
    if (out.repeats > kills)
        problems.push_back(id + ": " + std::to_string(out.repeats) + " steps repeated in " + std::to_string(kills)
                           + " crashes; marker: " + marker);
    return out;
}

} // namespace paddock::test
