#pragma once
// The sandbox a session works in: pool, tier, sandbox id, runtime and host, claim latency (warm or
// cold), and its state (claimed, failed: reason, released), as models/sandbox_state.h folds them
// from the session's row and the sandbox.* events of its trace; under them, live CPU and memory
// plots from the sandbox's samples (when the client can stream them; otherwise a line says why),
// and, for the commands no sample fell inside (shorter than the sampling period), the peak memory
// and CPU time their results report (models/command_resources.h).
//
// Threads: GUI thread only.

#include "models/command_resources.h"
#include "models/console_types.h"
#include "models/resource_series.h"
#include "models/sandbox_state.h"

#include <QFrame>

class QLabel;

namespace paddock::console {

class ResourceCurvePlot;

class SandboxCard : public QFrame {
    Q_OBJECT

public:
    explicit SandboxCard(QWidget *parent = nullptr);

    void clear();
    void setSession(const SessionInfo &session);
    // Looks only at sandbox.* events; cheap to call with every batch.
    void addEvents(const QList<EventRecord> &events);

    QString stateText() const;
    // The current sandbox (from the session or its last sandbox.claimed event).
    QString poolName() const;
    QString sandboxId() const;

    // Live samples of the current sandbox; a new sandbox starts a new curve.
    void addSamples(const QString &sandboxId, const QList<ResourcePoint> &samples);
    void setLimits(qint64 memoryBytes, double cpu);
    // Shown instead of the plot when no samples can come (e.g. the broker has no sample stream).
    void setSamplesUnavailable(const QString &why);
    ResourceCurvePlot *samplePlot() const { return m_plot; }
    const ResourceSeries &samples() const { return m_series; }
    // What the commands that ran between samples used, in words; empty when the curve shows them all.
    QString commandResourcesText() const;

signals:
    // The sandbox to watch changed (empty when none): the window starts or stops the watch.
    void sandboxChanged(const QString &pool, const QString &sandboxId);

private:
    void refresh();
    void refreshCommandResources();

    SessionInfo m_session;
    SandboxState m_state;   // from the sandbox.* events (models/sandbox_state.h)
    SandboxCommandLog m_commands;   // the figures of its commands' results

    QLabel *m_poolLabel = nullptr;
    QLabel *m_tierLabel = nullptr;
    QLabel *m_sandboxLabel = nullptr;
    QLabel *m_runtimeLabel = nullptr;
    QLabel *m_claimLabel = nullptr;
    QLabel *m_checkpointLabel = nullptr;   // its age is redrawn every few seconds
    QLabel *m_stateLabel = nullptr;
    QLabel *m_samplesTitle = nullptr;
    ResourceCurvePlot *m_plot = nullptr;
    QLabel *m_commandResources = nullptr;
    ResourceSeries m_series;
    QString m_seriesSandbox;
    QString m_watched;   // "pool/sandbox" last announced by sandboxChanged
    QString m_unavailable;
};

} // namespace paddock::console
