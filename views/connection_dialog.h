#pragma once
// Choose the broker: the local broker's unix socket (the default) or a remote address, or several
// remote brokers of one team separated by commas (remembered as typed). A host:port broker is
// reached over TLS: the CA file that signed its certificate (empty: the system's CAs) and
// a bearer token, from a file (remembered) or typed (kept for this run only, never saved).
//
// Threads: GUI thread only.

#include <QDialog>

class QLabel;
class QLineEdit;
class QRadioButton;

namespace paddock::console {

class ConnectionDialog : public QDialog {
    Q_OBJECT

public:
    explicit ConnectionDialog(QWidget *parent = nullptr);

    // $PADDOCK_BROKER, else unix:$XDG_RUNTIME_DIR/paddock/broker.sock (as paddockctl does).
    static QString defaultAddress();
    // Empty when address (or each entry of a comma-separated list) is usable; otherwise what is
    // wrong with it, for people.
    static QString validateAddress(const QString &address);

    void setAddress(const QString &address);
    QString address() const;
    void setTlsCaFile(const QString &path);
    QString tlsCaFile() const;
    void setTokenFile(const QString &path);
    QString tokenFile() const;
    QString typedToken() const;

    // Reads the CA and the token (the typed one wins over the file); empty error when they are
    // usable. For host:port addresses only; a unix socket needs neither.
    struct Credentials {
        QString tlsCaPem;
        QString token;
        QString error;
    };
    static Credentials readCredentials(const QString &address, const QString &tlsCaFile, const QString &tokenFile,
                                       const QString &typedToken);

public slots:
    void accept() override;

private:
    void updateState();

    QRadioButton *m_local = nullptr;
    QRadioButton *m_remote = nullptr;
    QLabel *m_localPath = nullptr;
    QLineEdit *m_remoteAddress = nullptr;
    QLineEdit *m_tlsCaFile = nullptr;
    QLineEdit *m_tokenFile = nullptr;
    QLineEdit *m_token = nullptr;
    QLabel *m_error = nullptr;
};

} // namespace paddock::console
