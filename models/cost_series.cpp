#include "models/cost_series.h"

namespace paddock::console {

void CostSeries::addEvents(const QList<EventRecord> &events)
{
    for (const EventRecord &event : events)
        addEvent(event);
    trim();
}

void CostSeries::addEvent(const EventRecord &event)
{
    // The same event twice (a re-follow overlapping what was seen) must not count twice.
    if (event.seq > 0 && event.seq <= m_lastSeq)
        return;
    const bool first = m_keys.isEmpty();
    m_lastSeq = qMax(m_lastSeq, event.seq);
    if (event.costMicros == 0 && !first)
        return;
    m_totalMicros += event.costMicros;
    append(static_cast<double>(event.timeUnixMs) / 1000.0, static_cast<double>(m_totalMicros) / 1e6);
    if (m_keys.size() > m_maxPoints + m_maxPoints / 8)
        trim();
}

void CostSeries::append(double key, double value)
{
    m_keys.append(key);
    m_values.append(value);
    m_dirty = true;
}

void CostSeries::trim()
{
    const qsizetype excess = m_keys.size() - m_maxPoints;
    if (excess <= 0)
        return;
    // Removing from the front of a Qt 6 QList moves its begin pointer, not the data.
    m_keys.remove(0, excess);
    m_values.remove(0, excess);
    m_dirty = true;
}

void CostSeries::setBaseline(qint64 micros)
{
    const qint64 delta = micros - m_baselineMicros;
    m_baselineMicros = micros;
    m_totalMicros += delta;
    const double shift = static_cast<double>(delta) / 1e6;
    for (double &value : m_values)
        value += shift;
    m_dirty = true;
}

void CostSeries::clear()
{
    m_keys.clear();
    m_values.clear();
    m_totalMicros = m_baselineMicros = 0;
    m_lastSeq = 0;
    m_dirty = true;
}

void CostSeries::setMaxPoints(int points)
{
    m_maxPoints = qMax(2, points);
    trim();
}

QList<QPointF> CostSeries::points() const
{
    QList<QPointF> out;
    out.reserve(m_keys.size());
    for (qsizetype i = 0; i < m_keys.size(); ++i)
        out.append(QPointF(m_keys.at(i), m_values.at(i)));
    return out;
}

} // namespace paddock::console
