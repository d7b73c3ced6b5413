#include "views/debug_shell_panel.h"

#include "views/theme.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QTextDocument>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
// The transcript keeps this many lines; older output scrolls away.
constexpr int kMaxTranscriptBlocks = 20'000;
} // namespace

DebugShellPanel::DebugShellPanel(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    auto *top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Tier"), this));
    m_tier = new QComboBox(this);
    m_tier->setObjectName(QStringLiteral("debugShellTier"));
    m_tier->setToolTip(tr("The tier of the fresh sandbox the snapshot is restored into"));
    top->addWidget(m_tier);
    m_open = new QPushButton(tr("Open shell"), this);
    m_open->setObjectName(QStringLiteral("debugShellOpen"));
    top->addWidget(m_open);
    m_state = new QLabel(this);
    m_state->setObjectName(QStringLiteral("debugShellState"));
    m_state->setWordWrap(true);
    m_state->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    top->addWidget(m_state, 1);
    layout->addLayout(top);

    m_output = new QPlainTextEdit(this);
    m_output->setObjectName(QStringLiteral("debugShellOutput"));
    m_output->setReadOnly(true);
    m_output->setMaximumBlockCount(kMaxTranscriptBlocks);
    m_output->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_output->setPlaceholderText(tr("Open a shell: a fresh sandbox of the chosen tier, restored from this failure's "
                                    "workspace snapshot. Every command is recorded in the session's log."));
    layout->addWidget(m_output, 1);

    auto *bottom = new QHBoxLayout;
    auto *prompt = new QLabel(QStringLiteral("$"), this);
    prompt->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_command = new QLineEdit(this);
    m_command->setObjectName(QStringLiteral("debugShellCommand"));
    m_command->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_command->setPlaceholderText(tr("a command, run with /bin/sh -c in /workspace; Enter runs it"));
    m_command->installEventFilter(this);
    bottom->addWidget(prompt);
    bottom->addWidget(m_command, 1);
    layout->addLayout(bottom);

    connect(m_open, &QPushButton::clicked, this, [this] {
        if (!m_shell.shellId.isEmpty()) {
            emit closeRequested(m_shell.shellId);
            return;
        }
        if (m_snapshotRef.isEmpty() || m_opening)
            return;
        m_opening = true;
        const QString tier = m_tier->currentData().toString();
        append(tr("# opening a %1 sandbox restored from snapshot %2…\n").arg(tier.isEmpty() ? m_failedTier : tier, m_snapshotRef),
               Theme::mutedTextColor());
        updateState();
        emit openRequested(tier);
    });
    connect(m_command, &QLineEdit::returnPressed, this, &DebugShellPanel::submit);
    updateState();
}

void DebugShellPanel::setTarget(const QString &pool, const QString &sandboxId, const QString &snapshotRef,
                                const QString &failedTier)
{
    if (pool == m_pool && sandboxId == m_sandboxId) {
        // The same failure, more complete (the list entry, then GetPostMortem's answer).
        m_snapshotRef = snapshotRef;
        m_failedTier = failedTier;
        updateState();
        return;
    }
    if (!m_shell.shellId.isEmpty())
        emit closeRequested(m_shell.shellId);   // a shell belongs to one post-mortem
    m_pool = pool;
    m_sandboxId = sandboxId;
    m_snapshotRef = snapshotRef;
    m_failedTier = failedTier;
    m_shell = {};
    m_opening = false;
    m_busy = false;
    m_output->clear();
    const int index = m_tier->findData(failedTier);
    if (index >= 0)
        m_tier->setCurrentIndex(index);
    updateState();
}

void DebugShellPanel::setTiers(const QStringList &tiers)
{
    const QString current = m_tier->currentData().toString();
    m_tier->clear();
    for (const QString &tier : tiers)
        m_tier->addItem(tier == m_failedTier ? tr("%1 (the failed one's)").arg(tier) : tier, tier);
    if (m_tier->count() == 0 && !m_failedTier.isEmpty())
        m_tier->addItem(m_failedTier, m_failedTier);
    const int index = m_tier->findData(current.isEmpty() ? m_failedTier : current);
    if (index >= 0)
        m_tier->setCurrentIndex(index);
}

void DebugShellPanel::shellOpened(const DebugShellInfo &shell, const QString &error)
{
    if (!m_opening)
        return;
    m_opening = false;
    if (!error.isEmpty()) {
        append(error + u'\n', Theme::errorColor());
    } else {
        m_shell = shell;
        append(tr("# shell %1: sandbox %2 (%3) on pool %4, restored from %5; closed after %6 s idle\n")
                   .arg(shell.shellId, shell.sandboxId, shell.tier, shell.pool, shell.snapshotRef)
                   .arg(shell.idleTimeoutMs / 1000),
               Theme::mutedTextColor());
        m_command->setFocus();
    }
    updateState();
}

void DebugShellPanel::submit()
{
    const QString line = m_command->text().trimmed();
    if (line.isEmpty() || m_shell.shellId.isEmpty() || m_busy)
        return;
    if (m_history.isEmpty() || m_history.last() != line)
        m_history.append(line);
    m_historyPos = int(m_history.size());
    m_command->clear();
    m_busy = true;
    append(QStringLiteral("$ ") + line + u'\n', Theme::okColor());
    updateState();
    emit execRequested(m_shell.shellId, line);
}

void DebugShellPanel::appendOutput(const QByteArray &stdoutData, const QByteArray &stderrData)
{
    if (!stdoutData.isEmpty())
        append(QString::fromUtf8(stdoutData));
    if (!stderrData.isEmpty())
        append(QString::fromUtf8(stderrData), Theme::errorColor());
}

void DebugShellPanel::execFinished(int exitCode, int signal, const QString &error)
{
    m_busy = false;
    QString line;
    if (signal > 0)
        line = tr("# killed by signal %1").arg(signal);
    else
        line = tr("# exit %1").arg(exitCode);
    if (!error.isEmpty())
        line += QStringLiteral(": ") + error;
    // An empty last block: the transcript is empty or ends with a newline (no copy of it all).
    const bool atLineStart = m_output->document()->lastBlock().text().isEmpty();
    append((atLineStart ? QString() : QStringLiteral("\n")) + line + u'\n',
           exitCode == 0 && signal == 0 && error.isEmpty() ? Theme::mutedTextColor() : Theme::errorColor());
    updateState();
}

void DebugShellPanel::shellClosed(const QString &error)
{
    if (m_shell.shellId.isEmpty())
        return;
    append(error.isEmpty() ? tr("# shell %1 closed\n").arg(m_shell.shellId) : error + u'\n',
           error.isEmpty() ? Theme::mutedTextColor() : Theme::errorColor());
    m_shell = {};
    m_busy = false;
    updateState();
}

QString DebugShellPanel::transcript() const { return m_output->toPlainText(); }

void DebugShellPanel::append(const QString &text, const QColor &color)
{
    QTextCursor cursor(m_output->document());
    cursor.movePosition(QTextCursor::End);
    QTextCharFormat format;
    if (color.isValid())
        format.setForeground(color);
    cursor.insertText(text, format);
    m_output->verticalScrollBar()->setValue(m_output->verticalScrollBar()->maximum());
}

void DebugShellPanel::setRefusal(const QString &reason)
{
    m_refusal = reason;
    updateState();
}

void DebugShellPanel::updateState()
{
    const bool open = !m_shell.shellId.isEmpty();
    m_open->setText(open ? tr("Close shell") : tr("Open shell"));
    m_open->setEnabled(!m_opening && (open || (!m_snapshotRef.isEmpty() && m_refusal.isEmpty())));
    m_open->setToolTip(open ? QString() : m_refusal);
    m_tier->setEnabled(!open && !m_opening);
    m_command->setEnabled(open && !m_busy);
    if (m_sandboxId.isEmpty())
        m_state->setText(tr("Choose a failure first"));
    else if (m_snapshotRef.isEmpty())
        m_state->setText(tr("No snapshot was kept of this sandbox, so there is nothing to open a shell on"));
    else if (m_opening)
        m_state->setText(tr("Opening…"));
    else if (open)
        m_state->setText(m_busy ? tr("Running…") : tr("Shell %1 on %2 · commands are audited").arg(m_shell.shellId, m_shell.sandboxId));
    else
        m_state->setText(tr("Restores snapshot %1 into a fresh sandbox").arg(m_snapshotRef));
    Theme::setTextRole(m_state, m_snapshotRef.isEmpty() && !m_sandboxId.isEmpty() ? TextRole::Error : TextRole::Muted);
}

bool DebugShellPanel::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == m_command && event->type() == QEvent::KeyPress && !m_history.isEmpty()) {
        auto *key = static_cast<QKeyEvent *>(event);
        if (key->key() == Qt::Key_Up || key->key() == Qt::Key_Down) {
            m_historyPos = qBound(0, m_historyPos + (key->key() == Qt::Key_Up ? -1 : 1), int(m_history.size()));
            m_command->setText(m_historyPos < m_history.size() ? m_history.at(m_historyPos) : QString());
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

} // namespace paddock::console
