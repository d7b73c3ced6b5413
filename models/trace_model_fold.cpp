// TraceModel's folding: which events a row shows besides its own (trace/fold.h decides by the
// times of the rows around them), the note and cost that says so, and the rows at the window's
// edges whose folded events change as events arrive or go.
//
// Threads: GUI thread only, like the rest of TraceModel.

#include "models/trace_model.h"

#include "trace/fold.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <optional>

namespace paddock::console {
namespace {

// Folded events looked at on either side of a row. A step appends a handful; this only bounds a
// log that is nothing but cost events for a while.
constexpr int kMaxFoldRun = 4096;
constexpr qsizetype kMaxFoldedRows = 20'000;

} // namespace

const TraceModel::Fold &TraceModel::foldOf(int row) const
{
    const qint64 seq = seqOfRow(row);
    const auto found = m_folds.constFind(seq);
    if (found != m_folds.constEnd())
        return *found;
    if (m_folds.size() >= kMaxFoldedRows)
        m_folds.clear();
    return *m_folds.insert(seq, computeFold(eventIndex(row)));
}

trace::CallEndScan TraceModel::callEndScanFrom(int from) const
{
    trace::CallEndScan scan;
    const int n = static_cast<int>(m_rows.size());
    size_t others = 0;
    for (int i = from; i < n && i - from <= kMaxFoldRun && others <= trace::kCallEndLookahead; ++i) {
        const trace::FoldRole role = roleAt(i);
        if (role == trace::FoldRole::CallEnd) {
            scan.start(static_cast<size_t>(i), others);
            return scan;
        }
        others += role == trace::FoldRole::Delta ? 0 : 1;
    }
    scan.start(std::nullopt, others);
    return scan;
}

TraceModel::Fold TraceModel::computeFold(int at) const
{
    const int n = static_cast<int>(m_rows.size());
    const Row &host = m_rows.at(static_cast<size_t>(at));
    const auto isDelta = [this](int i) { return roleAt(i) == trace::FoldRole::Delta; };
    std::vector<int> members;
    // Above: the run of folding events between the row before and this one; those of this row's
    // time (or with no row above) are this row's, and so is a streamed answer whose call this row
    // ends. Such an answer may lie behind a row or two the step appended first: the walk goes on
    // past the run for as long as what it passes still ends here.
    int before = at - 1;
    while (before >= 0 && at - before <= kMaxFoldRun && folds(m_rows.at(static_cast<size_t>(before))))
        --before;
    std::optional<int64_t> previousTime;
    if (before >= 0 && !folds(m_rows.at(static_cast<size_t>(before))))
        previousTime = m_rows.at(static_cast<size_t>(before)).timeMs;
    trace::CallEndScan scan = callEndScanFrom(at);
    for (int i = at - 1; i >= 0 && at - i <= kMaxFoldRun; --i) {
        const std::optional<size_t> end = isDelta(i) ? scan.endAfter() : std::nullopt;
        if (i > before) {
            if (end ? *end == static_cast<size_t>(at)
                    : trace::foldSide(previousTime, m_rows.at(static_cast<size_t>(i)).timeMs, host.timeMs)
                          == trace::FoldSide::Next)
                members.push_back(i);
        } else if (end == static_cast<size_t>(at)) {
            members.push_back(i);
        } else if (scan.endAfter() != static_cast<size_t>(at)) {
            break;   // nothing further up ends here
        }
        scan.pass(static_cast<size_t>(i), roleAt(i));
    }
    // Below: the run up to the next row; those not of that row's time, and no answer whose call
    // has ended, are this row's.
    int after = at + 1;
    while (after < n && after - at <= kMaxFoldRun && folds(m_rows.at(static_cast<size_t>(after))))
        ++after;
    std::optional<int64_t> nextTime;
    if (after < n && !folds(m_rows.at(static_cast<size_t>(after))))
        nextTime = m_rows.at(static_cast<size_t>(after)).timeMs;
    scan = callEndScanFrom(after);
    for (int i = after - 1; i > at; --i) {
        const bool answerEnded = isDelta(i) && scan.endAfter().has_value();
        if (!answerEnded && trace::foldSide(host.timeMs, m_rows.at(static_cast<size_t>(i)).timeMs, nextTime) == trace::FoldSide::Previous)
            members.push_back(i);
        scan.pass(static_cast<size_t>(i), roleAt(i));
    }
    std::sort(members.begin(), members.end());

    Fold fold;
    if (members.empty())
        return fold;
    std::vector<nlohmann::json> payloads(members.size());
    std::vector<trace::FoldedEvent> folded;
    std::vector<std::string> kinds(members.size());
    for (size_t m = 0; m < members.size(); ++m) {
        const Row &row = m_rows.at(static_cast<size_t>(members[m]));
        kinds[m] = m_kinds.at(row.kind).toStdString();
        // Only a checkpoint's figures and the text of output and of a streamed answer go into the
        // note; a cost's amount is the event's own.
        if (kinds[m] == "checkpoint" || kinds[m] == "tool.output" || kinds[m] == "model.delta")
            payloads[m] = nlohmann::json::parse(row.payload.constData(), row.payload.constData() + row.payload.size(), nullptr, false);
        folded.push_back({kinds[m], payloads[m].is_object() ? &payloads[m] : nullptr, row.costMicros});
        fold.costMicros += row.costMicros;
        fold.seqs.append(m_firstSeq + members[m]);
    }
    std::sort(fold.seqs.begin(), fold.seqs.end());
    fold.note = QString::fromStdString(trace::foldNote(folded));
    return fold;
}

qint64 TraceModel::hostSeq(qint64 seq) const
{
    const int at = static_cast<int>(seq - m_firstSeq);
    const int n = static_cast<int>(m_rows.size());
    if (!folds(m_rows.at(static_cast<size_t>(at))))
        return seq;
    if (roleAt(at) == trace::FoldRole::Delta) {
        if (const auto end = callEndScanFrom(at + 1).endAfter())
            return m_firstSeq + static_cast<qint64>(*end);
    }
    int before = at - 1;
    while (before >= 0 && at - before <= kMaxFoldRun && folds(m_rows.at(static_cast<size_t>(before))))
        --before;
    int after = at + 1;
    while (after < n && after - at <= kMaxFoldRun && folds(m_rows.at(static_cast<size_t>(after))))
        ++after;
    const bool hasBefore = before >= 0 && !folds(m_rows.at(static_cast<size_t>(before)));
    const bool hasAfter = after < n && !folds(m_rows.at(static_cast<size_t>(after)));
    if (!hasBefore && !hasAfter)
        return 0;
    std::optional<int64_t> previousTime;
    std::optional<int64_t> nextTime;
    if (hasBefore)
        previousTime = m_rows.at(static_cast<size_t>(before)).timeMs;
    if (hasAfter)
        nextTime = m_rows.at(static_cast<size_t>(after)).timeMs;
    const trace::FoldSide side = trace::foldSide(previousTime, m_rows.at(static_cast<size_t>(at)).timeMs, nextTime);
    return m_firstSeq + (side == trace::FoldSide::Previous ? before : after);
}

void TraceModel::refoldCallOf(int at)
{
    // The deltas that now end here were shown by time in the rows around them: every row from the
    // one before the first of them down to here.
    trace::CallEndScan scan;
    scan.start(static_cast<size_t>(at), 0);
    int first = at;
    for (int i = at - 1; i >= 0 && at - i <= kMaxFoldRun && scan.endAfter() == static_cast<size_t>(at); --i) {
        if (roleAt(i) == trace::FoldRole::Delta)
            first = i;
        scan.pass(static_cast<size_t>(i), roleAt(i));
    }
    if (first == at)
        return;
    const auto from = std::lower_bound(m_ownRows.begin(), m_ownRows.end(), m_firstSeq + first);
    for (auto it = from == m_ownRows.begin() ? from : std::prev(from); it != m_ownRows.end() && *it < m_firstSeq + at; ++it)
        refoldSeq(*it);
}

void TraceModel::refoldSeq(qint64 seq)
{
    m_folds.remove(seq);
    if (!m_foldBookkeeping)
        return;
    const auto found = std::lower_bound(m_ownRows.begin(), m_ownRows.end(), seq);
    if (found == m_ownRows.end() || *found != seq)
        return;
    const int row = static_cast<int>(found - m_ownRows.begin());
    emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

} // namespace paddock::console
