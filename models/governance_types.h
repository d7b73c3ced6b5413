#pragma once
// Value types of the broker's governance API (docs/governance.md) as the console shows them: review
// items, environment decisions and their stats, approver stats, cost lines and budgets. Plain data,
// QtCore only, copied freely between threads. app/client fills them; models and views read them.

#include <QHash>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace paddock::console {

// How a governance call ended, for people. Unsupported: the broker answered UNIMPLEMENTED (an older
// broker); Denied: the caller's role does not allow the method.
struct CallError {
    enum class Code { None, Unsupported, Denied, Unavailable, Refused };
    Code code = Code::None;
    QString message;   // what went wrong and what to do; empty when code is None

    bool ok() const { return code == Code::None; }
    static CallError none() { return {}; }
};

struct ReviewItemInfo {
    QString id;
    QString kind;             // bulk_change, tier_escalation, budget_extension, egress_exception, secret_access
    QString sessionId;
    QString agent;
    QString summary;
    QString change;           // only from GetReviewItem
    QString changeFormat;     // diff, records, targets, text
    QString changePreview;
    QString changeHash;
    QString impact;
    QString risk;             // low, medium, high
    QString justification;
    QString policyVerdict;
    QString requester;
    QString state;            // pending, approved, rejected, expired
    QString decider;
    QString decisionReason;
    qint64 createdUnixMs = 0;
    qint64 decidedUnixMs = 0;
    qint64 expiresUnixMs = 0;
    qint64 costMicros = 0;
    int targetCount = 0;
    bool fetchedByCaller = false;
    qint64 seq = 0;
};

struct ApproverStatInfo {
    QString principal;
    qint64 decided = 0;
    qint64 approved = 0;
    qint64 rejected = 0;
    double approvalRate = 0;
    qint64 medianDecideMs = 0;
};

struct TierAlternativeInfo {
    QString tier;
    qint64 estimatedCostMicros = 0;
    QString note;
};

struct DecisionInfo {
    QString id;
    QString sessionId;
    QString agent;
    QString requestedTier;
    QString chosenTier;
    QString chooser;          // default, agent, platform, human
    QString rule;
    QString reason;
    QString trigger;          // session_start, request_environment, override
    QString who;
    QString outcome;          // "" while held; ok, oom, timeout, over_allocated, under_allocated
    QString fittingTier;
    QList<TierAlternativeInfo> alternatives;
    qint64 timeUnixMs = 0;
    qint64 outcomeUnixMs = 0;
    qint64 peakMemoryBytes = 0;
    qint64 memoryLimitBytes = 0;
    double meanCpuFraction = 0;
    double throttledFraction = 0;
};

struct DecisionFilter {
    QString sessionId;
    QString agent;
    QString chooser;
    QString tier;
    QString outcome;
    int pageSize = 500;
};

struct DecisionStatsLineInfo {
    QString key;
    qint64 total = 0;
    qint64 pending = 0;
    qint64 ok = 0;
    qint64 oom = 0;
    qint64 timeout = 0;
    qint64 overAllocated = 0;
    qint64 underAllocated = 0;
};

struct CostQuery {
    QString groupBy = QStringLiteral("agent");   // session, agent, tier, model, day, kind
    qint64 fromUnixMs = 0;
    qint64 toUnixMs = 0;
    qint64 bucketMs = 0;                           // > 0: spend over time
    QString sessionId;
    QString agent;
};

struct CostLineInfo {
    QString key;
    qint64 costMicros = 0;
    qint64 bucketStartUnixMs = 0;
};

struct BudgetInfo {
    QString agent;
    qint64 perDayMicros = 0;
    qint64 spentTodayMicros = 0;
    qint64 perSessionMicros = 0;
    qint64 burnMicrosPerHour = 0;
    int pausedSessions = 0;
};

} // namespace paddock::console

Q_DECLARE_METATYPE(paddock::console::CallError)
Q_DECLARE_METATYPE(paddock::console::ReviewItemInfo)
Q_DECLARE_METATYPE(paddock::console::DecisionInfo)
