// FoldCache against the real SQLite store: a cached fold brought up to the log's tail decides what
// a fold of the whole log decides, reads only the tail, and a session evicted or taken twice is
// folded again from its log.

#include "broker/engine/fold_cache.h"
#include "tests/support/engine_fixture.h"

#include <gtest/gtest.h>

namespace paddock::engine {
namespace {

using nlohmann::json;

class FoldCacheTest : public test::EngineFixture {
protected:
    void append(const std::string &id, const char *kind, const json &payload)
    {
        store::AppendRequest request;
        request.sessionId = id;
        request.events.push_back({kind, payload.dump()});
        auto appended = m_store->appendSync(std::move(request));
        ASSERT_TRUE(appended) << appended.error().message;
    }

    // A model turn calling run_command, then its result: the next action is a model call.
    void turn(const std::string &id, int n)
    {
        const std::string call = "c" + std::to_string(n);
        append(id, core::kind::ModelResponse,
               {{"model", "scripted"}, {"text", ""}, {"tool_calls", json::array({{{"id", call}, {"name", "run_command"},
                                                                                   {"arguments", {{"command", "true"}}}}})}});
        append(id, core::kind::ToolCall, {{"call_id", call}, {"name", "run_command"}, {"arguments", {{"command", "true"}}}});
        append(id, core::kind::ToolResult, {{"call_id", call}, {"name", "run_command"}, {"exit_code", 0}});
    }

    Action decideFromLog(const std::string &id) { return decide(events(id)); }
};

TEST_F(FoldCacheTest, ATakenFoldFoldsOnlyTheTailAndDecidesLikeTheWholeLog)
{
    const std::string id = submit("name = \"x\"\n");
    append(id, core::kind::SandboxClaimed, {{"pool", "p"}, {"sandbox_id", "sb-1"}, {"tier", "lite"}});
    FoldCache cache;
    for (int n = 1; n <= 5; ++n) {
        turn(id, n);
        auto fold = cache.take(*m_store, id);
        ASSERT_TRUE(fold) << fold.error().message;
        const Action cached = (*fold)->decide();
        const Action whole = decideFromLog(id);
        EXPECT_EQ(cached.kind, whole.kind);
        EXPECT_EQ(cached.idempotencyKey, whole.idempotencyKey);
        EXPECT_EQ(cached.state.lastSeq, whole.state.lastSeq);
        EXPECT_EQ((*fold)->modelContext().history.size(), static_cast<size_t>(n));
        cache.put(id, std::move(*fold));
    }
    EXPECT_EQ(cache.fullFolds(), 1) << "only the first take folds the whole log";
    EXPECT_EQ(cache.tailFolds(), 4);
}

TEST_F(FoldCacheTest, ASecondTakeMeanwhileFoldsFromTheLogAndTheLongerFoldStays)
{
    const std::string id = submit("name = \"x\"\n");
    FoldCache cache;
    auto first = cache.take(*m_store, id);
    ASSERT_TRUE(first);
    append(id, core::kind::SandboxClaimed, {{"pool", "p"}, {"sandbox_id", "sb-1"}, {"tier", "lite"}});
    auto second = cache.take(*m_store, id);   // the first is still out: this one folds the whole log
    ASSERT_TRUE(second);
    EXPECT_EQ((*second)->lastSeq(), 2);
    EXPECT_EQ(cache.fullFolds(), 2);
    cache.put(id, std::move(*second));
    cache.put(id, std::move(*first));   // shorter: dropped
    auto again = cache.take(*m_store, id);
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->lastSeq(), 2);
    EXPECT_EQ(cache.tailFolds(), 1);
}

TEST_F(FoldCacheTest, TheLeastRecentlyUsedSessionIsEvictedAndFoldedAgainWhenItComesBack)
{
    FoldCache cache(2);
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
        ids.push_back(submit("name = \"x\"\n"));
        auto fold = cache.take(*m_store, ids.back());
        ASSERT_TRUE(fold);
        cache.put(ids.back(), std::move(*fold));
    }
    EXPECT_EQ(cache.size(), 2u);
    auto evicted = cache.take(*m_store, ids.front());
    ASSERT_TRUE(evicted);
    EXPECT_EQ((*evicted)->lastSeq(), 1);
    EXPECT_EQ(cache.fullFolds(), 4) << "the evicted session is folded from its log again";
    EXPECT_FALSE(cache.take(*m_store, "s-unknown")) << "an unknown session is an error, not an empty fold";
}

} // namespace
} // namespace paddock::engine
