// StepEngine's loop: the leaser that takes leases on runnable sessions and queues their steps,
// the step threads that take a step (or finish a parked one), the lease keeper, the idle
// releaser's scan, the dispatch of one step to its kind of effect (step_engine_*.cpp) and the
// compare-and-append of a step's result.
//
// Threads: start() and stop() from the owner; one thread runs leaserLoop, `workers` threads
// workerLoop, one keeperLoop, one idleLoop; resume() is called from whichever thread a parked
// step's call completes on. The queues, m_activeLeases and the counters are guarded by
// m_leasesMutex.

#include "broker/engine/step_engine.h"
#include "broker/engine/step_engine_internal.h"
#include "broker/engine/tool_routes.h"
#include "broker/llm/tool_catalogue.h"
#include "broker/metrics/broker_metrics.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>

namespace paddock::engine {

namespace {

using nlohmann::json;

// Program output is arbitrary bytes; recorded JSON must stay valid, so invalid UTF-8 is replaced.
std::string dumpJson(const json &j)
{
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace

bool onlyPeopleActed(const std::vector<core::Event> &events)
{
    for (const auto &e : events) {
        if (e.kind == core::kind::StateChanged) {
            const auto payload = json::parse(e.payload, nullptr, false);
            const std::string status = payload.is_object() ? payload.value("status", std::string()) : std::string();
            if (status != "paused" && status != "running")
                return false;
        } else if (e.kind != core::kind::TierOverride && e.kind != core::kind::EnvDecision
                   && e.kind != core::kind::ApprovalFetched && e.kind != core::kind::ApprovalDecided) {
            return false;
        }
    }
    return true;
}

core::NewEvent event(const char *kind, const json &payload)
{
    return core::NewEvent{kind, dumpJson(payload), 0};
}

std::string stringArg(const llm::ToolCall &call, const char *key)
{
    auto it = call.arguments.find(key);
    return it != call.arguments.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json toolResultBase(const llm::ToolCall &call)
{
    return json{{"call_id", call.id}, {"name", call.name}};
}

int64_t nowUnixUs()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t nowUnixMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

int defaultStepWorkers()
{
    return std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
}

StepEngine::StepEngine(store::EventStore &store, const placement::PoolSet &pools, ModelLookup models,
                       EngineOptions options)
    : m_store(store), m_pools(pools), m_models(std::move(models)), m_options(std::move(options)),
      m_output(store, m_options.output)
{
    if (m_options.workers <= 0)
        m_options.workers = defaultStepWorkers();
}

StepEngine::~StepEngine()
{
    stop();
}

void StepEngine::start()
{
    m_stopping = false;
    {
        std::lock_guard lock(m_leasesMutex);
        m_cancelling = false;
        m_workersQuit = false;
    }
    for (int i = 0; i < m_options.workers; ++i)
        m_workers.emplace_back([this] { workerLoop(); });
    m_leaser = std::thread([this] { leaserLoop(); });
    m_keeper = std::thread([this] { keeperLoop(); });
    if (m_options.sandboxIdleReleaseMs > 0)
        m_idleReleaser = std::thread([this] { idleLoop(); });
}

void StepEngine::stop()
{
    m_stopping = true;
    {
        // The keeper and the idle releaser check m_stopping under the mutex before they wait:
        // taking it here means each either sees it or is waiting for this notification.
        std::lock_guard lock(m_leasesMutex);
    }
    m_keeperWake.notify_all();
    m_taskSpace.notify_all();
    if (m_leaser.joinable())
        m_leaser.join();   // no new steps from here on
    std::unique_lock lock(m_leasesMutex);
    if (!m_idle.wait_for(lock, std::chrono::milliseconds(m_options.drainMs), [&] { return m_activeLeases.empty(); })) {
        spdlog::info("cancelling the pool and model calls of {} steps still running after {} ms; they resume on "
                     "restart", m_activeLeases.size(), m_options.drainMs);
        m_cancelling = true;
        // Until every call has called back: a call that was starting while the others were
        // cancelled is caught by the next round.
        int rounds = 0;
        while (m_callsInFlight > 0) {
            lock.unlock();
            cancelCalls();
            lock.lock();
            m_idle.wait_for(lock, std::chrono::milliseconds(100), [&] { return m_callsInFlight == 0; });
            if (++rounds % 100 == 0)
                spdlog::warn("still waiting for {} cancelled calls to call back", m_callsInFlight);
        }
    }
    m_workersQuit = true;   // workers finish what is queued (the cancelled calls' steps), then exit
    lock.unlock();
    m_taskReady.notify_all();
    for (auto &worker : m_workers) {
        if (worker.joinable())
            worker.join();
    }
    m_workers.clear();
    if (m_keeper.joinable())
        m_keeper.join();
    if (m_idleReleaser.joinable())
        m_idleReleaser.join();
}

void StepEngine::cancelCalls()
{
    m_pools.cancelInFlight();
    std::set<llm::ModelAdapter *> adapters;
    {
        std::lock_guard lock(m_leasesMutex);
        adapters = m_adapters;
    }
    for (llm::ModelAdapter *adapter : adapters)
        adapter->cancelInFlight();
}

void StepEngine::leaserLoop()
{
    const std::string workerId = m_options.workerPrefix;
    const size_t backlog = static_cast<size_t>(m_options.workers);
    while (!m_stopping) {
        {
            // Steps wait in the store's lease table, in its order, rather than in this queue.
            std::unique_lock lock(m_leasesMutex);
            m_taskSpace.wait(lock, [&] { return m_stopping || m_fresh.size() < backlog; });
        }
        if (m_stopping)
            break;
        auto lease = m_store.acquireLease(workerId, m_options.leaseMs, m_options.idleWaitMs);
        if (!lease)
            continue;
        {
            std::lock_guard lock(m_leasesMutex);
            m_activeLeases[lease->token] = *lease;
            m_fresh.push_back({*lease, {}});
        }
        m_taskReady.notify_one();
    }
}

void StepEngine::workerLoop()
{
    for (;;) {
        Task task;
        {
            std::unique_lock lock(m_leasesMutex);
            m_taskReady.wait(lock, [&] { return !m_resumed.empty() || !m_fresh.empty() || m_workersQuit; });
            if (m_resumed.empty() && m_fresh.empty())
                return;
            std::deque<Task> &queue = m_resumed.empty() ? m_fresh : m_resumed;
            task = std::move(queue.front());
            queue.pop_front();
        }
        m_taskSpace.notify_one();
        StepOutcome outcome;
        try {
            if (task.resume)
                outcome = task.resume();
            else if (m_cancelling)
                outcome = {ActionKind::None, false, 0, "the broker is stopping"};
            else
                outcome = step(StepRun{task.lease, true});
        } catch (const std::exception &e) {
            // A bug in one step must not take the broker down; the session is retried later.
            spdlog::error("step of session {} threw: {}", task.lease.sessionId, e.what());
            outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
        }
        if (!outcome.parked)
            finishStep(task.lease, outcome);
    }
}

namespace {
thread_local WaitingThread *t_waiting = nullptr;
} // namespace

WaitingThread::WaitingThread() : m_outer(t_waiting)
{
    t_waiting = this;
}

WaitingThread::~WaitingThread()
{
    t_waiting = m_outer;
}

WaitingThread *WaitingThread::current()
{
    return t_waiting;
}

void WaitingThread::post(std::function<void()> work)
{
    std::lock_guard lock(m_mutex);
    m_work.push_back(std::move(work));
    m_wake.notify_one();
}

void WaitingThread::answered()
{
    std::lock_guard lock(m_mutex);
    m_answered = true;
    m_wake.notify_one();
}

void WaitingThread::wait()
{
    for (;;) {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [&] { return m_answered || !m_work.empty(); });
        if (m_work.empty())
            return;
        auto work = std::move(m_work.front());
        m_work.pop_front();
        lock.unlock();
        work();
    }
}

void StepEngine::resume(const store::Lease &lease, std::function<StepOutcome()> rest)
{
    {
        std::lock_guard lock(m_leasesMutex);
        m_resumed.push_back({lease, std::move(rest)});
    }
    m_taskReady.notify_one();
}

void StepEngine::finishStep(const store::Lease &lease, const StepOutcome &outcome)
{
    {
        std::lock_guard lock(m_leasesMutex);
        m_activeLeases.erase(lease.token);
        if (m_activeLeases.empty())
            m_idle.notify_all();
    }
    broker_metrics::countStep(actionName(outcome.action));
    if (!outcome.note.empty())
        spdlog::debug("session {}: {} ({})", lease.sessionId, actionName(outcome.action), outcome.note);
    m_store.releaseLease(lease, outcome.retryAfterMs);
}

void StepEngine::keeperLoop()
{
    std::unique_lock lock(m_leasesMutex);
    while (!m_stopping) {
        m_keeperWake.wait_for(lock, std::chrono::milliseconds(m_options.leaseMs / 3));
        for (auto &[token, lease] : m_activeLeases) {
            if (!m_store.renewLease(lease, m_options.leaseMs))
                spdlog::warn("lease on session {} expired during a step; its result will lose the race",
                             lease.sessionId);
        }
    }
}

namespace {

// The tool.result of a call that is not carried out: a tool the catalogue lacks, arguments its
// definition refuses, or a tool the engine has no route for; nullopt for a call to carry out.
std::optional<core::NewEvent> refusedCall(const Action &action)
{
    std::string problem;
    if (auto checked = llm::checkToolCall(action.call); !checked)
        problem = checked.error().message;
    else if (!toolRoute(action.call.name))
        problem = "this broker cannot carry out the tool '" + action.call.name + "' (broker/engine/tool_routes.h "
            "has no route for it); use one of " + llm::toolNameList();
    if (problem.empty())
        return std::nullopt;
    json result = toolResultBase(action.call);
    result["error"] = problem;
    return event(core::kind::ToolResult, result);
}

} // namespace

StepOutcome StepEngine::runOneStep(const store::Lease &lease)
{
    return step(StepRun{lease, false});
}

StepOutcome StepEngine::step(const StepRun &run)
{
    const std::string &id = run.lease.sessionId;
    auto fold = m_folds.take(m_store, id);
    if (!fold)
        return {ActionKind::None, false, m_options.retryAfterUnavailableMs, fold.error().message};
    Action action = (*fold)->decide();
    action.leaseToken = run.lease.token;
    std::optional<llm::ModelContext> context;
    if (action.kind == ActionKind::CallModel || action.withModelCall)
        context = (*fold)->modelContext();
    if (context) {
        llm::ModelAdapter *model = m_models(action.state.model);
        if (model && model->readsEnvironment())
            context->environment = environmentBrief(m_options.decider, action.state);
    }
    if (core::isTerminal(action.state.status) && action.state.sandboxId.empty()) {
        m_folds.forget(id);   // over and holding nothing: no step comes after this one
        m_claimQueue.leave(id);
        std::lock_guard lock(m_leasesMutex);
        m_callRecordedUnixUs.erase(id);
    } else {
        m_folds.put(id, std::move(*fold));
    }
    // A claim, a release and a tier move look further back than the fold keeps (why the sandbox
    // before went, the tier decision's samples): they read the whole log, once or twice per session.
    std::vector<core::Event> log;
    if (action.kind == ActionKind::ClaimSandbox || action.kind == ActionKind::ReleaseSandbox
        || action.kind == ActionKind::MoveTier) {
        auto events = m_store.readEvents(id, 1, INT_MAX);
        if (!events)
            return {ActionKind::None, false, m_options.retryAfterUnavailableMs, events.error().message};
        log = std::move(*events);
    }

    switch (action.kind) {
    case ActionKind::None:
        return {};
    case ActionKind::ClaimSandbox:
        return claimSandbox(run, action, log, std::move(context));
    case ActionKind::CallModel:
        return callModel(run, action, std::move(*context));
    case ActionKind::RunTool: {
        // Every call is checked against its tool's definition first: a model's mistake becomes the
        // call's result, which the model reads and corrects.
        if (auto refused = refusedCall(action))
            return appendResult(action, {*refused});
        switch (*toolRoute(action.call.name)) {
        case ToolRoute::Review:
            return proposeChange(run, action);
        case ToolRoute::Broker:
            return runBrokerTool(action);
        case ToolRoute::Sandbox:
        case ToolRoute::Finish:   // never a RunTool: decide() makes finish an ActionKind::Finish
            break;
        }
        return runTool(run, action);
    }
    case ActionKind::Finish: {
        if (auto refused = refusedCall(action))
            return appendResult(action, {*refused});
        const std::string status = stringArg(action.call, "status") == "failed" ? "failed" : "succeeded";
        json result = toolResultBase(action.call);
        result["ok"] = true;
        return appendResult(action, {event(core::kind::ToolResult, result),
                                     event(core::kind::StateChanged,
                                           {{"status", status}, {"reason", stringArg(action.call, "summary")}})});
    }
    case ActionKind::FailSession:
        return appendResult(action, {event(core::kind::StateChanged, {{"status", "failed"}, {"reason", action.reason}})});
    case ActionKind::ReleaseSandbox:
        return releaseSandbox(run, action, log);
    case ActionKind::MoveTier:
        return moveTier(run, action, log);
    }
    return {};
}

StepOutcome StepEngine::appendResult(const Action &action, std::vector<core::NewEvent> events)
{
    addCosts(action, events);
    // Nothing the engine records may hold a secret's value, whoever put it there (a command's
    // output, a model's text, an error message): every payload is redacted on its way to the log.
    if (m_options.secrets) {
        const auto secrets = m_options.secrets->snapshot();
        for (auto &event : events)
            secrets->redactor.redactJsonText(event.payload);
    }
    store::AppendRequest request;
    request.sessionId = action.state.id;
    request.expectedLastSeq = action.state.lastSeq;
    request.events = std::move(events);
    request.leaseToken = action.leaseToken;
    auto appended = m_store.appendSync(request);
    // A person acted on the session while its step ran (paused or resumed it, overrode its tier,
    // read or decided a review): what the step did has still happened, so it is recorded after
    // their events rather than thrown away and done again on resume: a paused command must never
    // run twice. A step the log has moved past otherwise (a cancel, or another worker after this
    // lease expired) is dropped, and the next step derives its action from the new tail.
    for (int attempt = 0; !appended && appended.error().code == ErrorCode::Aborted && attempt < 8; ++attempt) {
        auto since = m_store.readEvents(request.sessionId, request.expectedLastSeq + 1, INT_MAX);
        if (!since || since->empty() || !onlyPeopleActed(*since))
            break;
        request.expectedLastSeq = since->back().seq;
        appended = m_store.appendSync(request);
    }
    if (!appended)
        return {action.kind, false, 0, appended.error().message};
    if (std::ranges::any_of(appended->events, [](const core::Event &e) { return e.kind == core::kind::ToolCall; })) {
        // When this broker learnt that the call is recorded: its command's start is measured from here.
        std::lock_guard lock(m_leasesMutex);
        m_callRecordedUnixUs[action.state.id] = nowUnixUs();
    }
    return {action.kind, true, 0, {}};
}

bool StepEngine::hasActiveStep(const std::string &sessionId) const
{
    std::lock_guard lock(m_leasesMutex);
    return std::ranges::any_of(m_activeLeases, [&](const auto &entry) { return entry.second.sessionId == sessionId; });
}

void StepEngine::idleLoop()
{
    const auto period = std::chrono::milliseconds(std::clamp<int64_t>(m_options.sandboxIdleReleaseMs / 4, 10, 1000));
    std::unique_lock lock(m_leasesMutex);
    while (!m_stopping) {
        m_keeperWake.wait_for(lock, period);
        if (m_stopping)
            break;
        lock.unlock();
        store::SessionQuery query;
        query.statuses = {core::SessionStatus::Paused, core::SessionStatus::WaitingApproval};
        query.pageSize = 1000;
        for (;;) {
            auto page = m_store.listSessions(query);
            if (!page) {
                spdlog::warn("idle sandbox release: cannot list paused sessions: {}", page.error().message);
                break;
            }
            for (const auto &session : page->sessions) {
                if (!session.sandboxId.empty()
                    && nowUnixMs() - session.updatedUnixMs >= m_options.sandboxIdleReleaseMs && !m_stopping) {
                    try {
                        releaseIdle(session.id);
                    } catch (const std::exception &e) {
                        spdlog::error("idle release of session {} threw: {}", session.id, e.what());
                    }
                }
            }
            if (page->nextPageToken.empty())
                break;
            query.pageToken = page->nextPageToken;
        }
        lock.lock();
    }
}


} // namespace paddock::engine
