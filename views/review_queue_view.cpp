#include "views/review_queue_view.h"

#include "models/console_format.h"
#include "models/review_change.h"
#include "models/review_queue_model.h"
#include "views/theme.h"

#include <algorithm>

#include <QDateTime>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

namespace paddock::console {

void DiffHighlighter::highlightBlock(const QString &text)
{
    QTextCharFormat format;
    const bool dark = Theme::isDark();
    switch (classifyDiffLine(text)) {
    case DiffLine::Added:
        format.setForeground(dark ? QColor(0x3f, 0xb9, 0x50) : QColor(0x11, 0x63, 0x29));
        format.setBackground(dark ? QColor(0x12, 0x26, 0x1e) : QColor(0xe6, 0xff, 0xec));
        break;
    case DiffLine::Removed:
        format.setForeground(dark ? QColor(0xf8, 0x51, 0x49) : QColor(0x82, 0x07, 0x1e));
        format.setBackground(dark ? QColor(0x25, 0x17, 0x1c) : QColor(0xff, 0xeb, 0xe9));
        break;
    case DiffLine::Hunk:
        format.setForeground(dark ? QColor(0x79, 0xc0, 0xff) : QColor(0x05, 0x50, 0xae));
        format.setBackground(dark ? QColor(0x12, 0x1d, 0x2f) : QColor(0xdd, 0xf4, 0xff));
        break;
    case DiffLine::FileHeader:
        format.setFontWeight(QFont::Bold);
        break;
    case DiffLine::Meta:
        format.setForeground(Theme::mutedTextColor());
        break;
    case DiffLine::Context:
        return;
    }
    setFormat(0, int(text.size()), format);
}

namespace {

QLabel *wrapLabel(QWidget *parent, const QString &objectName)
{
    auto *label = new QLabel(parent);
    label->setObjectName(objectName);
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
    return label;
}

QString escaped(const QString &text) { return text.toHtmlEscaped(); }

} // namespace

ReviewQueueView::ReviewQueueView(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("reviewQueueView"));
    m_queueStatus = wrapLabel(this, QStringLiteral("reviewQueueStatus"));

    createQueueTable();
    QWidget *detail = createDetailPane();
    QWidget *left = createQueueSide();

    auto *splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(left);
    splitter->addWidget(detail);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_queueStatus);
    layout->addWidget(splitter, 1);

    showDetail({});
    updateButtons();
}

void ReviewQueueView::createQueueTable()
{
    m_table = new QTableView(this);
    m_table->setObjectName(QStringLiteral("reviewTable"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setSortingEnabled(true);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->installEventFilter(this);
    m_table->setToolTip(tr("j / k: next / previous item · a: approve · r: reject · Shift/Ctrl+click: select several of "
                           "one kind"));

    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSortRole(ReviewQueueModel::SortRole);
}

// The detail pane.
QWidget *ReviewQueueView::createDetailPane()
{
    m_header = wrapLabel(this, QStringLiteral("reviewHeader"));
    m_header->setTextFormat(Qt::RichText);
    m_context = wrapLabel(this, QStringLiteral("reviewContext"));
    m_context->setTextFormat(Qt::RichText);
    connect(m_context, &QLabel::linkActivated, this, [this](const QString &link) {
        if (link.startsWith(QLatin1String("session:")))
            emit openSessionRequested(link.mid(8));
    });
    m_justification = wrapLabel(this, QStringLiteral("reviewJustification"));
    m_verdict = wrapLabel(this, QStringLiteral("reviewVerdict"));
    m_changeStatus = wrapLabel(this, QStringLiteral("reviewChangeStatus"));
    Theme::setTextRole(m_changeStatus, TextRole::Muted);

    m_change = new QPlainTextEdit(this);
    m_change->setObjectName(QStringLiteral("reviewChange"));
    m_change->setReadOnly(true);
    m_change->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_change->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_highlighter = new DiffHighlighter(m_change->document());
    m_records = new QTableWidget(this);
    m_records->setObjectName(QStringLiteral("reviewRecords"));
    m_records->setColumnCount(2);
    m_records->setHorizontalHeaderLabels({tr("Record"), tr("New value")});
    m_records->horizontalHeader()->setStretchLastSection(true);
    m_records->verticalHeader()->hide();
    m_records->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_changePages = new QStackedWidget(this);
    m_changePages->addWidget(m_change);
    m_changePages->addWidget(m_records);

    m_reason = new QLineEdit(this);
    m_reason->setObjectName(QStringLiteral("reviewReason"));
    m_reason->setPlaceholderText(tr("Reason (required to reject, and to approve a high-risk item)"));
    m_reason->setClearButtonEnabled(true);
    connect(m_reason, &QLineEdit::textChanged, this, &ReviewQueueView::updateButtons);
    m_approve = new QPushButton(tr("&Approve"), this);
    m_approve->setObjectName(QStringLiteral("reviewApprove"));
    m_reject = new QPushButton(tr("&Reject"), this);
    m_reject->setObjectName(QStringLiteral("reviewReject"));
    connect(m_approve, &QPushButton::clicked, this, &ReviewQueueView::approveSelected);
    connect(m_reject, &QPushButton::clicked, this, &ReviewQueueView::rejectSelected);
    m_decideHint = wrapLabel(this, QStringLiteral("reviewDecideHint"));
    Theme::setTextRole(m_decideHint, TextRole::Muted);

    auto *decideRow = new QHBoxLayout;
    decideRow->addWidget(m_reason, 1);
    decideRow->addWidget(m_approve);
    decideRow->addWidget(m_reject);

    auto *detail = new QWidget(this);
    auto *detailLayout = new QVBoxLayout(detail);
    detailLayout->setContentsMargins(0, 0, 0, 0);
    detailLayout->addWidget(m_header);
    detailLayout->addWidget(m_context);
    detailLayout->addWidget(m_justification);
    detailLayout->addWidget(m_verdict);
    detailLayout->addWidget(m_changeStatus);
    detailLayout->addWidget(m_changePages, 1);
    detailLayout->addLayout(decideRow);
    detailLayout->addWidget(m_decideHint);
    return detail;
}

// The queue table over the per-approver stats.
QWidget *ReviewQueueView::createQueueSide()
{
    // Per-approver stats under the table.
    m_stats = new QTableWidget(this);
    m_stats->setObjectName(QStringLiteral("approverStats"));
    m_stats->setColumnCount(5);
    m_stats->setHorizontalHeaderLabels({tr("Approver"), tr("Decided"), tr("Approved"), tr("Approval rate"), tr("Median time to decide")});
    m_stats->horizontalHeader()->setStretchLastSection(true);
    m_stats->verticalHeader()->hide();
    m_stats->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_stats->setSelectionMode(QAbstractItemView::NoSelection);
    m_stats->setToolTip(tr("Every approver's decisions: a rate near 100% with a short median time may be rubber-stamping."));
    m_statsStatus = wrapLabel(this, QStringLiteral("approverStatsStatus"));
    Theme::setTextRole(m_statsStatus, TextRole::Muted);

    auto *left = new QWidget(this);
    auto *leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_table, 3);
    auto *statsTitle = new QLabel(tr("<b>Approvers</b>"), left);
    leftLayout->addWidget(statsTitle);
    leftLayout->addWidget(m_stats, 1);
    leftLayout->addWidget(m_statsStatus);
    return left;
}

void ReviewQueueView::setModel(ReviewQueueModel *model)
{
    m_model = model;
    m_proxy->setSourceModel(model);
    m_table->setModel(m_proxy);
    m_table->sortByColumn(ReviewQueueModel::Age, Qt::DescendingOrder);   // oldest first
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Kind, 115);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Risk, 60);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Requester, 80);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Age, 60);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Impact, 100);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Cost, 70);
    m_table->horizontalHeader()->resizeSection(ReviewQueueModel::Session, 95);
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &ReviewQueueView::onCurrentChanged);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        // Selecting the row that was already current changes no current row, only the selection.
        onCurrentChanged();
        if (selectedItemIds().size() > 1)
            showDetail(m_shown);
    });
    // Rows leave when items are decided; the detail follows whatever is current then.
    connect(m_proxy, &QAbstractItemModel::rowsRemoved, this, [this] { onCurrentChanged(); });
    connect(m_proxy, &QAbstractItemModel::dataChanged, this, &ReviewQueueView::updateButtons);
}

QString ReviewQueueView::currentItemId() const
{
    const QModelIndex current = m_table->selectionModel() ? m_table->selectionModel()->currentIndex() : QModelIndex();
    if (!current.isValid() || !m_table->selectionModel()->isRowSelected(current.row(), {}))
        return {};
    return current.data(ReviewQueueModel::ItemIdRole).toString();
}

QStringList ReviewQueueView::selectedItemIds() const
{
    QStringList ids;
    if (!m_table->selectionModel())
        return ids;
    for (const QModelIndex &row : m_table->selectionModel()->selectedRows())
        ids << row.data(ReviewQueueModel::ItemIdRole).toString();
    return ids;
}

QList<ReviewItemInfo> ReviewQueueView::selectedItems() const
{
    QList<ReviewItemInfo> items;
    if (!m_table->selectionModel())
        return items;
    for (const QModelIndex &row : m_table->selectionModel()->selectedRows()) {
        ReviewItemInfo item = row.data(ReviewQueueModel::ItemRole).value<ReviewItemInfo>();
        if (item.id == m_shown.id && !m_shown.changeHash.isEmpty())
            item = m_shown;
        items.append(item);
    }
    return items;
}

void ReviewQueueView::selectItems(const QStringList &ids)
{
    if (!m_model)
        return;
    QItemSelection selection;
    QModelIndex first;
    for (const QString &id : ids) {
        const int row = m_model->rowOf(id);
        if (row < 0)
            continue;
        const QModelIndex index = m_proxy->mapFromSource(m_model->index(row, 0));
        if (!first.isValid())
            first = index;
        selection.select(index, index.siblingAtColumn(ReviewQueueModel::ColumnCount - 1));
    }
    if (!first.isValid())
        return;
    m_table->selectionModel()->setCurrentIndex(first, QItemSelectionModel::NoUpdate);
    m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    onCurrentChanged();
}

void ReviewQueueView::onCurrentChanged()
{
    const QString id = currentItemId();
    if (id.isEmpty()) {
        m_shown = {};
        showDetail({});
    } else if (id != m_shown.id) {
        // The listed item has only a preview; the full change comes with itemRequested's answer.
        const int row = m_model ? m_model->rowOf(id) : -1;
        m_shown = row >= 0 ? m_model->itemAt(row) : ReviewItemInfo{};
        m_shown.change.clear();
        m_shown.changeHash.clear();
        showDetail(m_shown);
        emit itemRequested(id);
    }
    updateButtons();
}

void ReviewQueueView::showItem(const ReviewItemInfo &item, const CallError &error)
{
    if (item.id != m_shown.id)
        return;
    if (!error.ok()) {
        m_changeStatus->setText(error.message);
        Theme::setTextRole(m_changeStatus, TextRole::Error);
        return;
    }
    Theme::setTextRole(m_changeStatus, TextRole::Muted);
    m_shown = item;
    showDetail(item);
    updateButtons();
}

void ReviewQueueView::showDetail(const ReviewItemInfo &item)
{
    const QStringList selected = selectedItemIds();
    if (selected.size() > 1) {
        m_header->setText(QStringLiteral("<b>%1</b>").arg(escaped(tr("%n items selected", nullptr, int(selected.size())))));
        m_context->clear();
        m_justification->setText(decisionSummary(false, selectedItems()).section(u'\n', 1, 5));
        m_verdict->clear();
        m_changeStatus->setText(tr("Approve or reject decides every selected item, after a confirmation."));
        m_change->clear();
        m_changePages->setCurrentWidget(m_change);
        return;
    }
    if (item.id.isEmpty()) {
        m_header->setText(tr("<b>No item selected</b>"));
        m_context->clear();
        m_justification->setText(tr("Select an item to read its change, its justification and why policy sent it "
                                    "here."));
        m_verdict->clear();
        m_changeStatus->clear();
        m_change->clear();
        m_records->setRowCount(0);
        m_changePages->setCurrentWidget(m_change);
        return;
    }
    QString expires;
    if (item.expiresUnixMs > 0)
        expires = tr(" · expires %1").arg(QDateTime::fromMSecsSinceEpoch(item.expiresUnixMs).toString(QStringLiteral("yyyy-MM-dd hh:mm")));
    const QString riskColor = item.risk == u"high" ? Theme::errorColor().name()
                              : item.risk == u"medium" ? Theme::statusColor(SessionStatus::WaitingApproval).name()
                                                       : Theme::mutedTextColor().name();
    m_header->setText(QStringLiteral("<b>%1</b><br>%2 · <span style='color:%3'><b>%4 risk</b></span> · requested by %5 · "
                                     "impact %6%7%8<br><span style='color:%9'>%10</span>")
                          .arg(escaped(item.summary), escaped(reviewKindLabel(item.kind)), riskColor, escaped(item.risk),
                               escaped(item.requester), escaped(item.impact.isEmpty() ? tr("unknown") : item.impact),
                               item.costMicros > 0 ? escaped(tr(" · cost %1").arg(formatCost(item.costMicros))) : QString(),
                               escaped(expires), Theme::mutedTextColor().name())
                          .arg(escaped(item.id)));
    m_justification->setText(item.justification.isEmpty() ? tr("Justification: (none given)")
                                                           : tr("Justification: %1").arg(item.justification));
    m_verdict->setText(item.policyVerdict.isEmpty() ? QString() : tr("Policy: %1").arg(item.policyVerdict));
    if (m_contextSessionId != item.sessionId)
        m_context->setText(tr("Session <a href='session:%1'>%1</a>").arg(escaped(item.sessionId)));

    const bool full = !item.changeHash.isEmpty();
    const QString change = full ? item.change : item.changePreview;
    if (!full)
        m_changeStatus->setText(tr("Reading the full change…"));
    else
        m_changeStatus->setText(tr("Change (%1, %2)").arg(item.changeFormat.isEmpty() ? tr("text") : item.changeFormat,
                                                          item.changeHash.left(19)));
    const auto records = item.changeFormat == u"records" ? changeRecords(change) : QList<QPair<QString, QString>>{};
    if (!records.isEmpty()) {
        m_records->setRowCount(int(records.size()));
        for (int row = 0; row < records.size(); ++row) {
            m_records->setItem(row, 0, new QTableWidgetItem(records.at(row).first));
            m_records->setItem(row, 1, new QTableWidgetItem(records.at(row).second));
        }
        m_records->resizeColumnToContents(0);
        m_changePages->setCurrentWidget(m_records);
    } else {
        m_change->setPlainText(readableChange(item.changeFormat, change));
        m_changePages->setCurrentWidget(m_change);
    }
}

void ReviewQueueView::setSessionContext(const SessionInfo &session, bool known)
{
    if (session.id.isEmpty() || session.id != m_shown.sessionId)
        return;
    m_contextSessionId = session.id;
    if (!known) {
        m_context->setText(tr("Session %1 (not in this console's list)").arg(escaped(session.id)));
        return;
    }
    m_context->setText(tr("Session <a href='session:%1'>%1</a> · %2 · agent %3 · tier %4%5 · cost so far %6<br>Goal: %7")
                           .arg(escaped(session.id), escaped(statusLabel(session.status)), escaped(session.agent),
                                escaped(session.tier.isEmpty() ? tr("none yet") : session.tier),
                                session.tierChooser.isEmpty() ? QString() : escaped(tr(" (chosen by %1)").arg(session.tierChooser)),
                                escaped(formatCost(session.costMicros)), escaped(session.goal)));
}

void ReviewQueueView::setApproverStats(const QList<ApproverStatInfo> &stats, const CallError &error)
{
    if (!error.ok()) {
        m_statsStatus->setText(error.code == CallError::Code::Unsupported ? tr("This broker does not keep approver stats yet.")
                                                                          : error.message);
        return;
    }
    m_statsStatus->setText(stats.isEmpty() ? tr("No decisions yet.") : QString());
    m_stats->setRowCount(int(stats.size()));
    for (int row = 0; row < stats.size(); ++row) {
        const ApproverStatInfo &s = stats.at(row);
        const QStringList cells{s.principal, QString::number(s.decided), QString::number(s.approved),
                                QStringLiteral("%1%").arg(qRound(s.approvalRate * 100)), formatDuration(s.medianDecideMs)};
        for (int column = 0; column < cells.size(); ++column)
            m_stats->setItem(row, column, new QTableWidgetItem(cells.at(column)));
    }
}

void ReviewQueueView::setQueueStatus(const QString &text, bool problem)
{
    m_queueStatus->setText(text);
    Theme::setTextRole(m_queueStatus, problem ? TextRole::Error : TextRole::Muted);
}

QString ReviewQueueView::queueStatusText() const { return m_queueStatus->text(); }

void ReviewQueueView::setDecideAllowed(bool allowed, const QString &reason)
{
    m_decideAllowed = allowed;
    m_notAllowedReason = reason;
    updateButtons();
}

void ReviewQueueView::setSelf(const QString &principal)
{
    m_self = principal;
    updateButtons();
}

void ReviewQueueView::updateButtons()
{
    const QList<ReviewItemInfo> items = selectedItems();
    QString approveWhy;
    QString rejectWhy;
    const QString reason = m_reason->text().trimmed();
    m_ownRequestSelected = false;
    if (!m_decideAllowed) {
        approveWhy = rejectWhy = m_notAllowedReason.isEmpty() ? tr("Your role may not decide review items.") : m_notAllowedReason;
    } else if (m_deciding) {
        approveWhy = rejectWhy = tr("A decision is being recorded…");
    } else if (const QString problem = bulkProblem(items); !problem.isEmpty()) {
        approveWhy = rejectWhy = problem.left(1).toUpper() + problem.mid(1) + u'.';
    } else {
        const auto own = std::find_if(items.begin(), items.end(), [this](const ReviewItemInfo &item) {
            return !m_self.isEmpty() && item.requester == m_self;
        });
        m_ownRequestSelected = own != items.end();
        if (reason.isEmpty())
            rejectWhy = tr("Type a reason to reject: the requester reads it.");
        if (m_ownRequestSelected)
            approveWhy = tr("You requested %1: nobody approves their own request, so another approver decides it.")
                             .arg(own->id);
        else if (reason.isEmpty() && reasonRequired(true, items))
            approveWhy = tr("Type a reason to approve a high-risk item.");
        else if (items.size() == 1 && items.first().changeHash.isEmpty())
            approveWhy = tr("Reading the full change: the broker binds an approval to the change you read.");
    }
    m_approve->setEnabled(approveWhy.isEmpty());
    m_reject->setEnabled(rejectWhy.isEmpty());
    const QString count = items.size() > 1 ? tr(" %n items", nullptr, int(items.size())) : QString();
    m_approve->setToolTip(approveWhy.isEmpty() ? tr("Approve%1 (a)").arg(count) : approveWhy);
    m_reject->setToolTip(rejectWhy.isEmpty() ? tr("Reject%1 (r)").arg(count) : rejectWhy);
    QStringList hints;
    if (!approveWhy.isEmpty())
        hints << approveWhy;
    if (!rejectWhy.isEmpty() && rejectWhy != approveWhy)
        hints << rejectWhy;
    m_decideHint->setText(items.isEmpty() ? QString() : hints.join(u' '));
}

void ReviewQueueView::approveSelected() { decide(true); }
void ReviewQueueView::rejectSelected() { decide(false); }

void ReviewQueueView::decide(bool approve)
{
    QPushButton *button = approve ? m_approve : m_reject;
    updateButtons();
    if (!button->isEnabled()) {
        // Say why, and take the user where the fix is.
        m_decideHint->setText(button->toolTip());
        if (m_reason->text().trimmed().isEmpty() && reasonRequired(approve, selectedItems())
            && !(approve && m_ownRequestSelected))
            m_reason->setFocus();
        return;
    }
    const QList<ReviewItemInfo> items = selectedItems();
    QStringList ids;
    for (const ReviewItemInfo &item : items)
        ids << item.id;
    if (items.size() > 1) {
        QMessageBox confirm(QMessageBox::Question, approve ? tr("Approve review items") : tr("Reject review items"),
                            decisionSummary(approve, items), QMessageBox::NoButton, this);
        confirm.setObjectName(QStringLiteral("reviewConfirmation"));
        QPushButton *yes = confirm.addButton(approve ? tr("Approve %n items", nullptr, int(items.size()))
                                                     : tr("Reject %n items", nullptr, int(items.size())),
                                             QMessageBox::AcceptRole);
        confirm.addButton(QMessageBox::Cancel);
        confirm.setDefaultButton(QMessageBox::Cancel);
        if (!m_reason->text().trimmed().isEmpty())
            confirm.setInformativeText(tr("Reason: %1").arg(m_reason->text().trimmed()));
        confirm.exec();
        if (confirm.clickedButton() != yes)
            return;
    }
    m_deciding = true;
    updateButtons();
    emit decideRequested(ids, approve, m_reason->text().trimmed());
}

void ReviewQueueView::decisionFinished(bool approve, const QStringList &ids, const CallError &error)
{
    m_deciding = false;
    if (error.ok()) {
        m_reason->clear();
        m_decideHint->setText(approve ? tr("Approved %1.").arg(ids.join(QStringLiteral(", ")))
                                      : tr("Rejected %1.").arg(ids.join(QStringLiteral(", "))));
        Theme::setTextRole(m_decideHint, TextRole::Ok);
    } else {
        m_decideHint->setText(error.message);
        Theme::setTextRole(m_decideHint, TextRole::Error);
    }
    updateButtons();
    if (!error.ok())
        m_decideHint->setText(error.message);
    m_table->setFocus();
}

void ReviewQueueView::moveCurrent(int delta)
{
    const int rows = m_proxy->rowCount();
    if (rows == 0)
        return;
    // Focus gives the table a current index without selecting it: the first key selects that row.
    const QModelIndex current = m_table->currentIndex();
    const bool selected = current.isValid() && m_table->selectionModel()->isRowSelected(current.row(), {});
    const int row = selected ? std::clamp(current.row() + delta, 0, rows - 1) : (current.isValid() ? current.row() : 0);
    const QModelIndex next = m_proxy->index(row, 0);
    m_table->selectionModel()->setCurrentIndex(next, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_table->scrollTo(next);
}

bool ReviewQueueView::eventFilter(QObject *watched, QEvent *event)
{
    if (watched == m_table && event->type() == QEvent::KeyPress) {
        auto *key = static_cast<QKeyEvent *>(event);
        if (key->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier))
            return QWidget::eventFilter(watched, event);
        switch (key->key()) {
        case Qt::Key_J: moveCurrent(1); return true;
        case Qt::Key_K: moveCurrent(-1); return true;
        case Qt::Key_A: approveSelected(); return true;
        case Qt::Key_R: rejectSelected(); return true;
        default: break;
        }
    }
    return QWidget::eventFilter(watched, event);
}

QString ReviewQueueView::detailText() const
{
    return QStringList{m_header->text(), m_context->text(), m_justification->text(), m_verdict->text(),
                       m_changeStatus->text()}
        .join(u'\n');
}

} // namespace paddock::console
