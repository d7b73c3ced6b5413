// paddock: the console. Thin: parse the command line, build the client and the window, run.
//   paddock [--broker ADDR] [--screenshots DIR] [--theme system|light|dark]

#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "app/screenshot_runner.h"
#include "views/theme.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>

#include <memory>

using namespace paddock::console;

int main(int argc, char **argv)
{
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Paddock"));
    QApplication::setApplicationName(QStringLiteral("paddock"));
    QApplication::setApplicationDisplayName(QStringLiteral("Paddock"));
    QApplication::setApplicationVersion(QStringLiteral(PADDOCK_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("dev.paddock.Paddock"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Paddock: a console for fleets of AI agents."));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption brokerOption(
        QStringLiteral("broker"),
        QStringLiteral("Broker address: unix:/path, /path or host:port, or a team's brokers separated by commas "
                       "(default: $PADDOCK_BROKER, else the last one used, else the local socket)."),
        QStringLiteral("ADDR"));
    const QCommandLineOption screenshotsOption(
        QStringLiteral("screenshots"),
        QStringLiteral("Open each view, wait for its data, save a 1280x800 PNG of it into DIR and exit."),
        QStringLiteral("DIR"));
    const QCommandLineOption themeOption(QStringLiteral("theme"), QStringLiteral("system, light or dark."),
                                         QStringLiteral("THEME"));
    parser.addOption(brokerOption);
    parser.addOption(screenshotsOption);
    parser.addOption(themeOption);
    parser.process(app);

    const bool screenshots = parser.isSet(screenshotsOption);
    Theme::captureSystemPalette();
    Theme::apply(themeModeFromName(parser.value(themeOption)));

    GrpcConsoleClient client;
    MainWindow::Options options;
    // A scripted run must neither read the user's layout nor overwrite it.
    options.persistSettings = !screenshots;
    MainWindow window(&client, options);
    if (parser.isSet(themeOption))
        Theme::apply(themeModeFromName(parser.value(themeOption)));
    QString broker = parser.value(brokerOption);
    if (broker.isEmpty())
        broker = qEnvironmentVariable("PADDOCK_BROKER");
    window.connectToBroker(broker);

    std::unique_ptr<ScreenshotRunner> runner;
    if (screenshots) {
        runner = std::make_unique<ScreenshotRunner>(&window, parser.value(screenshotsOption));
        QObject::connect(runner.get(), &ScreenshotRunner::finished, &app, [](int code) { QApplication::exit(code); });
        runner->start();
    } else {
        window.show();
    }
    return QApplication::exec();
}
