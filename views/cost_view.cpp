#include "views/cost_view.h"

#include "models/console_format.h"
#include "models/cost_breakdown.h"
#include "views/stacked_bar_plot.h"
#include "views/theme.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
constexpr qint64 kHourMs = 3'600'000;
double dollars(qint64 micros) { return double(micros) / 1e6; }
} // namespace

CostView::CostView(QWidget *parent) : QWidget(parent)
{
    setObjectName(QStringLiteral("costView"));
    m_groupBy = new QComboBox(this);
    m_groupBy->setObjectName(QStringLiteral("costGroupBy"));
    m_groupBy->addItem(tr("by agent"), QStringLiteral("agent"));
    m_groupBy->addItem(tr("by tier"), QStringLiteral("tier"));
    m_groupBy->addItem(tr("by model"), QStringLiteral("model"));
    m_groupBy->addItem(tr("by kind (model, sandbox, storage)"), QStringLiteral("kind"));
    m_range = new QComboBox(this);
    m_range->setObjectName(QStringLiteral("costRange"));
    m_range->addItem(tr("last hour"), kHourMs);
    m_range->addItem(tr("last 24 hours"), 24 * kHourMs);
    m_range->addItem(tr("last 7 days"), 7 * 24 * kHourMs);
    m_range->addItem(tr("last 30 days"), 30 * 24 * kHourMs);
    m_range->setCurrentIndex(1);
    m_totals = new QLabel(this);
    m_totals->setObjectName(QStringLiteral("costTotals"));
    m_totals->setWordWrap(true);
    m_spendStatus = new QLabel(this);
    m_spendStatus->setObjectName(QStringLiteral("costStatus"));
    m_spendStatus->setWordWrap(true);

    auto *controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Spend"), this));
    controls->addWidget(m_groupBy);
    controls->addWidget(m_range);
    controls->addStretch(1);

    m_spend = new StackedBarPlot(this);
    m_spend->setObjectName(QStringLiteral("spendPlot"));
    m_spend->setValueLabel(tr("dollars"));
    m_spend->setEmptyText(tr("no cost recorded in this range"));

    m_budgetPlot = new StackedBarPlot(this);
    m_budgetPlot->setObjectName(QStringLiteral("budgetPlot"));
    m_budgetPlot->setTitle(tr("Budgets today: spent against each agent's per-day budget"));
    m_budgetPlot->setValueLabel(tr("dollars"));
    m_budgetPlot->setEmptyText(tr("no agent has a budget"));
    m_budgets = new QTableWidget(this);
    m_budgets->setObjectName(QStringLiteral("budgetTable"));
    m_budgets->setColumnCount(7);
    m_budgets->setHorizontalHeaderLabels({tr("Agent"), tr("Spent today"), tr("Per day"), tr("Used"), tr("Burn / hour"),
                                          tr("Per session"), tr("Paused sessions")});
    m_budgets->verticalHeader()->hide();
    // Seven short columns beside the plot: sized to what they hold, so that all of them fit at 1280 px.
    m_budgets->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_budgets->horizontalHeader()->setStretchLastSection(true);
    m_budgets->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_budgets->setSelectionMode(QAbstractItemView::NoSelection);
    m_budgetStatus = new QLabel(this);
    m_budgetStatus->setObjectName(QStringLiteral("budgetStatus"));
    m_budgetStatus->setWordWrap(true);

    auto *budgets = new QWidget(this);
    auto *budgetLayout = new QHBoxLayout(budgets);
    budgetLayout->setContentsMargins(0, 0, 0, 0);
    budgetLayout->addWidget(m_budgetPlot, 1);
    auto *tableSide = new QWidget(budgets);
    auto *tableLayout = new QVBoxLayout(tableSide);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    tableLayout->addWidget(m_budgets, 1);
    tableLayout->addWidget(m_budgetStatus);
    budgetLayout->addWidget(tableSide, 1);

    auto *spendSide = new QWidget(this);
    auto *spendLayout = new QVBoxLayout(spendSide);
    spendLayout->setContentsMargins(0, 0, 0, 0);
    spendLayout->addLayout(controls);
    spendLayout->addWidget(m_totals);
    spendLayout->addWidget(m_spendStatus);
    spendLayout->addWidget(m_spend, 1);

    auto *splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(spendSide);
    splitter->addWidget(budgets);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(splitter);

    connect(m_groupBy, &QComboBox::currentIndexChanged, this, &CostView::queryChanged);
    connect(m_range, &QComboBox::currentIndexChanged, this, &CostView::queryChanged);
}

QString CostView::groupBy() const { return m_groupBy->currentData().toString(); }
qint64 CostView::rangeMs() const { return m_range->currentData().toLongLong(); }

CostQuery CostView::query(qint64 nowMs) const
{
    CostQuery q;
    q.groupBy = groupBy();
    q.bucketMs = CostBreakdown::bucketFor(rangeMs());
    // The grid ends with the bucket that holds now.
    q.toUnixMs = nowMs - nowMs % q.bucketMs + q.bucketMs;
    q.fromUnixMs = q.toUnixMs - rangeMs();
    return q;
}

void CostView::setSpend(const CostBreakdown &breakdown)
{
    QList<double> starts;
    for (qint64 start : breakdown.bucketStarts())
        starts << double(start) / 1000.0;
    QList<StackedBarPlot::Series> series;
    QStringList top;
    for (int g = 0; g < breakdown.groups().size(); ++g) {
        StackedBarPlot::Series s{breakdown.groups().at(g), {}, {}};
        for (qint64 micros : breakdown.groupSeries(g))
            s.values << dollars(micros);
        series.append(s);
        top << QStringLiteral("%1 %2").arg(breakdown.groups().at(g), formatCost(breakdown.groupTotal(g)));
    }
    m_spend->setTitle(tr("Spend %1, %2, in %3 buckets")
                          .arg(m_groupBy->currentText(), m_range->currentText(), formatDuration(breakdown.bucketMs())));
    m_spend->setTimeBuckets(starts, double(breakdown.bucketMs()) / 1000.0, series);
    m_totals->setText(tr("<b>Total %1</b> %2%3")
                          .arg(formatCost(breakdown.totalMicros()), m_range->currentText().toHtmlEscaped(),
                               top.isEmpty() ? QString() : QStringLiteral(" · ") + top.join(QStringLiteral(" · ")).toHtmlEscaped()));
}

void CostView::setSpendStatus(const QString &text, bool problem)
{
    m_spendStatus->setText(text);
    m_spendStatus->setVisible(!text.isEmpty());
    Theme::setTextRole(m_spendStatus, problem ? TextRole::Error : TextRole::Muted);
}

QString CostView::totalsText() const { return m_totals->text(); }
QString CostView::spendStatusText() const { return m_spendStatus->text(); }

void CostView::setBudgets(const QList<BudgetInfo> &budgets)
{
    QStringList agents;
    StackedBarPlot::Series spent{tr("spent today"), {}, Theme::statusColor(SessionStatus::Running)};
    StackedBarPlot::Series over{tr("over budget"), {}, Theme::errorColor()};
    StackedBarPlot::Series left{tr("left today"), {}, Theme::mutedTextColor()};
    m_budgets->setRowCount(int(budgets.size()));
    for (int row = 0; row < budgets.size(); ++row) {
        const BudgetInfo &b = budgets.at(row);
        agents << b.agent;
        const qint64 within = b.perDayMicros > 0 ? std::min(b.spentTodayMicros, b.perDayMicros) : b.spentTodayMicros;
        spent.values << dollars(within);
        over.values << dollars(std::max<qint64>(0, b.perDayMicros > 0 ? b.spentTodayMicros - b.perDayMicros : 0));
        left.values << dollars(std::max<qint64>(0, b.perDayMicros - b.spentTodayMicros));
        const QString used = b.perDayMicros > 0
                                 ? QStringLiteral("%1%").arg(qRound(100.0 * double(b.spentTodayMicros) / double(b.perDayMicros)))
                                 : tr("no budget");
        const QStringList cells{b.agent,
                                formatCost(b.spentTodayMicros),
                                b.perDayMicros > 0 ? formatCost(b.perDayMicros) : tr("none"),
                                used,
                                formatCost(b.burnMicrosPerHour),
                                b.perSessionMicros > 0 ? formatCost(b.perSessionMicros) : tr("none"),
                                QString::number(b.pausedSessions)};
        for (int column = 0; column < cells.size(); ++column) {
            auto *cell = new QTableWidgetItem(cells.at(column));
            if (b.perDayMicros > 0 && b.spentTodayMicros >= b.perDayMicros * 8 / 10)
                cell->setForeground(b.spentTodayMicros >= b.perDayMicros ? Theme::errorColor()
                                                                           : Theme::statusColor(SessionStatus::WaitingApproval));
            m_budgets->setItem(row, column, cell);
        }
    }
    m_budgetPlot->setCategories(agents, {spent, over, left});
}

void CostView::setBudgetStatus(const QString &text, bool problem)
{
    m_budgetStatus->setText(text);
    m_budgetStatus->setVisible(!text.isEmpty());
    Theme::setTextRole(m_budgetStatus, problem ? TextRole::Error : TextRole::Muted);
}

} // namespace paddock::console
