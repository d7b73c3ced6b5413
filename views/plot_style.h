#pragma once
// How every console plot (QCustomPlot) takes the palette: background, axes, grid and legend in the
// theme's colours, and the one accent colour of a plot's main series.
//
// Threads: GUI thread only.

#include <QColor>
#include <QList>
#include <QPalette>

class QCustomPlot;
class QCPAxis;

namespace paddock::console {

// pal: the plot wrapper's palette (at a PaletteChange the wrapper has the new one before its
// children). The legend is coloured whether or not it is shown.
void colorPlot(QCustomPlot *plot, const QPalette &pal, const QList<QCPAxis *> &axes);
// The main series' colour (cost line, latency bars, memory curve), readable on the theme's base.
QColor plotAccentColor();
// The colour of the i-th series of a stacked or grouped plot (cost per agent, outcomes per tier):
// eight distinct hues readable on the theme's base, repeating after that.
QColor plotSeriesColor(int i);

} // namespace paddock::console
