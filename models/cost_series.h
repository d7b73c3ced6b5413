#pragma once
// Cumulative cost of one session over time, for the cost plot: x = seconds since the Unix epoch
// (QCPAxisTickerDateTime's unit), y = dollars. A bounded rolling window of points; a dirty flag
// tells the plot when to replot.
//
// Threads: a plain value-like class; owned and used by one thread (the GUI thread in the console).

#include "models/console_types.h"

#include <QList>
#include <QPointF>

namespace paddock::console {

class CostSeries {
public:
    static constexpr int kDefaultMaxPoints = 1'000'000;

    // Adds a point at the first event seen and at each event that carries a cost.
    void addEvents(const QList<EventRecord> &events);
    void addEvent(const EventRecord &event);
    // Cost accrued before the first event this series sees (a trace opened mid-log).
    void setBaseline(qint64 micros);
    void clear();

    void setMaxPoints(int points);
    int maxPoints() const { return m_maxPoints; }

    const QList<double> &keys() const { return m_keys; }
    const QList<double> &values() const { return m_values; }
    QList<QPointF> points() const;
    int size() const { return static_cast<int>(m_keys.size()); }
    qint64 totalMicros() const { return m_totalMicros; }
    qint64 lastSeq() const { return m_lastSeq; }

    bool isDirty() const { return m_dirty; }
    void clearDirty() { m_dirty = false; }

private:
    void append(double key, double value);
    void trim();

    QList<double> m_keys;
    QList<double> m_values;
    qint64 m_baselineMicros = 0;
    qint64 m_totalMicros = 0;
    qint64 m_lastSeq = 0;
    int m_maxPoints = kDefaultMaxPoints;
    bool m_dirty = false;
};

} // namespace paddock::console
