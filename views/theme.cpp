#include "views/theme.h"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>
#include <QWidget>

namespace paddock::console {

namespace {
QPalette g_systemPalette;
bool g_captured = false;
ThemeMode g_mode = ThemeMode::System;
bool g_dark = false;

bool paletteIsDark(const QPalette &palette)
{
    return palette.color(QPalette::Window).lightness() < palette.color(QPalette::WindowText).lightness();
}
} // namespace

namespace {
const char *const kTextRoleProperty = "paddockTextRole";

void applyTextRole(QWidget *widget, TextRole role)
{
    if (role == TextRole::Normal) {
        widget->setPalette(QPalette());   // inherit again
        return;
    }
    QPalette pal = widget->palette();
    const QColor color = role == TextRole::Muted ? Theme::mutedTextColor()
                         : role == TextRole::Error ? Theme::errorColor()
                                                   : Theme::okColor();
    pal.setColor(QPalette::WindowText, color);
    pal.setColor(QPalette::Text, color);
    widget->setPalette(pal);
}

// Our two palettes side by side: each role's colour (0xRRGGBB) in the light and in the dark theme.
struct RoleColors {
    QPalette::ColorRole role;
    QRgb light;
    QRgb dark;
};
constexpr RoleColors kRoleColors[] = {
    {QPalette::Window, 0xf3f4f6, 0x22252b},
    {QPalette::WindowText, 0x1f2328, 0xdfe3e8},
    {QPalette::Base, 0xffffff, 0x17191d},
    {QPalette::AlternateBase, 0xf6f8fa, 0x1e2126},
    {QPalette::ToolTipBase, 0xffffe8, 0x30343b},
    {QPalette::ToolTipText, 0x1f2328, 0xdfe3e8},
    {QPalette::PlaceholderText, 0x8c959f, 0x7d8590},
    {QPalette::Text, 0x1f2328, 0xdfe3e8},
    {QPalette::Button, 0xeaecef, 0x2d3138},
    {QPalette::ButtonText, 0x1f2328, 0xdfe3e8},
    {QPalette::BrightText, 0xffffff, 0xffffff},
    {QPalette::Highlight, 0x2f6fd6, 0x2f6fd6},
    {QPalette::HighlightedText, 0xffffff, 0xffffff},
    {QPalette::Link, 0x0969da, 0x58a6ff},
    {QPalette::Mid, 0xc8cdd3, 0x3d424a},
    {QPalette::Midlight, 0xe1e4e8, 0x353940},
    {QPalette::Dark, 0x9aa1a9, 0x121417},
    {QPalette::Shadow, 0x60666d, 0x000000},
    {QPalette::Light, 0xffffff, 0x454a52},
};
// Text, WindowText and ButtonText of disabled widgets.
constexpr QRgb kDisabledTextLight = 0x9aa1a9;
constexpr QRgb kDisabledTextDark = 0x6e7681;

QPalette themePalette(bool dark)
{
    QPalette p;
    for (const RoleColors &colors : kRoleColors)
        p.setColor(colors.role, QColor(dark ? colors.dark : colors.light));
    for (auto role : {QPalette::Text, QPalette::WindowText, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(dark ? kDisabledTextDark : kDisabledTextLight));
    return p;
}
} // namespace

QString themeModeName(ThemeMode mode)
{
    switch (mode) {
    case ThemeMode::Light: return QStringLiteral("light");
    case ThemeMode::Dark: return QStringLiteral("dark");
    case ThemeMode::System: break;
    }
    return QStringLiteral("system");
}

ThemeMode themeModeFromName(const QString &name)
{
    if (name == u"light")
        return ThemeMode::Light;
    if (name == u"dark")
        return ThemeMode::Dark;
    return ThemeMode::System;
}

void Theme::captureSystemPalette()
{
    // Once a palette of ours is set, QApplication::palette() returns it; a default-constructed
    // palette resolves to the platform's again, which is the one wanted.
    if (g_captured)
        QApplication::setPalette(QPalette());
    g_systemPalette = QApplication::palette();
    g_captured = true;
}

QPalette Theme::lightPalette() { return themePalette(false); }
QPalette Theme::darkPalette() { return themePalette(true); }

void Theme::apply(ThemeMode mode)
{
    if (!g_captured)
        captureSystemPalette();
    g_mode = mode;
    // Fusion draws every palette role the same way on every platform, so both palettes read well.
    if (QApplication::style()->name().compare(u"fusion", Qt::CaseInsensitive) != 0)
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    switch (mode) {
    case ThemeMode::System:
        // The platform palette when it is dark; our light palette otherwise, since the default
        // Fusion light palette has low-contrast greys for table headers.
        g_dark = paletteIsDark(g_systemPalette);
        QApplication::setPalette(g_dark ? g_systemPalette : lightPalette());
        break;
    case ThemeMode::Light:
        g_dark = false;
        QApplication::setPalette(lightPalette());
        break;
    case ThemeMode::Dark:
        g_dark = true;
        QApplication::setPalette(darkPalette());
        break;
    }
    // Widgets with their own text colour keep it through an application palette change; give
    // them the new theme's.
    const QWidgetList widgets = QApplication::allWidgets();
    for (QWidget *widget : widgets) {
        const QVariant role = widget->property(kTextRoleProperty);
        if (role.isValid())
            applyTextRole(widget, TextRole(role.toInt()));
    }
}


void Theme::setTextRole(QWidget *widget, TextRole role)
{
    widget->setProperty(kTextRoleProperty, int(role));
    applyTextRole(widget, role);
}

ThemeMode Theme::mode() { return g_mode; }
bool Theme::isDark() { return g_dark; }

QColor Theme::statusColor(SessionStatus status)
{
    const bool dark = g_dark;
    switch (status) {
    case SessionStatus::Queued: return dark ? QColor(0x9a, 0xa4, 0xb0) : QColor(0x6a, 0x73, 0x7d);
    case SessionStatus::Running: return dark ? QColor(0x58, 0xa6, 0xff) : QColor(0x09, 0x69, 0xda);
    case SessionStatus::WaitingApproval: return dark ? QColor(0xd2, 0x99, 0x22) : QColor(0xbf, 0x87, 0x00);
    case SessionStatus::Paused: return dark ? QColor(0xbc, 0x8c, 0xff) : QColor(0x82, 0x50, 0xdf);
    case SessionStatus::Succeeded: return dark ? QColor(0x3f, 0xb9, 0x50) : QColor(0x1a, 0x7f, 0x37);
    case SessionStatus::Failed: return dark ? QColor(0xf8, 0x51, 0x49) : QColor(0xcf, 0x22, 0x2e);
    case SessionStatus::Cancelled: return dark ? QColor(0x8b, 0x94, 0x9e) : QColor(0x57, 0x60, 0x6a);
    case SessionStatus::Unknown: break;
    }
    return mutedTextColor();
}

QColor Theme::kindColor(const QString &kind)
{
    const bool dark = g_dark;
    if (kind.startsWith(u"model."))
        return kind == u"model.error" ? errorColor() : (dark ? QColor(0xbc, 0x8c, 0xff) : QColor(0x82, 0x50, 0xdf));
    if (kind == u"tool.call")
        return dark ? QColor(0x58, 0xa6, 0xff) : QColor(0x09, 0x69, 0xda);
    if (kind == u"tool.result")
        return dark ? QColor(0x39, 0xc5, 0xcf) : QColor(0x1b, 0x7c, 0x83);
    if (kind == u"sandbox.failed")
        return errorColor();
    if (kind.startsWith(u"sandbox."))
        return dark ? QColor(0xd2, 0x99, 0x22) : QColor(0x9a, 0x67, 0x00);
    if (kind.startsWith(u"approval."))
        return dark ? QColor(0xdb, 0x61, 0xa2) : QColor(0xbf, 0x39, 0x89);
    if (kind == u"state.changed" || kind == u"session.created")
        return dark ? QColor(0x3f, 0xb9, 0x50) : QColor(0x1a, 0x7f, 0x37);
    return mutedTextColor();
}

QColor Theme::errorColor() { return g_dark ? QColor(0xf8, 0x51, 0x49) : QColor(0xcf, 0x22, 0x2e); }
QColor Theme::okColor() { return g_dark ? QColor(0x3f, 0xb9, 0x50) : QColor(0x1a, 0x7f, 0x37); }
QColor Theme::mutedTextColor() { return g_dark ? QColor(0x8b, 0x94, 0x9e) : QColor(0x65, 0x6d, 0x76); }

} // namespace paddock::console
