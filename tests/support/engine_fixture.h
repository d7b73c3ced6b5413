#pragma once
// The step engine's GoogleTest fixture, shared by the engine, review, secrets and failover tests and
// the in-process review test: a fresh SQLite store and a checkpoint store (the broker's own, files)
// in a temporary directory of its own, a PoolSet the test fills with its pools, the real scripted
// model, and helpers to submit sessions, take steps and read their logs.
//
// Threads: the test's thread. Engines made here may start() their own workers; stop them (or let
// them go out of scope) before TearDown closes the store.

#include "broker/checkpoints/local_blob_store.h"
#include "broker/engine/step_engine.h"
#include "broker/llm/scripted_model.h"
#include "broker/store/sqlite_event_store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace paddock::test {

class EngineFixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
        m_dir = std::filesystem::temp_directory_path()
            / ("paddock-" + std::string(info->test_suite_name()) + "-" + std::to_string(::getpid()) + "-" + info->name());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        auto store = store::openSqliteEventStore(m_dir / "broker.db");
        ASSERT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        auto blobs = checkpoints::LocalBlobStore::open(m_dir / "checkpoints");
        ASSERT_TRUE(blobs) << blobs.error().message;
        m_checkpointStore = std::make_unique<checkpoints::CheckpointStore>(std::move(*blobs), "broker");
        m_checkpointer = std::make_unique<checkpoints::Checkpointer>(*m_checkpointStore);
    }

    void TearDown() override
    {
        if (m_store)
            m_store->close();
        std::error_code ignored;
        if (!m_dir.empty())
            std::filesystem::remove_all(m_dir, ignored);
    }

    // Appends session.created for a new session "s-N" running `playbook` on the scripted model:
    // goal "g", tier lite, then `fields` (agent, submitted_by, budget_micros, secrets, ...) on top.
    std::string submit(const std::string &playbook, const nlohmann::json &fields = nlohmann::json::object())
    {
        nlohmann::json created{{"goal", "g"}, {"model", "scripted"}, {"tier", "lite"}, {"playbook_toml", playbook}};
        created.update(fields);
        store::AppendRequest request;
        request.sessionId = "s-" + std::to_string(++m_sessions);
        request.expectedLastSeq = 0;
        request.events.push_back({core::kind::SessionCreated, created.dump()});
        auto appended = m_store->appendSync(std::move(request));
        EXPECT_TRUE(appended) << appended.error().message;
        return appended ? appended->state.id : std::string();
    }

    // Checkpoints go to the fixture's checkpoint store unless options name another.
    engine::StepEngine makeEngine(engine::EngineOptions options = {})
    {
        if (!options.checkpointer)
            options.checkpointer = m_checkpointer.get();
        return engine::StepEngine(*m_store, m_pools, [this](const std::string &name) -> llm::ModelAdapter * {
            return name == "scripted" ? &m_scripted : nullptr;
        }, std::move(options));
    }

    // Takes n steps, each with a fresh lease.
    void takeSteps(engine::StepEngine &engine, int n)
    {
        for (int i = 0; i < n; ++i) {
            auto lease = m_store->acquireLease("setup", 30000, 0);
            ASSERT_TRUE(lease);
            engine.runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
    }

    // Takes steps with fresh leases until no session needs work (finished, or waiting for a
    // review); fails the test after maxSteps.
    void runUntilIdle(engine::StepEngine &engine, int maxSteps = 100)
    {
        for (int i = 0; i < maxSteps; ++i) {
            auto lease = m_store->acquireLease("test", 30000, 0);
            if (!lease)
                return;
            engine.runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
        FAIL() << "the sessions did not settle in " << maxSteps << " steps";
    }

    // While started engines work: waits (up to 20 s) until none of `ids` needs work.
    bool waitUntilSettled(const std::vector<std::string> &ids)
    {
        for (int round = 0; round < 2000; ++round) {
            const bool settled = std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
                auto state = m_store->getSession(id);
                return state && !state->needsWork();
            });
            if (settled)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }

    std::vector<core::Event> events(const std::string &id)
    {
        auto read = m_store->readEvents(id, 1, INT_MAX);
        EXPECT_TRUE(read) << read.error().message;
        return read ? *read : std::vector<core::Event>{};
    }

    core::SessionState session(const std::string &id)
    {
        auto state = m_store->getSession(id);
        EXPECT_TRUE(state) << state.error().message;
        return state ? *state : core::SessionState{};
    }

    static std::vector<nlohmann::json> payloadsOf(const std::vector<core::Event> &log, const char *kind)
    {
        std::vector<nlohmann::json> out;
        for (const auto &e : log) {
            if (e.kind == kind)
                out.push_back(nlohmann::json::parse(e.payload));
        }
        return out;
    }

    static int count(const std::vector<core::Event> &log, const char *kind)
    {
        return static_cast<int>(std::count_if(log.begin(), log.end(), [&](const core::Event &e) { return e.kind == kind; }));
    }

    std::filesystem::path m_dir;
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<checkpoints::CheckpointStore> m_checkpointStore;
    std::unique_ptr<checkpoints::Checkpointer> m_checkpointer;
    placement::PoolSet m_pools;
    llm::ScriptedModel m_scripted;
    int m_sessions = 0;
};

} // namespace paddock::test
