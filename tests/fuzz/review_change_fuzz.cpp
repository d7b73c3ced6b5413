// The review queue's reading of a change (models/review_change.h): a diff, records or text that an
// agent submits for review. For any input, every function returns without crashing; a line's class
// matches its first characters, diffStat's counts are never negative and never more than the lines,
// a change that is not "records" comes back as it is, and records that yield rows read back as JSON.

#include "models/review_change.h"

#include <QJsonDocument>
#include <QString>

#include <cstddef>
#include <cstdint>

using namespace paddock::console;

namespace {

void checkLineClass(QStringView line)
{
    switch (classifyDiffLine(line)) {
    case DiffLine::FileHeader:
        if (!line.startsWith(u"+++") && !line.startsWith(u"---"))
            __builtin_trap();
        break;
    case DiffLine::Hunk:
        if (!line.startsWith(u"@@"))
            __builtin_trap();
        break;
    case DiffLine::Added:
        if (!line.startsWith(u'+'))
            __builtin_trap();
        break;
    case DiffLine::Removed:
        if (!line.startsWith(u'-'))
            __builtin_trap();
        break;
    case DiffLine::Meta:
    case DiffLine::Context:
        if (line.startsWith(u'+') || line.startsWith(u'-'))
            __builtin_trap();   // a line opening with + or - is always counted as a change or a header
        break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QString change = QString::fromUtf8(reinterpret_cast<const char *>(data), qsizetype(size));

    qsizetype lines = 0;
    for (const QStringView line : QStringView(change).tokenize(u'\n')) {
        ++lines;
        checkLineClass(line);
        const int risk = riskOrder(line.toString());
        if (risk < -1 || risk > 2)
            __builtin_trap();
    }

    const DiffStat stat = diffStat(change);
    if (stat.added < 0 || stat.removed < 0 || stat.files < 0)
        __builtin_trap();
    if (qsizetype(stat.added) + stat.removed + stat.files > lines)
        __builtin_trap();   // each line is at most one of added, removed or a new file's header

    for (const QString &format : {QStringLiteral("diff"), QStringLiteral("targets"), QStringLiteral("text"),
                                 QStringLiteral("fuzz-unknown")}) {
        if (readableChange(format, change) != change)
            __builtin_trap();   // documented: shown as it is
    }
    const QString readable = readableChange(QStringLiteral("records"), change);

    const auto rows = changeRecords(change);
    if (!rows.isEmpty()) {
        QJsonParseError error;
        QJsonDocument::fromJson(readable.toUtf8(), &error);
        if (error.error != QJsonParseError::NoError)
            __builtin_trap();   // records that give rows are pretty-printed as JSON
    }
    return 0;
}
