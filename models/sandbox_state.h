#pragma once
// The state of the sandbox a session works in, folded from the sandbox.* events of its trace
// (claimed, failed, released, restored, moved) and its checkpoints on top of the session's row:
// what the session view's sandbox card shows, computed where it can be tested without a display.
//
// Threads: a plain value; the GUI thread owns the one in the card.

#include "models/console_types.h"

#include <QString>

namespace paddock::console {

struct SandboxState {
    QString pool;
    QString tier;
    QString sandboxId;
    QString runtime;
    QString host;
    bool warm = false;
    double claimMs = -1;      // -1: no claim seen
    int claims = 0;           // claims seen (a moved session has several)
    enum class Phase { None, Claimed, Failed, Released } phase = Phase::None;
    QString failure;          // "reason (error)" of the last sandbox.failed
    // The workspace's last durable checkpoint (docs/checkpoints.md): its manifest id, where it is
    // kept ("broker" or "s3"), when, after which call; and the last restore's duration.
    QString checkpoint;
    QString checkpointStore;
    qint64 checkpointUnixMs = 0;
    QString checkpointAfterCall;
    double restoreMs = -1;    // -1: no restore seen

    // Folds one event in; false (and nothing changed) for a kind that is neither sandbox.* nor
    // checkpoint.
    bool apply(const EventRecord &event);

    // What the card says, the session's row filling what no event said yet.
    QString poolText(const SessionInfo &session) const;
    QString tierText(const SessionInfo &session) const;
    QString sandboxText(const SessionInfo &session) const;
    QString runtimeText() const;             // "bwrap on exec-1"; empty when unknown
    QString claimText() const;               // "2.1 ms, warm sandbox (claim 2)"; empty before a claim
    QString stateText(const SessionInfo &session) const;
    // "3f2a9c0d1e2f in the broker's store, 12 s old, after call c3"; "none yet" without one.
    QString checkpointText(qint64 nowUnixMs) const;
    bool failed() const { return phase == Phase::Failed; }
    // A sandbox is there and working: its samples are worth watching.
    bool live(const SessionInfo &session) const;
};

} // namespace paddock::console
