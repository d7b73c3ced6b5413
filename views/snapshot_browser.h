#pragma once
// The files of a workspace snapshot: a tree (SnapshotFilesModel), a viewer (text, or a hex dump
// with "binary, N bytes"), and a download that streams the whole file to a place the user picks,
// with progress. The browser asks; the window calls the client and hands the answers back.
//
// Threads: GUI thread only.

#include <QWidget>

#include <functional>

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTreeView;

namespace paddock::console {

class SnapshotFilesModel;

class SnapshotBrowser : public QWidget {
    Q_OBJECT

public:
    static constexpr qint64 kViewerMaxBytes = 256 * 1024;

    explicit SnapshotBrowser(QWidget *parent = nullptr);

    void setModel(SnapshotFilesModel *model);
    // A line over the tree: "Listing…", "12 files, 3.4 KiB in snapshot X", or why there is none.
    void setStatusText(const QString &text, bool isError = false);
    // The answer to fileRequested (content: at most kViewerMaxBytes of it).
    void showFile(const QString &path, const QByteArray &content, qint64 size, const QString &error);
    void downloadStarted(int id, const QString &path, const QString &localFile);
    void setDownloadProgress(int id, qint64 received, qint64 total);
    void downloadFinished(int id, bool ok, const QString &message);
    // Replaces the save dialog (tests); returns the local file, or empty to cancel.
    void setSaveFileChooser(std::function<QString(const QString &suggested)> chooser) { m_chooser = std::move(chooser); }

    QString currentPath() const;
    bool selectPath(const QString &path);
    QString viewerText() const;
    QString noteText() const;
    QTreeView *treeView() const { return m_tree; }
    QPushButton *downloadButton() const { return m_download; }
    QProgressBar *progressBar() const { return m_progress; }

signals:
    void fileRequested(const QString &path);
    void downloadRequested(const QString &path, const QString &localFile);
    void cancelDownloadRequested(int id);

private:
    void onCurrentChanged();
    void startDownload();

    SnapshotFilesModel *m_model = nullptr;
    QLabel *m_status = nullptr;
    QTreeView *m_tree = nullptr;
    QLabel *m_fileTitle = nullptr;
    QLabel *m_note = nullptr;
    QPlainTextEdit *m_viewer = nullptr;
    QPushButton *m_download = nullptr;
    QPushButton *m_cancel = nullptr;
    QProgressBar *m_progress = nullptr;
    QString m_shownPath;
    int m_downloadId = 0;
    std::function<QString(const QString &)> m_chooser;
};

} // namespace paddock::console
