#include "views/decisions_view.h"

#include "models/decision_table_model.h"
#include "views/stacked_bar_plot.h"
#include "views/theme.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIdentityProxyModel>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace paddock::console {

namespace {

QColor overColor() { return Theme::isDark() ? QColor(0xd2, 0x99, 0x22) : QColor(0xbf, 0x87, 0x00); }
QColor underColor() { return Theme::isDark() ? QColor(0xf0, 0x88, 0x3e) : QColor(0xbc, 0x4c, 0x00); }

// Tints over-allocated rows yellow and under-allocated (or OOM) rows orange; the Fitting column bold.
class AllocationTint : public QIdentityProxyModel {
public:
    using QIdentityProxyModel::QIdentityProxyModel;
    QVariant data(const QModelIndex &index, int role) const override
    {
        if (role == Qt::BackgroundRole) {
            const int allocation = index.data(DecisionTableModel::AllocationRole).toInt();
            if (allocation == 0)
                return {};
            QColor tint = allocation > 0 ? overColor() : underColor();
            tint.setAlpha(Theme::isDark() ? 60 : 45);
            return tint;
        }
        if (role == Qt::FontRole && index.column() == DecisionTableModel::Fitting
            && index.data(DecisionTableModel::AllocationRole).toInt() != 0) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        return QIdentityProxyModel::data(index, role);
    }
};

} // namespace

QList<QPair<QString, QColor>> decisionOutcomeSeries()
{
    return {{QStringLiteral("ok"), Theme::okColor()},
            {QStringLiteral("over-allocated"), overColor()},
            {QStringLiteral("under-allocated"), underColor()},
            {QStringLiteral("oom"), Theme::errorColor()},
            {QStringLiteral("timeout"), Theme::errorColor().darker(140)},
            {QStringLiteral("pending"), Theme::mutedTextColor()}};
}

DecisionsView::DecisionsView(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("decisionsView"));
    m_agent = new QLineEdit(this);
    m_agent->setObjectName(QStringLiteral("decisionAgentFilter"));
    m_agent->setPlaceholderText(tr("agent"));
    m_agent->setClearButtonEnabled(true);
    m_chooser = new QComboBox(this);
    m_chooser->setObjectName(QStringLiteral("decisionChooserFilter"));
    m_chooser->addItem(tr("Any chooser"), QString());
    for (const char *chooser : {"default", "agent", "platform", "human"})
        m_chooser->addItem(QString::fromLatin1(chooser), QString::fromLatin1(chooser));
    m_tier = new QComboBox(this);
    m_tier->setObjectName(QStringLiteral("decisionTierFilter"));
    m_tier->addItem(tr("Any tier"), QString());
    m_outcome = new QComboBox(this);
    m_outcome->setObjectName(QStringLiteral("decisionOutcomeFilter"));
    m_outcome->addItem(tr("Any outcome"), QString());
    for (const char *outcome : {"ok", "oom", "timeout", "over_allocated", "under_allocated"})
        m_outcome->addItem(QString::fromLatin1(outcome).replace(u'_', u'-'), QString::fromLatin1(outcome));
    m_override = new QPushButton(tr("&Override tier…"), this);
    m_override->setObjectName(QStringLiteral("decisionOverride"));

    auto *filters = new QHBoxLayout;
    filters->addWidget(new QLabel(tr("Filter:"), this));
    filters->addWidget(m_agent);
    filters->addWidget(m_chooser);
    filters->addWidget(m_tier);
    filters->addWidget(m_outcome);
    filters->addStretch(1);
    filters->addWidget(m_override);

    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("decisionsStatus"));
    m_status->setWordWrap(true);
    Theme::setTextRole(m_status, TextRole::Muted);

    m_table = new QTableView(this);
    m_table->setObjectName(QStringLiteral("decisionsTable"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_table->setWordWrap(false);
    m_tint = new AllocationTint(this);

    m_byTier = new StackedBarPlot(this);
    m_byTier->setObjectName(QStringLiteral("outcomesByTier"));
    m_byTier->setTitle(tr("Outcomes by tier"));
    m_byTier->setValueLabel(tr("decisions"));
    m_byTier->setEmptyText(tr("no decisions yet"));
    m_byChooser = new StackedBarPlot(this);
    m_byChooser->setObjectName(QStringLiteral("outcomesByChooser"));
    m_byChooser->setTitle(tr("Outcomes by chooser"));
    m_byChooser->setValueLabel(tr("decisions"));
    m_byChooser->setEmptyText(tr("no decisions yet"));
    auto *charts = new QWidget(this);
    auto *chartsLayout = new QHBoxLayout(charts);
    chartsLayout->setContentsMargins(0, 0, 0, 0);
    chartsLayout->addWidget(m_byTier);
    chartsLayout->addWidget(m_byChooser);

    auto *splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_table);
    splitter->addWidget(charts);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(filters);
    layout->addWidget(m_status);
    layout->addWidget(splitter, 1);

    auto changed = [this] { emit filterChanged(filter()); };
    connect(m_agent, &QLineEdit::editingFinished, this, changed);
    connect(m_chooser, &QComboBox::currentIndexChanged, this, changed);
    connect(m_tier, &QComboBox::currentIndexChanged, this, changed);
    connect(m_outcome, &QComboBox::currentIndexChanged, this, changed);
    connect(m_override, &QPushButton::clicked, this, [this] {
        const QString id = selectedSessionId();
        if (!id.isEmpty())
            emit overrideRequested(id);
    });
    connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex &index) {
        emit openSessionRequested(index.data(DecisionTableModel::SessionIdRole).toString());
    });
    updateOverride();
}

void DecisionsView::setModel(DecisionTableModel *model)
{
    m_model = model;
    m_tint->setSourceModel(model);
    m_table->setModel(m_tint);
    // The short columns fit their longest usual value ("demo-platform", "over-allocated"); the
    // reason takes the rest (its whole text is in the row's tooltip).
    auto *header = m_table->horizontalHeader();
    header->setStretchLastSection(false);
    header->resizeSection(DecisionTableModel::Time, 140);
    header->resizeSection(DecisionTableModel::Session, 110);
    header->resizeSection(DecisionTableModel::Agent, 110);
    header->resizeSection(DecisionTableModel::Requested, 80);
    header->resizeSection(DecisionTableModel::Chosen, 70);
    header->resizeSection(DecisionTableModel::Chooser, 75);
    header->resizeSection(DecisionTableModel::Rule, 120);
    header->resizeSection(DecisionTableModel::Outcome, 115);
    header->resizeSection(DecisionTableModel::Fitting, 135);
    header->setSectionResizeMode(DecisionTableModel::Reason, QHeaderView::Stretch);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, &DecisionsView::updateOverride);
    connect(m_tint, &QAbstractItemModel::modelReset, this, &DecisionsView::updateOverride);
}

void DecisionsView::setStats(const QString &groupBy, const QList<DecisionStatsLineInfo> &lines)
{
    QStringList keys;
    const auto outcomes = decisionOutcomeSeries();
    QList<StackedBarPlot::Series> series;
    for (const auto &[name, color] : outcomes)
        series.append({name, {}, color});
    for (const DecisionStatsLineInfo &line : lines) {
        keys << (line.key.isEmpty() ? tr("(none)") : line.key);
        const qint64 values[] = {line.ok, line.overAllocated, line.underAllocated, line.oom, line.timeout, line.pending};
        for (int i = 0; i < series.size(); ++i)
            series[i].values << double(values[i]);
    }
    StackedBarPlot *plot = groupBy == u"chooser" ? m_byChooser : m_byTier;
    plot->setCategories(keys, series);
}

void DecisionsView::setStatus(const QString &text, bool problem)
{
    m_status->setText(text);
    Theme::setTextRole(m_status, problem ? TextRole::Error : TextRole::Muted);
}

QString DecisionsView::statusText() const { return m_status->text(); }

void DecisionsView::setTiers(const QStringList &tiers)
{
    const QString current = m_tier->currentData().toString();
    QStringList have;
    for (int i = 1; i < m_tier->count(); ++i)
        have << m_tier->itemData(i).toString();
    if (have == tiers)
        return;
    QSignalBlocker block(m_tier);
    while (m_tier->count() > 1)
        m_tier->removeItem(1);
    for (const QString &tier : tiers)
        m_tier->addItem(tier, tier);
    m_tier->setCurrentIndex(std::max(0, m_tier->findData(current)));
}

void DecisionsView::setOverrideAllowed(bool allowed, const QString &reason)
{
    m_overrideAllowed = allowed;
    m_overrideWhyNot = reason;
    updateOverride();
}

DecisionFilter DecisionsView::filter() const
{
    DecisionFilter f;
    f.agent = m_agent->text().trimmed();
    f.chooser = m_chooser->currentData().toString();
    f.tier = m_tier->currentData().toString();
    f.outcome = m_outcome->currentData().toString();
    return f;
}

QString DecisionsView::selectedSessionId() const
{
    if (!m_table->selectionModel())
        return {};
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    return rows.isEmpty() ? QString() : rows.first().data(DecisionTableModel::SessionIdRole).toString();
}

void DecisionsView::updateOverride()
{
    QString why;
    if (!m_overrideAllowed)
        why = m_overrideWhyNot.isEmpty() ? tr("Your role may not override tiers.") : m_overrideWhyNot;
    else if (selectedSessionId().isEmpty())
        why = tr("Select a decision: its session's tier is overridden.");
    m_override->setEnabled(why.isEmpty());
    m_override->setToolTip(why.isEmpty() ? tr("Move the selected decision's session to another tier at its next step")
                                         : why);
}

} // namespace paddock::console
