#include "views/snapshot_browser.h"

#include "models/file_preview.h"
#include "models/snapshot_files_model.h"
#include "views/theme.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStandardPaths>
#include <QTreeView>
#include <QVBoxLayout>

namespace paddock::console {

SnapshotBrowser::SnapshotBrowser(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("snapshotStatus"));
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    auto *splitter = new QSplitter(Qt::Horizontal, this);
    m_tree = new QTreeView(splitter);
    m_tree->setObjectName(QStringLiteral("snapshotTree"));
    m_tree->setUniformRowHeights(true);
    m_tree->setAllColumnsShowFocus(true);
    m_tree->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_tree->setSelectionBehavior(QAbstractItemView::SelectRows);

    auto *right = new QWidget(splitter);
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    auto *titleRow = new QHBoxLayout;
    m_fileTitle = new QLabel(tr("Select a file to see it"), right);
    m_fileTitle->setObjectName(QStringLiteral("snapshotFileTitle"));
    QFont titleFont = m_fileTitle->font();
    titleFont.setWeight(QFont::DemiBold);
    m_fileTitle->setFont(titleFont);
    m_fileTitle->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_download = new QPushButton(tr("Download…"), right);
    m_download->setObjectName(QStringLiteral("snapshotDownload"));
    m_download->setToolTip(tr("Save the whole file (streamed from the pool)"));
    m_download->setEnabled(false);
    m_cancel = new QPushButton(tr("Cancel"), right);
    m_cancel->setVisible(false);
    titleRow->addWidget(m_fileTitle, 1);
    titleRow->addWidget(m_download);
    titleRow->addWidget(m_cancel);
    rightLayout->addLayout(titleRow);
    m_note = new QLabel(right);
    m_note->setObjectName(QStringLiteral("snapshotFileNote"));
    Theme::setTextRole(m_note, TextRole::Muted);
    rightLayout->addWidget(m_note);
    m_progress = new QProgressBar(right);
    m_progress->setObjectName(QStringLiteral("downloadProgress"));
    m_progress->setVisible(false);
    m_progress->setTextVisible(true);
    rightLayout->addWidget(m_progress);
    m_viewer = new QPlainTextEdit(right);
    m_viewer->setObjectName(QStringLiteral("snapshotViewer"));
    m_viewer->setReadOnly(true);
    m_viewer->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_viewer->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    rightLayout->addWidget(m_viewer, 1);
    splitter->addWidget(m_tree);
    splitter->addWidget(right);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 3);
    layout->addWidget(splitter, 1);

    connect(m_download, &QPushButton::clicked, this, &SnapshotBrowser::startDownload);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_downloadId > 0)
            emit cancelDownloadRequested(m_downloadId);
    });
    connect(m_tree, &QTreeView::activated, this, [this](const QModelIndex &index) {
        if (index.data(SnapshotFilesModel::IsDirRole).toBool())
            m_tree->setExpanded(index.siblingAtColumn(0), !m_tree->isExpanded(index.siblingAtColumn(0)));
    });
}

void SnapshotBrowser::setModel(SnapshotFilesModel *model)
{
    m_model = model;
    m_tree->setModel(model);
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(SnapshotFilesModel::Name, QHeaderView::Stretch);
    m_tree->header()->resizeSection(SnapshotFilesModel::Size, 80);
    m_tree->header()->resizeSection(SnapshotFilesModel::Modified, 140);
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &SnapshotBrowser::onCurrentChanged);
    connect(model, &QAbstractItemModel::modelReset, this, [this] {
        m_tree->expandToDepth(0);
        m_shownPath.clear();
        m_viewer->clear();
        m_note->clear();
        m_fileTitle->setText(tr("Select a file to see it"));
        m_download->setEnabled(false);
    });
}

void SnapshotBrowser::setStatusText(const QString &text, bool isError)
{
    m_status->setText(text);
    Theme::setTextRole(m_status, isError ? TextRole::Error : TextRole::Muted);
}

QString SnapshotBrowser::currentPath() const
{
    const QModelIndex index = m_tree->currentIndex();
    return index.isValid() ? index.data(SnapshotFilesModel::PathRole).toString() : QString();
}

bool SnapshotBrowser::selectPath(const QString &path)
{
    if (!m_model)
        return false;
    const QModelIndex index = m_model->indexOfPath(path);
    if (!index.isValid())
        return false;
    m_tree->scrollTo(index);
    m_tree->setCurrentIndex(index);
    return true;
}

void SnapshotBrowser::onCurrentChanged()
{
    const QModelIndex index = m_tree->currentIndex();
    if (!index.isValid())
        return;
    const bool isDir = index.data(SnapshotFilesModel::IsDirRole).toBool();
    const QString path = index.data(SnapshotFilesModel::PathRole).toString();
    m_fileTitle->setText(QStringLiteral("/workspace/") + path);
    m_download->setEnabled(!isDir && m_downloadId == 0);
    if (isDir) {
        m_shownPath.clear();
        m_viewer->clear();
        m_note->setText(tr("directory"));
        return;
    }
    const auto entry = index.data(SnapshotFilesModel::EntryRole).value<SnapshotFile>();
    if (entry.isSymlink) {
        m_shownPath.clear();
        m_viewer->setPlainText(tr("symbolic link to %1").arg(entry.symlinkTarget));
        m_note->setText(tr("symbolic link"));
        m_download->setEnabled(false);
        return;
    }
    m_shownPath = path;
    m_viewer->clear();
    m_note->setText(tr("Reading…"));
    emit fileRequested(path);
}

void SnapshotBrowser::showFile(const QString &path, const QByteArray &content, qint64 size, const QString &error)
{
    if (path != m_shownPath)
        return;   // the user moved on
    if (!error.isEmpty()) {
        m_viewer->clear();
        m_note->setText(error);
        Theme::setTextRole(m_note, TextRole::Error);
        return;
    }
    Theme::setTextRole(m_note, TextRole::Muted);
    const FilePreview preview = previewFile(content, size);
    m_viewer->setPlainText(preview.text);
    m_note->setText(preview.note);
}

void SnapshotBrowser::startDownload()
{
    const QString path = currentPath();
    if (path.isEmpty() || m_downloadId != 0)
        return;
    QString dir = QStandardPaths::writableLocation(QStandardPaths::DownloadLocation);
    if (dir.isEmpty())
        dir = QDir::homePath();
    const QString suggested = QDir(dir).filePath(QFileInfo(path).fileName());
    const QString local = m_chooser ? m_chooser(suggested)
                                    : QFileDialog::getSaveFileName(this, tr("Save %1").arg(QFileInfo(path).fileName()), suggested);
    if (local.isEmpty())
        return;
    emit downloadRequested(path, local);
}

void SnapshotBrowser::downloadStarted(int id, const QString &path, const QString &localFile)
{
    m_downloadId = id;
    m_download->setEnabled(false);
    m_cancel->setVisible(true);
    m_progress->setVisible(true);
    m_progress->setRange(0, 0);   // busy until the size is known
    m_progress->setFormat(tr("%1 → %2").arg(QFileInfo(path).fileName(), localFile));
}

void SnapshotBrowser::setDownloadProgress(int id, qint64 received, qint64 total)
{
    if (id != m_downloadId)
        return;
    // QProgressBar counts in int: work in KiB so files past 2 GiB still fit.
    m_progress->setRange(0, int(qMax<qint64>(1, total / 1024)));
    m_progress->setValue(int(received / 1024));
    m_progress->setFormat(tr("%1 of %2").arg(formatBytes(received), formatBytes(total)));
}

void SnapshotBrowser::downloadFinished(int id, bool ok, const QString &message)
{
    if (id != m_downloadId)
        return;
    m_downloadId = 0;
    m_cancel->setVisible(false);
    m_progress->setVisible(false);
    const QModelIndex current = m_tree->currentIndex();
    m_download->setEnabled(current.isValid() && !current.data(SnapshotFilesModel::IsDirRole).toBool()
                           && !current.data(SnapshotFilesModel::EntryRole).value<SnapshotFile>().isSymlink);
    m_note->setText(message);
    Theme::setTextRole(m_note, ok ? TextRole::Ok : TextRole::Error);
}

QString SnapshotBrowser::viewerText() const { return m_viewer->toPlainText(); }
QString SnapshotBrowser::noteText() const { return m_note->text(); }

} // namespace paddock::console
