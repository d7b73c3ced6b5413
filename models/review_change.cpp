#include "models/review_change.h"

#include "models/console_format.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QSet>

namespace paddock::console {

DiffLine classifyDiffLine(QStringView line)
{
    if (line.startsWith(u"+++ ") || line.startsWith(u"--- ") || line == u"+++" || line == u"---")
        return DiffLine::FileHeader;
    if (line.startsWith(u"@@"))
        return DiffLine::Hunk;
    if (line.startsWith(u'+'))
        return DiffLine::Added;
    if (line.startsWith(u'-'))
        return DiffLine::Removed;
    if (line.startsWith(u"diff ") || line.startsWith(u"index ") || line.startsWith(u"\\ ")
        || line.startsWith(u"new file mode") || line.startsWith(u"deleted file mode"))
        return DiffLine::Meta;
    return DiffLine::Context;
}

DiffStat diffStat(QStringView diff)
{
    DiffStat stat;
    for (const QStringView line : diff.tokenize(u'\n')) {
        const DiffLine kind = classifyDiffLine(line);
        if (kind == DiffLine::Added)
            ++stat.added;
        else if (kind == DiffLine::Removed)
            ++stat.removed;
        else if (kind == DiffLine::FileHeader && line.startsWith(u"+++"))
            ++stat.files;
    }
    return stat;
}

namespace {

// A JSON document, or JSON lines gathered into an array; null when neither.
QJsonDocument parseRecords(const QString &change)
{
    const QByteArray utf8 = change.trimmed().toUtf8();
    QJsonParseError error;
    QJsonDocument doc = QJsonDocument::fromJson(utf8, &error);
    if (error.error == QJsonParseError::NoError)
        return doc;
    QJsonArray lines;
    for (const QByteArray &line : utf8.split('\n')) {
        if (line.trimmed().isEmpty())
            continue;
        const QJsonDocument one = QJsonDocument::fromJson(line, &error);
        if (error.error != QJsonParseError::NoError || !one.isObject())
            return {};
        lines.append(one.object());
    }
    return lines.isEmpty() ? QJsonDocument() : QJsonDocument(lines);
}

QString compact(const QJsonValue &value)
{
    if (value.isString())
        return value.toString();
    if (value.isObject())
        return QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
    if (value.isArray())
        return QString::fromUtf8(QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact));
    return QString::fromUtf8(QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact)).mid(1).chopped(1);
}

} // namespace

QString readableChange(const QString &format, const QString &change)
{
    if (format != u"records")
        return change;
    const QJsonDocument doc = parseRecords(change);
    if (doc.isNull())
        return change;
    return QString::fromUtf8(doc.toJson(QJsonDocument::Indented));
}

QList<QPair<QString, QString>> changeRecords(const QString &change)
{
    QList<QPair<QString, QString>> rows;
    const QJsonDocument doc = parseRecords(change);
    if (doc.isObject()) {
        const QJsonObject object = doc.object();
        for (auto it = object.begin(); it != object.end(); ++it)
            rows.append({it.key(), compact(it.value())});
    } else if (doc.isArray()) {
        const QJsonArray array = doc.array();
        for (qsizetype i = 0; i < array.size(); ++i) {
            QJsonValue value = array.at(i);
            QString key = QString::number(i);
            if (value.isObject() && value.toObject().contains(u"key")) {
                QJsonObject object = value.toObject();
                key = compact(object.take(u"key"));
                value = object.size() == 1 && object.contains(u"value") ? object.value(u"value") : QJsonValue(object);
            }
            rows.append({key, compact(value)});
        }
    }
    return rows;
}

int riskOrder(const QString &risk)
{
    if (risk == u"low")
        return 0;
    if (risk == u"medium")
        return 1;
    if (risk == u"high")
        return 2;
    return -1;
}

bool reasonRequired(bool approve, const QList<ReviewItemInfo> &items)
{
    if (!approve)
        return true;
    for (const ReviewItemInfo &item : items) {
        if (item.risk == u"high")
            return true;
    }
    return false;
}

QString reviewKindLabel(const QString &kind)
{
    QString label = kind;
    label.replace(u'_', u' ');
    return label;
}

QString bulkProblem(const QList<ReviewItemInfo> &items)
{
    if (items.isEmpty())
        return QStringLiteral("select a review item first");
    QSet<QString> kinds;
    for (const ReviewItemInfo &item : items) {
        kinds.insert(item.kind);
        if (!item.state.isEmpty() && item.state != u"pending")
            return QStringLiteral("%1 is already %2").arg(item.id, item.state);
    }
    if (kinds.size() > 1)
        return QStringLiteral("the selection mixes kinds (%1): decide items of one kind at a time")
            .arg(QStringList(kinds.begin(), kinds.end()).join(QStringLiteral(", ")));
    return {};
}

namespace {

// "2 × alice, 1 × bob", most frequent first, then by name.
QString tally(const QList<ReviewItemInfo> &items, QString ReviewItemInfo::*field, const QString &empty)
{
    QMap<QString, int> counts;
    for (const ReviewItemInfo &item : items)
        ++counts[(item.*field).isEmpty() ? empty : item.*field];
    QList<QPair<int, QString>> sorted;
    for (auto it = counts.cbegin(); it != counts.cend(); ++it)
        sorted.append({-it.value(), it.key()});
    std::sort(sorted.begin(), sorted.end());
    QStringList parts;
    for (const auto &[negCount, name] : sorted)
        parts << QStringLiteral("%1 × %2").arg(-negCount).arg(name);
    return parts.join(QStringLiteral(", "));
}

} // namespace

QString decisionSummary(bool approve, const QList<ReviewItemInfo> &items)
{
    const int n = int(items.size());
    qint64 cost = 0;
    int targets = 0;
    QSet<QString> sessions;
    for (const ReviewItemInfo &item : items) {
        cost += item.costMicros;
        targets += item.targetCount;
        sessions.insert(item.sessionId);
    }
    QStringList lines;
    lines << (n == 1 ? QStringLiteral("%1 1 review item?").arg(approve ? QStringLiteral("Approve") : QStringLiteral("Reject"))
                     : QStringLiteral("%1 %2 review items?").arg(approve ? QStringLiteral("Approve") : QStringLiteral("Reject")).arg(n));
    lines << QStringLiteral("Kinds: %1").arg(tally(items, &ReviewItemInfo::kind, QStringLiteral("unknown")));
    lines << QStringLiteral("Risks: %1").arg(tally(items, &ReviewItemInfo::risk, QStringLiteral("unrated")));
    lines << QStringLiteral("Requesters: %1").arg(tally(items, &ReviewItemInfo::requester, QStringLiteral("unknown")));
    lines << QStringLiteral("Sessions: %1").arg(sessions.size());
    if (targets > 0)
        lines << QStringLiteral("Targets: %1").arg(targets);
    lines << QStringLiteral("Total cost: %1").arg(formatCost(cost));
    lines << (approve ? QStringLiteral("Each change is applied and its session resumes at that step.")
                      : QStringLiteral("Each session resumes with the rejection as its tool's result."));
    lines << QStringLiteral("All are decided, or none.");
    return lines.join(u'\n');
}

} // namespace paddock::console
