#pragma once
// Cost: spend over time grouped by agent, tier or model (stacked bars, one per time bucket), with
// the totals; and budgets: per agent, what was spent today against the day's budget, the burn rate
// over the last hour and the sessions paused waiting for a budget extension.
//
// Threads: GUI thread only. No I/O: a change of grouping or range goes out as queryChanged; the
// window answers with setSpend() and setBudgets().

#include "models/governance_types.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QTableWidget;

namespace paddock::console {

class CostBreakdown;
class StackedBarPlot;

class CostView : public QWidget {
    Q_OBJECT

public:
    explicit CostView(QWidget *parent = nullptr);

    // The query the controls describe, ending at nowMs (bucket size from the range).
    CostQuery query(qint64 nowMs) const;
    QString groupBy() const;
    qint64 rangeMs() const;

    void setSpend(const CostBreakdown &breakdown);
    void setSpendStatus(const QString &text, bool problem);
    void setBudgets(const QList<BudgetInfo> &budgets);
    void setBudgetStatus(const QString &text, bool problem);

    QComboBox *groupByCombo() const { return m_groupBy; }
    QComboBox *rangeCombo() const { return m_range; }
    StackedBarPlot *spendPlot() const { return m_spend; }
    StackedBarPlot *budgetPlot() const { return m_budgetPlot; }
    QTableWidget *budgetTable() const { return m_budgets; }
    QString totalsText() const;
    QString spendStatusText() const;

signals:
    void queryChanged();

private:
    QComboBox *m_groupBy = nullptr;
    QComboBox *m_range = nullptr;
    QLabel *m_totals = nullptr;
    QLabel *m_spendStatus = nullptr;
    StackedBarPlot *m_spend = nullptr;
    StackedBarPlot *m_budgetPlot = nullptr;
    QTableWidget *m_budgets = nullptr;
    QLabel *m_budgetStatus = nullptr;
};

} // namespace paddock::console
