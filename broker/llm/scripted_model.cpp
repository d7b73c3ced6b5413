#include "broker/llm/scripted_model.h"

#include <fmt/format.h>

namespace paddock::llm {
namespace {

constexpr size_t kTailChars = 400;
constexpr size_t kCommandChars = 60;

bool isContinuationByte(char c)
{
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Cuts never split a UTF-8 sequence: the summary is recorded as JSON, which must stay valid UTF-8.
std::string shorten(std::string_view text, size_t limit)
{
    if (text.size() <= limit)
        return std::string(text);
    size_t end = limit - 3;
    while (end > 0 && isContinuationByte(text[end]))
        --end;
    return std::string(text.substr(0, end)) + "...";
}

// The end of an output: where compilers and test runners put the line that matters.
std::string tail(std::string_view text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
        text.remove_suffix(1);
    if (text.size() <= kTailChars)
        return std::string(text);
    size_t start = text.size() - kTailChars;
    while (start < text.size() && isContinuationByte(text[start]))
        ++start;
    return "..." + std::string(text.substr(start));
}

std::string stringField(const nlohmann::json &object, const char *key)
{
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string describeStep(const PlaybookStep &step)
{
    if (step.tool == tool::RunCommand)
        return fmt::format("step {} (run_command `{}`)", step.number,
                           shorten(stringField(step.arguments, "command"), kCommandChars));
    if (step.tool == tool::WriteFile || step.tool == tool::ReadFile)
        return fmt::format("step {} ({} {})", step.number, step.tool, stringField(step.arguments, "path"));
    return fmt::format("step {} ({})", step.number, step.tool);
}

// The first line that mentions an error: compilers print the cause first and a summary last, and the
// tail alone may miss the cause.
std::string firstErrorLine(std::string_view text)
{
    while (!text.empty()) {
        const size_t end = text.find('\n');
        const std::string_view line = text.substr(0, end);
        if (line.find("error") != std::string_view::npos || line.find("Error") != std::string_view::npos)
            return shorten(line, 200);
        if (end == std::string_view::npos)
            break;
        text.remove_prefix(end + 1);
    }
    return {};
}

std::string outputTails(const nlohmann::json &result)
{
    std::string out;
    const std::string fullStderr = stringField(result, "stderr");
    const std::string stderrText = tail(fullStderr);
    const std::string errorLine = firstErrorLine(fullStderr);
    if (!errorLine.empty() && stderrText.find(errorLine) == std::string::npos)
        out += fmt::format("; first error: {}", errorLine);
    const std::string stdoutText = tail(stringField(result, "stdout"));
    if (!stderrText.empty())
        out += fmt::format("; stderr: {}", stderrText);
    if (!stdoutText.empty())
        out += fmt::format("; stdout: {}", stdoutText);
    return out;
}

// Empty when the recorded result meets the step's expectations, else why not.
std::string checkResult(const PlaybookStep &step, const Exchange &exchange)
{
    const std::string what = describeStep(step);
    if (exchange.results.empty())
        return fmt::format("{}: no result was recorded for it", what);
    const nlohmann::json &result = exchange.results.front();
    if (!result.is_object())
        return fmt::format("{}: its recorded result is not an object: {}", what, shorten(result.dump(), 200));
    const auto error = result.find("error");
    if (step.expectError) {
        if (error == result.end())
            return fmt::format("{} expected an error containing \"{}\" but it succeeded: {}", what, *step.expectError,
                               shorten(result.dump(), 200));
        const std::string text = error->is_string() ? error->get<std::string>() : error->dump();
        if (text.find(*step.expectError) == std::string::npos)
            return fmt::format("{} expected an error containing \"{}\" but it failed with: {}", what,
                               *step.expectError, text);
        return {};
    }
    if (error != result.end())
        return fmt::format("{} failed: {}", what, error->is_string() ? error->get<std::string>() : error->dump());

    if (step.tool == tool::RunCommand) {
        const auto timedOut = result.find("timed_out");
        if (timedOut != result.end() && timedOut->is_boolean() && timedOut->get<bool>())
            return fmt::format("{} timed out{}", what, outputTails(result));
        const auto exitCode = result.find("exit_code");
        if (exitCode == result.end() || !exitCode->is_number_integer())
            return fmt::format("{}: the result has no exit code: {}", what, shorten(result.dump(), 200));
        if (step.expectExit && exitCode->get<int64_t>() != *step.expectExit)
            return fmt::format("{} expected exit code {} but it exited with {}{}", what, *step.expectExit,
                               exitCode->get<int64_t>(), outputTails(result));
        if (step.expectStdout && stringField(result, "stdout").find(*step.expectStdout) == std::string::npos)
            return fmt::format("{} expected stdout to contain \"{}\" but it did not{}", what, *step.expectStdout,
                               outputTails(result));
        if (step.expectStderr && stringField(result, "stderr").find(*step.expectStderr) == std::string::npos)
            return fmt::format("{} expected stderr to contain \"{}\" but it did not{}", what, *step.expectStderr,
                               outputTails(result));
    } else if (step.tool == tool::ReadRecords && step.expectContent) {
        const std::string records = result.contains("records") ? result["records"].dump() : std::string();
        if (records.find(*step.expectContent) == std::string::npos)
            return fmt::format("{} expected the records to contain \"{}\" but they were: {}", what,
                               *step.expectContent, shorten(records, 200));
    } else if (step.tool == tool::ReadFile && step.expectContent) {
        const std::string content = stringField(result, "content");
        if (content.find(*step.expectContent) == std::string::npos)
            return fmt::format("{} expected the content to contain \"{}\" but it was: {}", what,
                               *step.expectContent, tail(content));
    }
    return {};
}

ModelTurn finishTurn(size_t turnIndex, std::string_view status, std::string summary)
{
    ModelTurn turn;
    turn.model = ScriptedModel::kName;
    turn.text = summary;
    turn.toolCalls.push_back(ToolCall{fmt::format("call-{}", turnIndex + 1), tool::Finish,
                                      nlohmann::json{{"status", status}, {"summary", std::move(summary)}}});
    return turn;
}

// About four characters a token, as tokenizers of English text and code average: deterministic
// from the log, so a repeated step reports (and costs) the same.
int64_t estimateTokens(size_t chars)
{
    return static_cast<int64_t>((chars + 3) / 4);
}

size_t turnChars(const ModelTurn &turn)
{
    size_t chars = turn.text.size();
    for (const auto &call : turn.toolCalls)
        chars += call.name.size() + call.arguments.dump().size();
    return chars;
}

// What a real model would have been sent (goal and the whole history with results) and what it
// would have answered.
Usage estimateUsage(const ModelContext &context, const ModelTurn &turn)
{
    size_t input = context.goal.size();
    for (const auto &exchange : context.history) {
        input += turnChars(exchange.turn);
        for (const auto &result : exchange.results)
            input += result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
    }
    return Usage{estimateTokens(input), estimateTokens(turnChars(turn)), 0};
}

} // namespace

Result<ModelTurn> ScriptedModel::nextTurn(const Playbook &playbook, const std::vector<Exchange> &history)
{
    const size_t k = history.size();
    const size_t stepCount = playbook.steps.size();
    const bool explicitFinish = playbook.steps.back().tool == tool::Finish;

    // A finish already emitted, or one we would have emitted, means there is nothing left to play.
    if (k > stepCount || (k == stepCount && explicitFinish))
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("playbook '{}' has {} step(s) and the session already has {} turns: it is "
                                "finished. Do not ask the scripted model for more turns after finish.",
                                playbook.name, stepCount, k));
    if (k > 0) {
        const PlaybookStep &previous = playbook.steps[k - 1];
        std::string problem = checkResult(previous, history[k - 1]);
        if (!problem.empty())
            return finishTurn(k, "failed", std::move(problem));
    }
    if (k == stepCount)
        return finishTurn(k, "succeeded", fmt::format("all {} steps of playbook '{}' met their expectations",
                                                      stepCount, playbook.name));

    const PlaybookStep &step = playbook.steps[k];
    ModelTurn turn;
    turn.model = kName;
    turn.text = fmt::format("Step {} of {}: {}", step.number, stepCount, step.tool);
    turn.toolCalls.push_back(ToolCall{fmt::format("call-{}", k + 1), step.tool, step.arguments});
    return turn;
}

Result<ModelTurn> ScriptedModel::next(const ModelContext &context)
{
    try {
        auto playbook = parsePlaybook(context.playbookToml, context.sessionId.empty()
                                                                ? std::string("<session playbook>")
                                                                : "<playbook of session " + context.sessionId + ">");
        if (!playbook)
            return std::unexpected(playbook.error());
        auto turn = nextTurn(*playbook, context.history);
        if (turn)
            turn->usage = estimateUsage(context, *turn);
        return turn;
    } catch (const std::exception &e) {
        // nlohmann throws on type mismatches in recorded results; keep it a value.
        return fail(ErrorCode::Internal, fmt::format("scripted model: unexpected error: {}", e.what()));
    }
}

} // namespace paddock::llm
