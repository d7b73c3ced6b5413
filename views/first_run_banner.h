#pragma once
// The first-run offer at the top of the window: "No broker is running on this machine. [Start the
// broker] [Connect to another…]", then the progress of starting it and, if that fails, the problem,
// its fix and the log's last lines. Not modal: the rest of the window stays usable. The window
// decides when to show it and does the starting (app/broker_launcher.h); this only shows and asks.
//
// Threads: GUI thread only.

#include <QFrame>

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;

namespace paddock::console {

class FirstRunBanner : public QFrame {
    Q_OBJECT

public:
    enum class State { Hidden, Offer, Starting, Failed };

    explicit FirstRunBanner(QWidget *parent = nullptr);

    // text: what is wrong ("No broker is running on this machine."); explanation (muted, under it):
    // what Start would do. Start and Connect are offered.
    void showOffer(const QString &text, const QString &explanation = {});
    // Start is disabled while the broker starts; text says what is happening.
    void showProgress(const QString &text);
    // error: the problem and the fix; details (monospace, selectable): the log's last lines.
    // Start becomes "Try again".
    void showError(const QString &error, const QString &details);
    void dismiss();

    State state() const { return m_state; }
    QString text() const;
    QString explanation() const;
    QString details() const;
    QPushButton *startButton() const { return m_start; }
    QPushButton *connectButton() const { return m_connect; }

signals:
    void startRequested();
    void connectElsewhereRequested();

private:
    void setIcon(bool error);

    State m_state = State::Hidden;
    QLabel *m_icon = nullptr;
    QLabel *m_text = nullptr;
    QLabel *m_explanation = nullptr;
    QProgressBar *m_progress = nullptr;
    QPlainTextEdit *m_details = nullptr;
    QPushButton *m_start = nullptr;
    QPushButton *m_connect = nullptr;
};

} // namespace paddock::console
