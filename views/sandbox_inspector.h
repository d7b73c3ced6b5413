#pragma once
// The sandbox inspector, for operators: recent failures (the post-mortems the pools kept) on the
// left; the chosen one on the right: what happened (reason, exit or signal, the command), retry on
// another tier, and tabs for the resource curve up to the failure (with the peak memory and CPU time
// the command's result reports: a command shorter than the sampling period has no sample inside
// it), the last output, the processes at the failure, the workspace snapshot's files, and a debug
// shell on that snapshot.
//
// Threads: GUI thread only. Like the other views it does no I/O: it asks with signals, the window
// calls the ConsoleClient and hands the answers back (showPostMortem, the models, the sub-widgets).

#include "models/command_resources.h"
#include "models/console_types.h"
#include "models/resource_series.h"
#include "models/sandbox_types.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTabWidget;
class QTableView;
class QTableWidget;
class QToolButton;

namespace paddock::console {

class DebugShellPanel;
class PostMortemListModel;
class ResourceCurvePlot;
class SnapshotBrowser;
class SnapshotFilesModel;

class SandboxInspector : public QWidget {
    Q_OBJECT

public:
    enum Tab { ResourcesTab, OutputTab, ProcessesTab, FilesTab, ShellTab };

    explicit SandboxInspector(QWidget *parent = nullptr);

    // Owned by the caller; they outlive the view.
    void setModels(PostMortemListModel *failures, SnapshotFilesModel *files);

    // A full post-mortem (GetPostMortem's answer) fills the right side.
    void showPostMortem(const PostMortemInfo &postMortem);
    // While GetPostMortem is on its way, or when it failed.
    void showLoading(const QString &pool, const QString &sandboxId);
    void showError(const QString &message);
    // Under the list: how many, and pools that did not answer.
    void setListStatus(const QString &text, bool isError = false);
    // Selects a row of the list without asking for it again.
    void selectInList(const QString &pool, const QString &sandboxId);

    // What "retry on another tier" resubmits: the failed session (known=false when the console
    // does not have it, e.g. another broker's); tiers: those the healthy pools offer.
    void setRetrySession(const SessionInfo &session, bool known);
    void setTiers(const QStringList &tiers);
    // The figures of the shown post-mortem's command, from its tool.result (the window finds it in
    // the open session's trace); showPostMortem clears them.
    void setCommandResources(const CommandResources &command);
    QString commandResourcesText() const;

    void showTab(Tab tab);
    PostMortemInfo postMortem() const { return m_current; }
    QString headerText() const;
    QString outputText() const;
    QString retryText() const;

    QTableView *failuresView() const { return m_failures; }
    QTabWidget *tabs() const { return m_tabs; }
    ResourceCurvePlot *resourcePlot() const { return m_plot; }
    SnapshotBrowser *snapshotBrowser() const { return m_browser; }
    DebugShellPanel *debugShell() const { return m_shell; }
    QPushButton *retryButton() const { return m_retry; }
    QComboBox *retryTierCombo() const { return m_retryTier; }
    QToolButton *refreshButton() const { return m_refresh; }

signals:
    void postMortemRequested(const QString &pool, const QString &sandboxId);
    void refreshRequested();
    void retryRequested(const QString &tier);
    void openSessionRequested(const QString &sessionId);

protected:
    void changeEvent(QEvent *event) override;

private:
    // The constructor's widgets, in the order it creates them.
    QWidget *createFailureList(QWidget *splitter);
    QWidget *createFailureDetails(QWidget *splitter);
    QWidget *createOutputTab();
    QWidget *createProcessesTab();
    void updateRetry();
    void refreshHeaderColors();

    PostMortemListModel *m_failuresModel = nullptr;
    PostMortemInfo m_current;
    SessionInfo m_retrySession;
    bool m_retryKnown = false;
    ResourceSeries m_series;
    bool m_selecting = false;

    QTableView *m_failures = nullptr;
    QToolButton *m_refresh = nullptr;
    QLabel *m_listStatus = nullptr;
    QLabel *m_reason = nullptr;
    QLabel *m_title = nullptr;
    QLabel *m_meta = nullptr;
    QLabel *m_command = nullptr;
    QPushButton *m_openSession = nullptr;
    QComboBox *m_retryTier = nullptr;
    QPushButton *m_retry = nullptr;
    QLabel *m_retryNote = nullptr;
    QTabWidget *m_tabs = nullptr;
    ResourceCurvePlot *m_plot = nullptr;
    QLabel *m_commandResources = nullptr;
    QPlainTextEdit *m_stdout = nullptr;
    QPlainTextEdit *m_stderr = nullptr;
    QLabel *m_outputNote = nullptr;
    QTableWidget *m_processes = nullptr;
    QLabel *m_processesNote = nullptr;
    SnapshotBrowser *m_browser = nullptr;
    DebugShellPanel *m_shell = nullptr;
};

} // namespace paddock::console
