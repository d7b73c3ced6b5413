// Folding: cost and checkpoint events go to their step's row, by the times of the rows around them.

#include "trace/fold.h"

#include <gtest/gtest.h>

namespace paddock::trace {
namespace {

using nlohmann::json;

TEST(Fold, OnlyBookkeepingFolds)
{
    EXPECT_TRUE(foldsIntoStep("cost"));
    EXPECT_TRUE(foldsIntoStep("checkpoint"));
    EXPECT_TRUE(foldsIntoStep("tool.output"));
    for (const char *kind : {"tool.result", "model.response", "checkpoint.waiting", "budget.warning", "egress.refused", "env.outcome"})
        EXPECT_FALSE(foldsIntoStep(kind)) << kind;
}

TEST(Fold, TheRowOfItsOwnTimeWins)
{
    EXPECT_EQ(foldSide(100, 100, 100), FoldSide::Previous);      // after its row in one append
    EXPECT_EQ(foldSide(90, 100, 100), FoldSide::Next);           // a bill first in its append
    EXPECT_EQ(foldSide(90, 100, 120), FoldSide::Previous);       // neither: the row above
    EXPECT_EQ(foldSide(90, 100, std::nullopt), FoldSide::Previous);   // the live tail: its row is not here yet
    EXPECT_EQ(foldSide(std::nullopt, 100, 150), FoldSide::Next);      // the top of a window
}

// The log of a real hello-c run (seq 5-15 and 28-31 of `paddockctl events`), as the broker
// appends it: bills first in a step's append, the model's cost after its response, a checkpoint
// after its command's result.
TEST(Fold, ARealStepFoldsIntoTheCallsAPersonCaresAbout)
{
    const std::vector<FoldEvent> events{
        {"model.response", 347},  // 0
        {"cost", 347},            // 1 model cost
        {"tool.call", 347},       // 2
        {"tool.result", 354},     // 3
        {"checkpoint", 354},      // 4
        {"model.response", 355},  // 5
        {"cost", 355},            // 6
        {"tool.call", 355},       // 7
        {"cost", 431},            // 8 storage bill, first in the next append
        {"tool.result", 431},     // 9
        {"checkpoint", 431},      // 10
        {"state.changed", 441},   // 11
        {"cost", 454},            // 12 the last storage bill
        {"env.outcome", 454},     // 13
        {"sandbox.released", 454},// 14
    };
    const std::vector<size_t> rows = assignRows(events);
    const std::vector<size_t> expected{0, 0, 2, 3, 3, 5, 5, 7, 9, 9, 9, 11, 13, 13, 14};
    EXPECT_EQ(rows, expected);
}

TEST(Fold, EdgesOfAWindow)
{
    // Bookkeeping before the first row goes down, after the last row up; alone, it stays a row.
    EXPECT_EQ(assignRows(std::vector<FoldEvent>{{"checkpoint", 5}, {"tool.result", 9}, {"cost", 12}}), (std::vector<size_t>{1, 1, 1}));
    EXPECT_EQ(assignRows(std::vector<FoldEvent>{{"cost", 1}, {"cost", 2}}), (std::vector<size_t>{0, 1}));
    EXPECT_TRUE(assignRows({}).empty());
}

TEST(Fold, TheNoteNamesWhatWasFolded)
{
    const json checkpoint{{"files", 12}, {"changed", 3}, {"removed", 1}};
    const json unchanged{{"changed", 1}, {"removed", 0}};
    const std::vector<FoldedEvent> folded{{"cost", nullptr, 8}, {"checkpoint", &checkpoint, 0}, {"cost", nullptr, 800}};
    EXPECT_EQ(foldNote(folded), "+ cost $0.0008, checkpoint 3 changed, 1 removed");
    EXPECT_EQ(foldNote(std::vector<FoldedEvent>{{"checkpoint", &unchanged, 0}}), "+ checkpoint 1 changed");
    EXPECT_EQ(foldNote({}), "");
}

TEST(Fold, OutputSoFarIsOneNoteWithItsLastLineMadeSafe)
{
    const json first{{"stream", "stdout"}, {"text", "compiling a.c\ncompiling b"}};
    const json second{{"stream", "stdout"}, {"text", ".c\n\x1b[31mlinking\x1b[0m\n"}};
    const json cut{{"stream", "stderr"}, {"text", "x"}, {"cut", true}};
    const std::vector<FoldedEvent> folded{{"tool.output", &first, 0}, {"tool.output", &second, 0}};
    // The escape sequences are shown, never sent to whatever displays the note.
    EXPECT_EQ(foldNote(folded), "+ output 45 B: \\x1b[31mlinking\\x1b[0m");
    EXPECT_EQ(foldNote(std::vector<FoldedEvent>{{"tool.output", &cut, 0}}), "+ output 1 B (cut): x");
}

// A streamed model answer folds into the row before it while it streams, into its model.response's
// once that is there; the note shows the latest attempt's text so far.
TEST(Fold, AStreamedAnswerFoldsIntoItsModelCallsRow)
{
    const std::vector<FoldEvent> streaming{{"tool.result", 100}, {"model.delta", 200}, {"model.delta", 300}};
    EXPECT_EQ(assignRows(streaming), (std::vector<size_t>{0, 0, 0}));
    const std::vector<FoldEvent> answered{{"tool.result", 100}, {"model.delta", 200}, {"model.delta", 300},
                                          {"model.response", 400}, {"cost", 400}};
    EXPECT_EQ(assignRows(answered), (std::vector<size_t>{0, 3, 3, 3, 3}));

    // The first step's response comes behind the state and the sandbox claimed while the model
    // answered; a failed call's answer folds into its model.error.
    const std::vector<FoldEvent> firstStep{{"env.decision", 100}, {"model.delta", 200}, {"model.delta", 300},
                                           {"state.changed", 400}, {"sandbox.claimed", 400}, {"model.response", 400},
                                           {"cost", 400}};
    EXPECT_EQ(assignRows(firstStep), (std::vector<size_t>{0, 5, 5, 3, 4, 5, 5}));
    const std::vector<FoldEvent> failed{{"tool.result", 100}, {"model.delta", 200}, {"model.error", 300}};
    EXPECT_EQ(assignRows(failed), (std::vector<size_t>{0, 2, 2}));
    // An end further than kCallEndLookahead other events away is another call's: the answer stays.
    std::vector<FoldEvent> far{{"tool.result", 100}, {"model.delta", 200}};
    for (size_t i = 0; i <= kCallEndLookahead; ++i)
        far.push_back({"tool.call", 300});
    far.push_back({"model.response", 400});
    EXPECT_EQ(assignRows(far)[1], 0u);
    far.erase(far.begin() + 2);   // one fewer: now within reach
    EXPECT_EQ(assignRows(far)[1], far.size() - 1);

    const json cut = json::parse(R"({"attempt":1,"text":"Hello wor"})");
    const json first = json::parse(R"({"attempt":2,"supersedes":1,"text":"Hello\nwor"})");
    const json second = json::parse(R"({"attempt":2,"text":"ld"})");
    const std::vector<FoldedEvent> folded{{"model.delta", &cut}, {"model.delta", &first}, {"model.delta", &second}};
    EXPECT_EQ(foldNote(folded), "+ model text 11 B: world");
    // A call the broker ran again after a crash (a later after_seq) starts the text again.
    const json orphan = json::parse(R"({"after_seq":4,"attempt":1,"text":"Half an ans"})");
    const json rerun = json::parse(R"({"after_seq":6,"attempt":1,"text":"Whole"})");
    EXPECT_EQ(foldNote(std::vector<FoldedEvent>{{"model.delta", &orphan}, {"model.delta", &rerun}}), "+ model text 5 B: Whole");
}

} // namespace
} // namespace paddock::trace
