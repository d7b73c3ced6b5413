#pragma once
// How the review queue reads a review item's change and a selection of items: the line classes of a
// unified diff (for highlighting), a record list made readable, risk ordering and the text of the
// confirmation a bulk decision asks for.
//
// Threads: pure functions; call from anywhere.

#include "models/governance_types.h"

#include <QStringView>

namespace paddock::console {

enum class DiffLine { Context, Added, Removed, Hunk, FileHeader, Meta };

// "+x" added, "-x" removed, "@@ ... @@" hunk, "+++ "/"--- " file headers, "diff "/"index "/"\ No
// newline" meta, anything else context.
DiffLine classifyDiffLine(QStringView line);

// Counts of added and removed lines in a unified diff (file headers excluded).
struct DiffStat {
    int added = 0;
    int removed = 0;
    int files = 0;
};
DiffStat diffStat(QStringView diff);

// The change as a person reads it: records (a JSON array or object, or JSON lines) pretty-printed;
// a diff, a target list or text as they are.
QString readableChange(const QString &format, const QString &change);

// The records of a "records" change as rows of (key, value): a JSON object's members, or an array
// of objects with a "key" (else its index) and the rest as compact JSON. Empty when the change is
// not JSON.
QList<QPair<QString, QString>> changeRecords(const QString &change);

// low 0, medium 1, high 2, anything else -1.
int riskOrder(const QString &risk);

// Whether a decision needs a reason: always to reject, and to approve a high-risk item.
bool reasonRequired(bool approve, const QList<ReviewItemInfo> &items);

// Why the items cannot be decided together (empty when they can): nothing selected, items of more
// than one kind, or items no longer pending.
QString bulkProblem(const QList<ReviewItemInfo> &items);

// The confirmation of a decision over items, e.g. "Reject 3 review items?" and lines with the kinds,
// risks, requesters, sessions and the total cost.
QString decisionSummary(bool approve, const QList<ReviewItemInfo> &items);

// "bulk change", "tier escalation", ... for people.
QString reviewKindLabel(const QString &kind);

} // namespace paddock::console
