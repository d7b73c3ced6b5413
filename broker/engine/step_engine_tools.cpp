// StepEngine's sandbox tools: run_command, write_file and read_file, run by the session's pool in
// its sandbox. Granted secrets go into a command's environment; output is redacted, then clipped.
//
// Threads: the step workers run these for the session they hold the lease on. A command parks
// its step (no thread waits while it runs); commandDone runs on a worker once the pool answered.
// Files are read and written inline: the pool answers those at once.

#include "broker/engine/step_engine_internal.h"
#include "broker/llm/tool_catalogue.h"


namespace paddock::engine {

namespace {

using nlohmann::json;

} // namespace

// Keeps the head and the tail of a long output, which is where compilers and test runners put what
// matters, and says how much was left out.
std::string clipOutput(const std::string &data, bool *clipped)
{
    *clipped = data.size() > kMaxRecordedOutputBytes;
    if (!*clipped)
        return data;
    const size_t head = kMaxRecordedOutputBytes / 8;
    const size_t tail = kMaxRecordedOutputBytes - head;
    return data.substr(0, head) + "\n[... " + std::to_string(data.size() - head - tail)
        + " bytes omitted ...]\n" + data.substr(data.size() - tail);
}

// Every command the broker runs for a session carries the hosts approved for it; the pool's proxy
// allows them while that command runs (docs/egress.md, "Approved hosts").
std::vector<pool_client::EgressGrant> egressGrants(const core::SessionState &state)
{
    std::vector<pool_client::EgressGrant> out;
    for (const auto &h : state.approvedHosts)
        out.push_back({h.host, h.reviewId});
    return out;
}

namespace {

// A secret's value never reaches the log: text from a sandbox is redacted with the values of the
// snapshot the step used (nullptr: no secrets).
std::string redacted(const secrets::SecretsSnapshot *secrets, std::string text)
{
    if (secrets)
        secrets->redactor.redactInPlace(text);
    return text;
}

// Granted secrets reach this command's environment only: never a sandbox at start, never the
// log (the payload names no values, and the output is redacted). Returns the granted names the
// broker no longer holds.
std::vector<std::string> addGrantedSecrets(pool_client::ExecSpec &spec, const core::SessionState &state,
                                           const secrets::SecretsSnapshot *secrets)
{
    std::vector<std::string> missing;
    for (const auto &name : state.secrets) {
        if (secrets && secrets->values.contains(name))
            spec.env[name] = secrets->values.at(name);
        else
            missing.push_back(name);
    }
    return missing;
}

// The tool's error when granted secrets are gone: the command does not run without them.
std::string missingSecretsError(const std::vector<std::string> &missing)
{
    std::string names;
    for (const auto &name : missing)
        names += (names.empty() ? "" : ", ") + name;
    return "the command did not run: secret(s) " + names + " granted to this session no longer "
        "exist on the broker; set them again with `paddockctl secrets set NAME`, or submit without them";
}

// egress.allowed or egress.refused: one attempt of the command to reach out.
core::NewEvent egressEvent(const std::string &callId, const pool_client::EgressAttempt &a)
{
    json e{{"call_id", callId}, {"host", a.host}, {"port", a.port}, {"address", a.address},
           {"method", a.method}, {"bytes_out", a.bytesOut}, {"bytes_in", a.bytesIn},
           {"time_unix_ms", a.timeUnixMs}, {"duration_ms", a.durationMs}};
    if (!a.reason.empty())
        e["reason"] = a.reason;
    if (!a.detail.empty())
        e["detail"] = a.detail;
    if (!a.error.empty())
        e["error"] = a.error;
    if (a.open)
        e["open"] = true;
    if (a.allowed && !a.reviewId.empty()) {
        e["review_id"] = a.reviewId;
        e["detail"] = "approved in review " + a.reviewId;
    }
    return event(a.allowed ? core::kind::EgressAllowed : core::kind::EgressRefused, e);
}

// run_command: how the command ended and its output into the result (redacted before it is
// clipped, so a value cut in two by the clip cannot slip through), its attempts to reach out into
// egressEvents (recorded before the result).
void commandResult(pool_client::ExecOutcome &outcome, const std::string &poolName, const Action &action,
                   const secrets::SecretsSnapshot *secrets, json &result, std::vector<core::NewEvent> &egressEvents)
{
    bool clippedOut = false;
    bool clippedErr = false;
    result["exit_code"] = outcome.exitCode;
    result["signal"] = outcome.signal;
    result["stdout"] = clipOutput(redacted(secrets, std::move(outcome.stdoutData)), &clippedOut);
    result["stderr"] = clipOutput(redacted(secrets, std::move(outcome.stderrData)), &clippedErr);
    result["stdout_clipped"] = clippedOut;
    result["stderr_clipped"] = clippedErr;
    result["duration_ms"] = outcome.durationMs;
    result["timed_out"] = outcome.timedOut;
    result["replayed"] = outcome.replayed;
    for (const auto &a : outcome.egress)
        egressEvents.push_back(egressEvent(action.call.id, a));
    if (!outcome.reason.empty())
        result["reason"] = outcome.reason;   // the pool's name for an abnormal end
    // What the sandbox's cgroup measured around the command: a command shorter than the pool's
    // sampling period has no sample, and the console shows these instead. Absent when the pool did
    // not measure (a sandbox without a cgroup), never a made-up zero.
    if (outcome.peakMemoryBytes > 0) {
        result["peak_memory_bytes"] = outcome.peakMemoryBytes;
        if (!outcome.peakMemoryScope.empty())
            result["peak_memory_scope"] = outcome.peakMemoryScope;
    }
    if (outcome.cpuTimeUs > 0)
        result["cpu_time_ms"] = static_cast<double>(outcome.cpuTimeUs) / 1000.0;
    // The pool kept a post-mortem of this failure: where an operator finds it.
    if (!outcome.reason.empty() || outcome.exitCode != 0 || outcome.signal != 0)
        result["post_mortem"] = {{"pool", poolName}, {"sandbox_id", action.state.sandboxId}};
}

// read_file: the content, redacted and clipped, into the result.
Status readFileResult(const Action &action, const secrets::SecretsSnapshot *secrets, Result<std::string> content,
                      json &result)
{
    if (!content)
        return std::unexpected(content.error());
    bool clipped = false;
    result["path"] = stringArg(action.call, "path");
    result["content"] = clipOutput(redacted(secrets, std::move(*content)), &clipped);
    result["content_clipped"] = clipped;
    return {};
}

} // namespace

StepOutcome StepEngine::runTool(const StepRun &run, const Action &action)
{
    const llm::ToolCall &call = action.call;
    pool_client::PoolClient *pool = m_pools.find(action.state.pool);
    if (!pool) {
        return appendResult(action, {event(core::kind::SandboxFailed,
                                           {{"sandbox_id", action.state.sandboxId},
                                            {"reason", "pool_lost"},
                                            {"error", "pool '" + action.state.pool + "' is no longer configured"}})});
    }

    json result = toolResultBase(call);
    // One consistent set of secrets for the whole step: the values injected are the ones redacted.
    std::shared_ptr<const secrets::SecretsSnapshot> secrets;
    if (m_options.secrets)
        secrets = m_options.secrets->snapshot();
    if (call.name == llm::tool::RunCommand) {
        pool_client::ExecSpec spec;
        const std::vector<std::string> missing = addGrantedSecrets(spec, action.state, secrets.get());
        if (!missing.empty()) {
            result["command"] = stringArg(call, "command");
            result["error"] = missingSecretsError(missing);
            return appendResult(action, {event(core::kind::ToolResult, result)});
        }
        spec.sandboxId = action.state.sandboxId;
        spec.argv = {"/bin/sh", "-c", stringArg(call, "command")};
        spec.timeoutMs = call.arguments.value("timeout_ms", m_options.defaultCommandTimeoutMs);
        spec.idempotencyKey = action.idempotencyKey;
        spec.replayOnly = action.replayOnly;
        spec.egressGrants = egressGrants(action.state);
        // Its output goes into the log while it runs; the result is appended after the last of it.
        auto output = m_output.open({action.state.id, call.id, action.state.lastSeq, action.outputRecorded, secrets,
                                     action.leaseToken});
        using Ran = std::pair<Result<pool_client::ExecOutcome>, int64_t>;   // and the log's end after the output
        return awaitCall<Ran>(
            run,
            [this, pool, spec, output](std::function<void(Ran)> done) {
                pool->execAsync(
                    spec, [this, output](int stream, const std::string &chunk) { m_output.add(*output, stream, chunk); },
                    [this, output, done = std::move(done)](Result<pool_client::ExecOutcome> ran) {
                        m_output.close(output, [done, ran = std::move(ran)](int64_t lastSeq) {
                            done(Ran{ran, lastSeq});
                        });
                    });
            },
            [this, run, action, pool, secrets](Ran ran) {
                Action after = action;
                after.state.lastSeq = ran.second;
                return commandDone(run, after, *pool, secrets, std::move(ran.first));
            });
    }
    const std::string sandboxId = action.state.sandboxId;
    const std::string path = stringArg(call, "path");
    if (call.name == llm::tool::WriteFile) {
        const std::string content = stringArg(call, "content");
        return awaitCall<Status>(
            run,
            [pool, sandboxId, path, content](std::function<void(Status)> done) {
                pool->writeFileAsync(sandboxId, path, content, 0644, std::move(done));
            },
            [this, run, action, pool, path, bytes = content.size(), result](Status written) mutable {
                if (written) {
                    result["path"] = path;
                    result["bytes"] = bytes;
                }
                return toolDone(run, action, *pool, std::move(written), std::move(result), {});
            });
    }
    if (call.name == llm::tool::ReadFile) {
        using Read = Result<std::string>;
        return awaitCall<Read>(
            run,
            [pool, sandboxId, path](std::function<void(Read)> done) {
                pool->readFileAsync(sandboxId, path, 0, std::move(done));
            },
            [this, run, action, pool, secrets, result](Read content) mutable {
                Status done = readFileResult(action, secrets.get(), std::move(content), result);
                return toolDone(run, action, *pool, std::move(done), std::move(result), {});
            });
    }
    result["error"] = "unknown tool '" + call.name + "'; the tools are " + llm::toolNameList();
    return toolDone(run, action, *pool, {}, std::move(result), {});
}

StepOutcome StepEngine::commandDone(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                    std::shared_ptr<const secrets::SecretsSnapshot> secrets,
                                    Result<pool_client::ExecOutcome> ran)
{
    json result = toolResultBase(action.call);
    result["command"] = stringArg(action.call, "command");
    std::vector<core::NewEvent> egressEvents;   // the command's attempts to reach out, before its result
    int64_t recordedUnixUs = 0;
    {
        std::lock_guard lock(m_leasesMutex);
        if (auto it = m_callRecordedUnixUs.find(action.state.id); it != m_callRecordedUnixUs.end()) {
            recordedUnixUs = it->second;
            m_callRecordedUnixUs.erase(it);
        }
    }
    if (!ran)
        return toolDone(run, action, pool, std::unexpected(ran.error()), std::move(result), {});
    commandResult(*ran, pool.name(), action, secrets.get(), result, egressEvents);
    // From the tool.call recorded (as this broker was told) to the command spawned in its sandbox:
    // the engine's and the pool's share of the wait before a command runs. Only for a first run
    // whose call this broker recorded; across hosts it includes their clocks' difference.
    if (recordedUnixUs > 0 && ran->startedUnixUs > 0 && !ran->replayed)
        result["start_after_ms"] = static_cast<double>(ran->startedUnixUs - recordedUnixUs) / 1000.0;
    return toolDone(run, action, pool, {}, std::move(result), std::move(egressEvents));
}

StepOutcome StepEngine::toolDone(const StepRun &run, const Action &action, pool_client::PoolClient &pool, Status done,
                                 json result, std::vector<core::NewEvent> events)
{
    const llm::ToolCall &call = action.call;
    if (!done) {
        const auto &error = done.error();
        if (action.replayOnly && error.code == ErrorCode::NotFound)
            return {action.kind, false, 0, kNothingRan};
        if (auto outcome = poolTrouble(action, pool, error))
            return *outcome;
        // Anything else is the tool's own failure (a missing file, say): the model gets to see it.
        result["error"] = error.message;
        if (error.code == ErrorCode::FailedPrecondition && error.message.find("has died") != std::string::npos)
            result["post_mortem"] = {{"pool", pool.name()}, {"sandbox_id", action.state.sandboxId}};   // reason "crashed"
    }
    events.push_back(event(core::kind::ToolResult, result));
    // A snapshot after every step that can change the workspace, recorded with the step's result:
    // if the pool is lost later, the session resumes from here and repeats at most the one step in
    // flight (docs/deployment.md has the figures behind "every step").
    if (done && (call.name == llm::tool::RunCommand || call.name == llm::tool::WriteFile)) {
        // The pool ran the step but did not answer for its snapshot: recorded now, the step's
        // result would outlive the only copy of what it did to the workspace (a move restores the
        // snapshot before it and goes on after it). Not recorded, the step is retried: on this
        // pool its result comes from the exec's idempotency record; once the pool is lost it is
        // the one call repeated on another (tests/integration/multi_host_test.cpp). poolTrouble
        // decides which, as for the exec itself (addCheckpoint fails only with its codes).
        return checkpointThenAppend(run, action, pool, std::move(events));
    }
    return appendResult(action, std::move(events));
}

StepOutcome StepEngine::checkpointThenAppend(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                             std::vector<core::NewEvent> events)
{
    if (!m_options.checkpointer)
        return appendResult(action, std::move(events));
    return takeCheckpoint(run, pool, action.state, [this, action, &pool, events = std::move(events)](Taken taken) mutable {
        if (auto checkpointed = addCheckpoint(action, pool, std::move(taken), events); !checkpointed)
            return checkpointFailed(action, pool, checkpointed.error());
        return appendResult(action, std::move(events));
    });
}

} // namespace paddock::engine
