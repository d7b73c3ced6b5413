#include "broker/policy/tier_rules.h"

#include <algorithm>
#include <cctype>

namespace paddock::policy {

namespace {

std::string lower(std::string text)
{
    std::ranges::transform(text, text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

std::vector<std::string> words(const std::string &text)
{
    std::vector<std::string> out;
    std::string word;
    for (char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') {
            word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!word.empty()) {
            out.push_back(std::move(word));
            word.clear();
        }
    }
    if (!word.empty())
        out.push_back(std::move(word));
    return out;
}

std::string list(const std::vector<std::string> &items)
{
    std::string out;
    for (const auto &item : items)
        out += (out.empty() ? "" : ",") + item;
    return "[" + out + "]";
}

} // namespace

bool TierRule::matches(const SessionFacts &facts) const
{
    if (!agent.empty() && agent != facts.agent)
        return false;
    if (!playbook.empty() && playbook != facts.playbook)
        return false;
    if (!tags.empty() && std::ranges::none_of(tags, [&](const std::string &tag) {
            return std::ranges::find(facts.tags, tag) != facts.tags.end();
        }))
        return false;
    if (!goalWords.empty()) {
        const auto goal = words(facts.goal);
        if (std::ranges::none_of(goalWords, [&](const std::string &word) {
                return std::ranges::find(goal, lower(word)) != goal.end();
            }))
            return false;
    }
    return true;
}

std::string TierRule::describe() const
{
    std::string out;
    auto add = [&](const std::string &part) { out += (out.empty() ? "" : ", ") + part; };
    if (!agent.empty())
        add("agent=" + agent);
    if (!tags.empty())
        add("tags=" + list(tags));
    if (!goalWords.empty())
        add("goal_words=" + list(goalWords));
    if (!playbook.empty())
        add("playbook=" + playbook);
    return out.empty() ? "every session" : out;
}

const TierRule *TierPolicy::match(const SessionFacts &facts) const
{
    for (const auto &rule : rules) {
        if (rule.matches(facts))
            return &rule;
    }
    return nullptr;
}

Result<TierPolicy> parseTierPolicy(const PolicyFile &policy)
{
    TierPolicy out;
    if (const auto *decisions = policy.table.get("decisions")) {
        const auto *table = decisions->as_table();
        if (!table)
            return fail(ErrorCode::InvalidArgument, where(policy, *decisions) + ": [decisions] must be a table");
        for (const auto &[key, node] : *table) {
            if (key.str() != "expected_duration_minutes")
                return fail(ErrorCode::InvalidArgument, where(policy, node) + ": unknown key '" + std::string(key.str())
                                + "' in [decisions]; the key is expected_duration_minutes");
            const auto minutes = node.value<double>();
            if (!minutes || *minutes <= 0)
                return fail(ErrorCode::InvalidArgument, where(policy, node) + ": expected_duration_minutes must be a "
                                "positive number, e.g. expected_duration_minutes = 15");
            out.expectedDurationMs = static_cast<int64_t>(*minutes * 60000);
        }
    }
    const auto *rules = policy.table.get("tier_rule");
    if (!rules)
        return out;
    const auto *array = rules->as_array();
    if (!array || !array->is_array_of_tables())
        return fail(ErrorCode::InvalidArgument, where(policy, *rules) + ": tier_rule must be an array of tables: "
                        "write each rule as [[tier_rule]]");
    int index = 0;
    for (const auto &node : *array) {
        ++index;
        const auto &table = *node.as_table();
        TierRule rule;
        rule.line = static_cast<int>(node.source().begin.line);
        rule.name = "rule " + std::to_string(index);
        auto strings = [&](const toml::node &value, const std::string &key,
                           std::vector<std::string> &outList) -> Status {
            if (const auto *single = value.as_string()) {
                outList.push_back(single->get());
                return {};
            }
            const auto *items = value.as_array();
            if (items) {
                for (const auto &item : *items) {
                    if (!item.is_string())
                        items = nullptr;
                }
            }
            if (!items)
                return fail(ErrorCode::InvalidArgument, where(policy, value) + ": " + key
                                + " must be a list of strings, e.g. " + key + " = [\"build\"]");
            for (const auto &item : *value.as_array())
                outList.push_back(item.as_string()->get());
            return {};
        };
        for (const auto &[key, value] : table) {
            const std::string k(key.str());
            if (k == "tags" || k == "goal_words") {
                if (auto status = strings(value, k, k == "tags" ? rule.tags : rule.goalWords); !status)
                    return std::unexpected(status.error());
                continue;
            }
            std::string *target = k == "name" ? &rule.name : k == "agent" ? &rule.agent : k == "playbook" ? &rule.playbook
                : k == "tier" ? &rule.tier : k == "max_tier_without_review" ? &rule.maxTierWithoutReview : nullptr;
            if (!target)
                return fail(ErrorCode::InvalidArgument, where(policy, value) + ": unknown key '" + k + "' in [[tier_rule]]; "
                                "a rule has name, agent, tags, goal_words, playbook, tier, max_tier_without_review");
            if (!value.is_string())
                return fail(ErrorCode::InvalidArgument, where(policy, value) + ": " + k + " must be a string");
            *target = value.as_string()->get();
        }
        if (rule.tier.empty())
            return fail(ErrorCode::InvalidArgument, where(policy, node) + ": [[tier_rule]] '" + rule.name
                            + "' gives no tier: add tier = \"lite\" (a tier the pools offer)");
        if (rule.maxTierWithoutReview.empty())
            rule.maxTierWithoutReview = rule.tier;
        out.rules.push_back(std::move(rule));
    }
    return out;
}

} // namespace paddock::policy
