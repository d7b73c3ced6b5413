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

QPalette Theme::lightPalette()
{
    QPalette p;
    p.setColor(QPalette::Window, QColor(0xf3, 0xf4, 0xf6));
    p.setColor(QPalette::WindowText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Base, QColor(0xff, 0xff, 0xff));
    p.setColor(QPalette::AlternateBase, QColor(0xf6, 0xf8, 0xfa));
    p.setColor(QPalette::ToolTipBase, QColor(0xff, 0xff, 0xe8));
    p.setColor(QPalette::ToolTipText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::PlaceholderText, QColor(0x8c, 0x95, 0x9f));
    p.setColor(QPalette::Text, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Button, QColor(0xea, 0xec, 0xef));
    p.setColor(QPalette::ButtonText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::BrightText, Qt::white);
    p.setColor(QPalette::Highlight, QColor(0x2f, 0x6f, 0xd6));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x09, 0x69, 0xda));
    p.setColor(QPalette::Mid, QColor(0xc8, 0xcd, 0xd3));
    p.setColor(QPalette::Midlight, QColor(0xe1, 0xe4, 0xe8));
    p.setColor(QPalette::Dark, QColor(0x9a, 0xa1, 0xa9));
    p.setColor(QPalette::Shadow, QColor(0x60, 0x66, 0x6d));
    p.setColor(QPalette::Light, Qt::white);
    for (auto role : {QPalette::Text, QPalette::WindowText, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x9a, 0xa1, 0xa9));
    return p;
}

QPalette Theme::darkPalette()
{
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x22, 0x25, 0x2b));
    p.setColor(QPalette::WindowText, QColor(0xdf, 0xe3, 0xe8));
    p.setColor(QPalette::Base, QColor(0x17, 0x19, 0x1d));
    p.setColor(QPalette::AlternateBase, QColor(0x1e, 0x21, 0x26));
    p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x34, 0x3b));
    p.setColor(QPalette::ToolTipText, QColor(0xdf, 0xe3, 0xe8));
    p.setColor(QPalette::PlaceholderText, QColor(0x7d, 0x85, 0x90));
    p.setColor(QPalette::Text, QColor(0xdf, 0xe3, 0xe8));
    p.setColor(QPalette::Button, QColor(0x2d, 0x31, 0x38));
    p.setColor(QPalette::ButtonText, QColor(0xdf, 0xe3, 0xe8));
    p.setColor(QPalette::BrightText, Qt::white);
    p.setColor(QPalette::Highlight, QColor(0x2f, 0x6f, 0xd6));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x58, 0xa6, 0xff));
    p.setColor(QPalette::Mid, QColor(0x3d, 0x42, 0x4a));
    p.setColor(QPalette::Midlight, QColor(0x35, 0x39, 0x40));
    p.setColor(QPalette::Dark, QColor(0x12, 0x14, 0x17));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Light, QColor(0x45, 0x4a, 0x52));
    for (auto role : {QPalette::Text, QPalette::WindowText, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x6e, 0x76, 0x81));
    return p;
}

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
