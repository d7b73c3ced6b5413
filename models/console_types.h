#pragma once
// Value types the console shows: plain data, QtCore only, copied freely between threads. The gRPC
// client (app/client) fills them; models and views read them.

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace paddock::console {

enum class SessionStatus { Unknown, Queued, Running, WaitingApproval, Paused, Succeeded, Failed, Cancelled };

QString statusName(SessionStatus status);      // "queued", "running", ... (as the broker spells them)
bool isTerminal(SessionStatus status);

struct SessionInfo {
    QString id;
    QString agent;
    QString goal;
    QString model;
    QString playbook;
    QString tier;
    QString pool;
    QString sandboxId;
    QString statusReason;
    QString lastEventKind;
    QStringList tags;
    SessionStatus status = SessionStatus::Unknown;
    qint64 steps = 0;
    qint64 costMicros = 0;
    qint64 createdUnixMs = 0;
    qint64 updatedUnixMs = 0;
    qint64 lastSeq = 0;
    QString tierChooser = {};      // who chose the current tier: default, agent, platform, human
    QString submittedBy = {};      // the principal who submitted it
    qint64 modelCostMicros = 0;    // costMicros split: model tokens
    qint64 sandboxCostMicros = 0;  //   and sandbox time + snapshot storage
    qint64 budgetMicros = 0;       // 0: no budget
};

// One event of a session's log. The payload stays as the broker sent it (a JSON object) and is
// parsed only when a view needs a field of it.
struct EventRecord {
    qint64 seq = 0;
    qint64 timeUnixMs = 0;
    QString kind;
    QByteArray payloadJson;
    qint64 costMicros = 0;
};

struct TierInfo {
    QString name;
    QString runtime;
    int warm = 0;
    int claimed = 0;
    int max = 0;
    double hitRate = 0;
    qint64 coldFallbacks = 0;
    // Claim latency histogram: bucket upper bounds in microseconds and the claims in each.
    QList<qint64> latencyBucketsUs = {};
    QList<qint64> latencyCounts = {};
    double refillPerSecond = 0;
    double pricePerHourUsd = 0;
    double cpu = 0;
    qint64 memoryBytes = 0;
    QString network = {};        // "none" or "allowlist"
    // What the tier promises about its host, in the pool's words (docs/security.md): identity
    // mapping, seccomp filter, /etc. Empty from a pool older than the report.
    QString isolationIdentity = {};
    QString isolationSeccomp = {};
    QString isolationEtc = {};
};

// One look at a pool's health: from the broker's history when it keeps one, else from the
// console's own repeated ListPools polls.
struct PoolHealthPoint {
    qint64 timeUnixMs = 0;
    bool healthy = false;
    int warm = 0;
    int claimed = 0;
};

struct PoolInfo {
    QString name;
    QString endpoint;
    bool healthy = false;
    bool local = false;
    QString error;
    QList<TierInfo> tiers;
    QList<PoolHealthPoint> history = {};   // oldest first; empty when the broker keeps none
    bool lost = false;                     // unhealthy past pool_lost_after_ms: its sessions moved away
    qint64 sessionsMovedAway = 0;          // since the broker started
    QStringList movedSessionIds = {};      // the last 50, oldest first
};

// The broker's checkpoint store (GetStorage; docs/checkpoints.md "Retention and collection"):
// where it is, what it holds and what a collection now would free.
struct CheckpointStorage {
    QString store;                   // "broker" or "s3"
    QString where;                   // "the broker's checkpoint directory /var/lib/paddock/checkpoints"
    qint64 retentionHours = 0;       // ended sessions' checkpoints kept this long; 0: forever
    qint64 chunks = 0;
    qint64 manifests = 0;
    qint64 bytesStored = 0;          // chunks and manifests
    qint64 logicalBytes = 0;         // the workspaces' file bytes, every manifest summed
    double dedupRatio = 0;           // logicalBytes / chunk bytes; 0 without chunks
    qint64 freeableBytes = 0;        // what a collection now would free
    qint64 freeableChunks = 0;
    qint64 freeableManifests = 0;
    QString problem = {};            // why a collection would not free all it should
    qint64 lastCollectionUnixMs = 0; // 0: none since the broker started
    qint64 lastFreedBytes = 0;
    qint64 computedUnixMs = 0;
};

enum class ConnectionState { Disconnected, Connecting, Connected, Broken };

struct SubmitRequest {
    QString playbook;        // a playbook the broker ships, by name
    QString playbookToml;    // or a playbook's text
    QString goal;
    QString model;
    QString tier;
    QString agent;
    QStringList tags;
    QString requestId;       // one per user action (a UUID), the same on every retry; empty: the client makes one
};

} // namespace paddock::console

Q_DECLARE_METATYPE(paddock::console::SessionInfo)
Q_DECLARE_METATYPE(paddock::console::EventRecord)
Q_DECLARE_METATYPE(paddock::console::PoolInfo)
Q_DECLARE_METATYPE(paddock::console::CheckpointStorage)
Q_DECLARE_METATYPE(paddock::console::TierInfo)
