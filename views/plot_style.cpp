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

QColor plotSeriesColor(int i)
{
    static const QRgb light[] = {0x0969da, 0xbf8700, 0x1a7f37, 0xcf222e, 0x8250df, 0x1b7c83, 0xbc4c00, 0x6e7781};
    static const QRgb dark[] = {0x58a6ff, 0xd29922, 0x3fb950, 0xf85149, 0xbc8cff, 0x39c5cf, 0xf0883e, 0x8b949e};
    const int n = int(std::size(light));
    const int k = ((i % n) + n) % n;
    return QColor(Theme::isDark() ? dark[k] : light[k]);
}

} // namespace paddock::console
