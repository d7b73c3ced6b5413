#include "broker/llm/system_prompt.h"

#include <fmt/format.h>


namespace paddock::llm {

namespace {

constexpr const char *kWorkPrompt =
    "You are an agent working in a sandboxed Linux machine. Your working directory is /workspace, which is "
    "writable; the rest of the file system is read-only, and there is no network unless your tier opens an "
    "allowlist. Work toward the user's goal by calling tools, one at a time, and read each result before the "
    "next step. run_command runs a shell line with sh -c in /workspace; write_file and read_file write and read "
    "whole files; read_records reads your agent's durable notes; propose_change asks for a change that may "
    "need a human's review; request_environment moves you to another sandbox tier. When the goal is met, or "
    "cannot be met, call finish with status \"succeeded\" or \"failed\" and a short summary of what was done "
    "and why.";

std::string trimmedNumber(double value, int maxDecimals)
{
    std::string text = fmt::format("{:.{}f}", value, maxDecimals);
    if (text.find('.') != std::string::npos) {
        while (text.back() == '0')
            text.pop_back();
        if (text.back() == '.')
            text.pop_back();
    }
    return text;
}

std::string memoryText(int64_t bytes)
{
    constexpr double kMiB = 1024.0 * 1024.0;
    const double mib = static_cast<double>(bytes) / kMiB;
    if (bytes <= 0)
        return "unknown memory";
    if (mib >= 1024.0)
        return trimmedNumber(mib / 1024.0, 1) + " GiB memory";
    return trimmedNumber(mib, 0) + " MiB memory";
}

std::string priceText(double perHour)
{
    // At least cents; more digits where a small tier needs them to differ from another.
    std::string dollars = trimmedNumber(perHour, 4);
    const size_t dot = dollars.find('.');
    if (dot == std::string::npos)
        dollars += ".00";
    else
        dollars.append(dot + 3 > dollars.size() ? dot + 3 - dollars.size() : 0, '0');
    return "$" + dollars + " per hour";
}

} // namespace

std::string tierSection(const EnvironmentBrief &environment)
{
    std::string out;
    if (environment.tiers.empty()) {
        out = fmt::format("You run on the sandbox tier {}; which other tiers exist is not known right now.",
                          environment.currentTier.empty() ? "(unknown)" : environment.currentTier);
    } else {
        out = fmt::format("Sandbox tiers, smallest first (you are on {}):", environment.currentTier);
        for (const TierChoice &tier : environment.tiers) {
            out += fmt::format("\n- {}: {} cpu, {}, {}", tier.name, trimmedNumber(tier.cpu, 2),
                               memoryText(tier.memoryBytes), priceText(tier.pricePerHourUsd));
            if (tier.name == environment.currentTier)
                out += " (current)";
            if (!tier.allowed)
                out += "; not allowed for your agent";
            else if (environment.mayRequest && tier.needsReview)
                out += "; above your bound: needs a human's review";
        }
    }
    out += "\n";
    if (!environment.mayRequest) {
        out += fmt::format("Your agent's selection mode is {}: you cannot choose your tier, and request_environment "
                           "is refused. A human can move you to another tier.",
                           environment.selectionMode.empty() ? "default" : environment.selectionMode);
        return out;
    }
    if (environment.bound.empty()) {
        out += "request_environment grants any tier your agent may use at once: you have no bound below them.";
    } else {
        out += fmt::format(
            "Your bound is {}: request_environment grants any allowed tier up to {} at once. A request above it "
            "opens a tier_escalation review and the session waits, doing nothing, until a human approves (you "
            "move) or rejects it (you stay): give a reason the reviewer can judge.",
            environment.bound, environment.bound);
    }
    out += " A bigger tier costs more for every hour it is held: ask for one when the work needs it (a command "
           "was killed for lack of memory, ran out of time, or the task is a large build or test suite), and for "
           "a smaller one when the size is no longer needed. Your files in /workspace move with you.";
    return out;
}

std::string systemPrompt(const ModelContext &context)
{
    std::string prompt = kWorkPrompt;
    if (context.environment)
        prompt += "\n\n" + tierSection(*context.environment);
    return prompt;
}

} // namespace paddock::llm
