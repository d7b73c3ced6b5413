#include "views/connection_dialog.h"

#include "views/theme.h"

#include <QDialogButtonBox>
#include <QPushButton>
#include <QDir>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRadioButton>
#include <QVBoxLayout>

#include <unistd.h>

namespace paddock::console {

namespace {
QString localSocketAddress()
{
    QString runtime = qEnvironmentVariable("XDG_RUNTIME_DIR");
    if (runtime.isEmpty())
        runtime = QDir::tempPath() + QStringLiteral("/paddock-") + QString::number(::getuid());
    return QStringLiteral("unix:") + runtime + QStringLiteral("/paddock/broker.sock");
}
} // namespace

QString ConnectionDialog::defaultAddress()
{
    const QString env = qEnvironmentVariable("PADDOCK_BROKER");
    return env.isEmpty() ? localSocketAddress() : env;
}

QString ConnectionDialog::validateAddress(const QString &address)
{
    const QString a = address.trimmed();
    if (a.isEmpty())
        return tr("Enter an address: unix:/path/to/broker.sock, /path/to/broker.sock or host:port.");
    if (a.startsWith(u"unix:")) {
        if (a.size() <= 5)
            return tr("The socket path is missing after \"unix:\".");
        return {};
    }
    if (a.startsWith(u'/'))
        return {};
    const qsizetype colon = a.lastIndexOf(u':');
    if (colon <= 0)
        return tr("\"%1\" has no port; write host:port, e.g. broker.example.com:7700.").arg(a);
    bool ok = false;
    const int port = a.mid(colon + 1).toInt(&ok);
    if (!ok || port <= 0 || port > 65535)
        return tr("\"%1\" is not a port number between 1 and 65535.").arg(a.mid(colon + 1));
    return {};
}

ConnectionDialog::ConnectionDialog(QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Connect to a broker"));
    setMinimumWidth(480);
    auto *layout = new QVBoxLayout(this);

    m_local = new QRadioButton(tr("&Local broker (this user's unix socket)"), this);
    m_localPath = new QLabel(localSocketAddress(), this);
    m_localPath->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_localPath->setContentsMargins(24, 0, 0, 6);
    Theme::setTextRole(m_localPath, TextRole::Muted);

    m_remote = new QRadioButton(tr("&Remote broker or another socket"), this);
    m_remoteAddress = new QLineEdit(this);
    m_remoteAddress->setPlaceholderText(tr("host:port, unix:/path or /path"));
    auto *remoteForm = new QFormLayout;
    remoteForm->setContentsMargins(24, 0, 0, 0);
    remoteForm->addRow(tr("Address:"), m_remoteAddress);

    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    Theme::setTextRole(m_error, TextRole::Error);
    m_error->setVisible(false);

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
    connect(buttons, &QDialogButtonBox::accepted, this, &ConnectionDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &ConnectionDialog::reject);

    layout->addWidget(m_local);
    layout->addWidget(m_localPath);
    layout->addWidget(m_remote);
    layout->addLayout(remoteForm);
    layout->addWidget(m_error);
    layout->addStretch();
    layout->addWidget(buttons);

    connect(m_local, &QRadioButton::toggled, this, &ConnectionDialog::updateState);
    connect(m_remoteAddress, &QLineEdit::textEdited, this, [this] {
        m_remote->setChecked(true);
        m_error->setVisible(false);
    });
    setAddress(defaultAddress());
}

void ConnectionDialog::setAddress(const QString &address)
{
    if (address.isEmpty() || address == localSocketAddress()) {
        m_local->setChecked(true);
        m_remoteAddress->clear();
    } else {
        m_remote->setChecked(true);
        m_remoteAddress->setText(address);
    }
    updateState();
}

QString ConnectionDialog::address() const
{
    return m_local->isChecked() ? localSocketAddress() : m_remoteAddress->text().trimmed();
}

void ConnectionDialog::updateState() { m_error->setVisible(false); }

void ConnectionDialog::accept()
{
    const QString problem = validateAddress(address());
    if (!problem.isEmpty()) {
        m_error->setText(problem);
        m_error->setVisible(true);
        return;
    }
    QDialog::accept();
}

} // namespace paddock::console
