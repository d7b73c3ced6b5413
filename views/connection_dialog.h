#pragma once
// Choose the broker: the local broker's unix socket (the default) or a remote address.
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
    // Empty when address is usable; otherwise what is wrong with it, for people.
    static QString validateAddress(const QString &address);

    void setAddress(const QString &address);
    QString address() const;

public slots:
    void accept() override;

private:
    void updateState();

    QRadioButton *m_local = nullptr;
    QRadioButton *m_remote = nullptr;
    QLabel *m_localPath = nullptr;
    QLineEdit *m_remoteAddress = nullptr;
    QLabel *m_error = nullptr;
};

} // namespace paddock::console
