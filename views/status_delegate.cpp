#include "views/status_delegate.h"

#include "views/theme.h"

#include <QApplication>
#include <QPainter>

namespace paddock::console {

StatusDelegate::StatusDelegate(int statusRole, int staleRole, QObject *parent)
    : QStyledItemDelegate(parent)
    , m_statusRole(statusRole)
    , m_staleRole(staleRole)
{
}

void StatusDelegate::paint(QPainter *painter, const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QVariant statusValue = index.data(m_statusRole);
    const bool stale = m_staleRole >= 0 && index.data(m_staleRole).toBool();
    if (stale)
        opt.palette.setColor(QPalette::Text, Theme::mutedTextColor());
    if (!statusValue.isValid()) {
        QStyledItemDelegate::paint(painter, opt, index);
        return;
    }
    // Background and focus from the style, then our dot and text on top.
    const QString text = opt.text;
    opt.text.clear();
    QStyle *style = opt.widget ? opt.widget->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, opt.widget);

    const auto status = SessionStatus(statusValue.toInt());
    QColor color = Theme::statusColor(status);
    if (stale)
        color = Theme::mutedTextColor();
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    const QRect r = opt.rect.adjusted(6, 0, -4, 0);
    const int dot = qMin(10, r.height() - 6);
    const QRectF dotRect(r.left(), r.center().y() - dot / 2.0 + 0.5, dot, dot);
    painter->setPen(Qt::NoPen);
    painter->setBrush(color);
    painter->drawEllipse(dotRect);
    const bool selected = opt.state & QStyle::State_Selected;
    painter->setPen(selected ? opt.palette.color(QPalette::HighlightedText) : color);
    QFont font = opt.font;
    font.setWeight(QFont::DemiBold);
    painter->setFont(font);
    const QRect textRect = r.adjusted(dot + 6, 0, 0, 0);
    painter->drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                      opt.fontMetrics.elidedText(text, Qt::ElideRight, textRect.width()));
    painter->restore();
}

QSize StatusDelegate::sizeHint(const QStyleOptionViewItem &option, const QModelIndex &index) const
{
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    size.rwidth() += 20;
    size.setHeight(qMax(size.height(), option.fontMetrics.height()) + 8);
    return size;
}

} // namespace paddock::console
