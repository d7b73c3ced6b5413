#pragma once
// Environment decisions: every tier choice with its chooser, rule, reason and outcome, filtered by
// agent, chooser, tier and outcome; rows whose tier was too big or too small are tinted and name the
// tier that would have fitted. Two stacked-bar charts: outcomes by tier and by chooser. "Override
// tier…" on a decision's session.
//
// Threads: GUI thread only. No I/O: filter changes and override requests go out as signals; the
// window answers through the model, setStats() and setStatus().

#include "models/governance_types.h"

#include <QWidget>

class QComboBox;
class QIdentityProxyModel;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace paddock::console {

class DecisionTableModel;
class StackedBarPlot;

class DecisionsView : public QWidget {
    Q_OBJECT

public:
    explicit DecisionsView(QWidget *parent = nullptr);

    void setModel(DecisionTableModel *model);
    // groupBy "tier" or "chooser".
    void setStats(const QString &groupBy, const QList<DecisionStatsLineInfo> &lines);
    void setStatus(const QString &text, bool problem);
    void setTiers(const QStringList &tiers);
    // Whether Override tier… may be offered, and why not.
    void setOverrideAllowed(bool allowed, const QString &reason);

    DecisionFilter filter() const;
    QString selectedSessionId() const;

    QTableView *tableView() const { return m_table; }
    QComboBox *chooserFilter() const { return m_chooser; }
    QComboBox *outcomeFilter() const { return m_outcome; }
    QLineEdit *agentFilter() const { return m_agent; }
    QPushButton *overrideButton() const { return m_override; }
    StackedBarPlot *byTierPlot() const { return m_byTier; }
    StackedBarPlot *byChooserPlot() const { return m_byChooser; }
    QString statusText() const;

signals:
    void filterChanged(const paddock::console::DecisionFilter &filter);
    void overrideRequested(const QString &sessionId);
    void openSessionRequested(const QString &sessionId);

private:
    void updateOverride();

    DecisionTableModel *m_model = nullptr;
    QIdentityProxyModel *m_tint = nullptr;
    QLineEdit *m_agent = nullptr;
    QComboBox *m_chooser = nullptr;
    QComboBox *m_tier = nullptr;
    QComboBox *m_outcome = nullptr;
    QPushButton *m_override = nullptr;
    QLabel *m_status = nullptr;
    QTableView *m_table = nullptr;
    StackedBarPlot *m_byTier = nullptr;
    StackedBarPlot *m_byChooser = nullptr;
    bool m_overrideAllowed = true;
    QString m_overrideWhyNot;
};

// The outcome series of a stats chart, in stacking order, with their colours (ok green, over
// yellow, under orange, oom/timeout red, pending grey). Exposed for the Cost and screenshot code.
QList<QPair<QString, QColor>> decisionOutcomeSeries();

} // namespace paddock::console
