#include "views/plot_style.h"

#include "views/theme.h"

#include <qcustomplot.h>

namespace paddock::console {

void colorPlot(QCustomPlot *plot, const QPalette &pal, const QList<QCPAxis *> &axes)
{
    const QColor fg = pal.color(QPalette::Text);
    const QColor grid = pal.color(QPalette::Mid);
    plot->setBackground(pal.color(QPalette::Base));
    for (QCPAxis *axis : axes) {
        axis->setBasePen(QPen(grid));
        axis->setTickPen(QPen(grid));
        axis->setSubTickPen(QPen(grid));
        axis->setTickLabelColor(fg);
        axis->setLabelColor(fg);
        axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
    }
    plot->legend->setBrush(pal.color(QPalette::Base));
    plot->legend->setTextColor(fg);
    plot->legend->setBorderPen(QPen(grid));
}

QColor plotAccentColor()
{
    return Theme::isDark() ? QColor(0x58, 0xa6, 0xff) : QColor(0x09, 0x69, 0xda);
}

} // namespace paddock::console
