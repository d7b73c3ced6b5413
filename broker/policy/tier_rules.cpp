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

TierPolicy parseTierPolicy(const PolicyFile &policy, ConfigProblems &problems)
{
    const auto &decisionKeys = policySections()[2];
    const auto &ruleKeys = policySections()[1];
    TierPolicy out;
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(policy, node) + ": " + message);
    };
    if (const auto *decisions = policy.table.get("decisions")) {
        const auto *table = decisions->as_table();
        if (!table)
            problem(*decisions, "[decisions] must be a table");
        static const toml::table kNone;   // iterated in place: a copy of a node loses its source lines
        for (const auto &[key, node] : table ? *table : kNone) {
            if (!decisionKeys.accepts(key.str())) {
                problem(node, "unknown key '" + std::string(key.str()) + "' in [decisions]; the key is "
                            + decisionKeys.keyList());
                continue;
            }
            const auto minutes = node.value<double>();
            if (!minutes || *minutes <= 0)
                problem(node, "expected_duration_minutes must be a positive number, e.g. expected_duration_minutes = 15");
            else
                out.expectedDurationMs = static_cast<int64_t>(*minutes * 60000);
        }
    }
    const auto *rules = policy.table.get("tier_rule");
    if (!rules)
        return out;
    const auto *array = rules->as_array();
    if (!array || !array->is_array_of_tables()) {
        problem(*rules, "tier_rule must be an array of tables: write each rule as [[tier_rule]]");
        return out;
    }
    int index = 0;
    for (const auto &node : *array) {
        ++index;
        const auto &table = *node.as_table();
        TierRule rule;
        rule.line = static_cast<int>(node.source().begin.line);
        rule.name = "rule " + std::to_string(index);
        auto strings = [&](const toml::node &value, const std::string &key, std::vector<std::string> &outList) {
            if (const auto *single = value.as_string()) {
                outList.push_back(single->get());
                return;
            }
            const auto *items = value.as_array();
            if (items) {
                for (const auto &item : *items) {
                    if (!item.is_string())
                        items = nullptr;
                }
            }
            if (!items) {
                problem(value, key + " must be a list of strings, e.g. " + key + " = [\"build\"]");
                return;
            }
            for (const auto &item : *items)
                outList.push_back(item.as_string()->get());
        };
        for (const auto &[key, value] : table) {
            const std::string k(key.str());
            if (!ruleKeys.accepts(k)) {
                problem(value, "unknown key '" + k + "' in [[tier_rule]]; a rule has " + ruleKeys.keyList());
                continue;
            }
            if (k == "tags" || k == "goal_words") {
                strings(value, k, k == "tags" ? rule.tags : rule.goalWords);
                continue;
            }
            std::string *target = k == "name" ? &rule.name : k == "agent" ? &rule.agent : k == "playbook" ? &rule.playbook
                : k == "tier" ? &rule.tier : &rule.maxTierWithoutReview;
            if (!value.is_string())
                problem(value, k + " must be a string");
            else
                *target = value.as_string()->get();
        }
        if (rule.tier.empty()) {
            problem(node, "[[tier_rule]] '" + rule.name + "' gives no tier: add tier = \"lite\" (a tier the pools offer)");
            continue;
        }
        if (rule.maxTierWithoutReview.empty())
            rule.maxTierWithoutReview = rule.tier;
        out.rules.push_back(std::move(rule));
    }
    return out;
}

Result<TierPolicy> parseTierPolicy(const PolicyFile &policy)
{
    ConfigProblems problems;
    auto parsed = parseTierPolicy(policy, problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return parsed;
}

} // namespace paddock::policy
