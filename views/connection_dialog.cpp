#include "views/connection_dialog.h"

#include "views/theme.h"

#include <QDialogButtonBox>
#include <QPushButton>
#include <QDir>
#include <QFile>
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
    const QString all = address.trimmed();
    if (all.isEmpty())
        return tr("Enter an address: unix:/path/to/broker.sock, /path/to/broker.sock or host:port.");
    if (all.contains(u',')) {
        // Several brokers of one team: each entry must be an address of its own.
        const QStringList entries = all.split(u',');
        for (qsizetype i = 0; i < entries.size(); ++i) {
            if (entries[i].trimmed().isEmpty())
                return tr("Broker %1 of the list is empty; separate the brokers with single commas, e.g. "
                          "a.example.com:7443,b.example.com:7443.").arg(i + 1);
            if (const QString problem = validateAddress(entries[i]); !problem.isEmpty())
                return tr("Broker %1 of the list: %2").arg(i + 1).arg(problem);
        }
        return {};
    }
    const QString a = all;
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
    m_remoteAddress->setPlaceholderText(tr("host:port, unix:/path or /path; a team's brokers: a:7443,b:7443"));
    m_remoteAddress->setToolTip(tr("Several brokers sharing one store, separated by commas: the console uses the "
                                   "first that answers and moves to the next when it stops answering."));
    auto *remoteForm = new QFormLayout;
    remoteForm->setContentsMargins(24, 0, 0, 0);
    remoteForm->addRow(tr("Address:"), m_remoteAddress);
    m_tlsCaFile = new QLineEdit(this);
    m_tlsCaFile->setObjectName(QStringLiteral("tlsCaFile"));
    m_tlsCaFile->setPlaceholderText(tr("CA certificate (PEM) of a host:port broker; empty: the system's"));
    remoteForm->addRow(tr("TLS &CA file:"), m_tlsCaFile);
    m_tokenFile = new QLineEdit(this);
    m_tokenFile->setObjectName(QStringLiteral("tokenFile"));
    m_tokenFile->setPlaceholderText(tr("file holding your token (paddockctl tokens create)"));
    remoteForm->addRow(tr("Token &file:"), m_tokenFile);
    m_token = new QLineEdit(this);
    m_token->setObjectName(QStringLiteral("token"));
    m_token->setEchoMode(QLineEdit::Password);
    m_token->setPlaceholderText(tr("or type the token (not saved)"));
    remoteForm->addRow(tr("&Token:"), m_token);

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

void ConnectionDialog::setTlsCaFile(const QString &path) { m_tlsCaFile->setText(path); }
QString ConnectionDialog::tlsCaFile() const { return m_tlsCaFile->text().trimmed(); }
void ConnectionDialog::setTokenFile(const QString &path) { m_tokenFile->setText(path); }
QString ConnectionDialog::tokenFile() const { return m_tokenFile->text().trimmed(); }
QString ConnectionDialog::typedToken() const { return m_token->text().trimmed(); }

ConnectionDialog::Credentials ConnectionDialog::readCredentials(const QString &address, const QString &tlsCaFile,
                                                                const QString &tokenFile, const QString &typedToken)
{
    Credentials out;
    // Only a host:port broker needs them; a list needs them when any of its brokers is one.
    bool anyTcp = false;
    for (const QString &entry : address.split(u',', Qt::SkipEmptyParts)) {
        const QString a = entry.trimmed();
        if (!a.isEmpty() && !a.startsWith(u"unix:") && !a.startsWith(u'/') && !a.startsWith(u"./"))
            anyTcp = true;
    }
    if (!anyTcp)
        return out;
    auto readSmall = [&](const QString &path, const QString &what, QString *into) {
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly) || file.size() > (1 << 20)) {
            out.error = tr("Cannot read the %1 %2: check the path and its permissions.").arg(what, path);
            return false;
        }
        *into = QString::fromUtf8(file.readAll()).trimmed();
        return true;
    };
    if (!tlsCaFile.isEmpty()) {
        if (!readSmall(tlsCaFile, tr("TLS CA file"), &out.tlsCaPem))
            return out;
        if (!out.tlsCaPem.contains(u"-----BEGIN ")) {
            out.error = tr("The TLS CA file %1 holds no PEM certificate; choose the CA that signed the broker's "
                           "certificate.").arg(tlsCaFile);
            return out;
        }
    }
    if (!typedToken.isEmpty())
        out.token = typedToken;
    else if (!tokenFile.isEmpty() && !readSmall(tokenFile, tr("token file"), &out.token))
        return out;
    return out;
}

void ConnectionDialog::updateState()
{
    m_error->setVisible(false);
    const bool remote = m_remote->isChecked();
    m_tlsCaFile->setEnabled(remote);
    m_tokenFile->setEnabled(remote);
    m_token->setEnabled(remote);
}

void ConnectionDialog::accept()
{
    QString problem = validateAddress(address());
    if (problem.isEmpty())
        problem = readCredentials(address(), tlsCaFile(), tokenFile(), typedToken()).error;
    if (!problem.isEmpty()) {
        m_error->setText(problem);
        m_error->setVisible(true);
        return;
    }
    QDialog::accept();
}

} // namespace paddock::console
