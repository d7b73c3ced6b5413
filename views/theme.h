#pragma once
// Palettes and the colours the views use for statuses and event kinds.
//
// Threads: GUI thread only (it sets the application palette).
//
// Qt 6.4 has no QStyleHints::colorScheme(), so "System" means: the palette the platform gave the
// application at start-up, and "dark" is read from that palette's window lightness.

#include "models/console_types.h"

#include <QColor>
#include <QPalette>
#include <QString>

class QWidget;

namespace paddock::console {

enum class ThemeMode { System, Light, Dark };

QString themeModeName(ThemeMode mode);          // "system", "light", "dark" (as stored in settings)
ThemeMode themeModeFromName(const QString &name);

// A label's text colour that follows the theme: Theme::apply re-colours every widget given a role.
enum class TextRole { Normal, Muted, Error, Ok };

class Theme {
public:
    static void setTextRole(QWidget *widget, TextRole role);

    // Remembers the platform palette; call once after the QApplication exists, before apply().
    static void captureSystemPalette();
    static void apply(ThemeMode mode);
    static ThemeMode mode();
    static bool isDark();

    static QPalette lightPalette();
    static QPalette darkPalette();

    // Colours readable on the current palette's base colour.
    static QColor statusColor(SessionStatus status);
    static QColor kindColor(const QString &kind);
    static QColor errorColor();
    static QColor okColor();
    static QColor mutedTextColor();
};

} // namespace paddock::console
