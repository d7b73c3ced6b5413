#include "views/override_dialog.h"

#include "views/theme.h"
#include "views/tier_picker.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace paddock::console {

OverrideDialog::OverrideDialog(const SessionInfo &session, const QList<TierInfo> &tiers, QWidget *parent)
    : QDialog(parent), m_session(session)
{
    setObjectName(QStringLiteral("overrideDialog"));
    setWindowTitle(tr("Override tier of %1").arg(session.id));
    auto *layout = new QVBoxLayout(this);
    auto *intro = new QLabel(this);
    intro->setWordWrap(true);
    intro->setText(tr("Session %1 (%2) runs on tier %3, chosen by %4. At its next step its workspace is "
                      "snapshotted and restored into a sandbox of the tier you choose; the decision is recorded "
                      "with you as the chooser.")
                       .arg(session.id, session.agent, session.tier.isEmpty() ? tr("(none yet)") : session.tier,
                            session.tierChooser.isEmpty() ? tr("the broker") : session.tierChooser));
    layout->addWidget(intro);

    auto *form = new QFormLayout;
    m_picker = new TierPicker(this);
    m_picker->setTiers(tiers);
    // Preselect another tier than the current one.
    for (int i = 0; i < m_picker->count(); ++i) {
        if (m_picker->itemData(i).toString() != session.tier) {
            m_picker->setCurrentIndex(i);
            break;
        }
    }
    m_reason = new QLineEdit(this);
    m_reason->setObjectName(QStringLiteral("overrideReason"));
    m_reason->setPlaceholderText(tr("Why (required; recorded with the decision)"));
    form->addRow(tr("&Tier:"), m_picker);
    form->addRow(tr("&Reason:"), m_reason);
    layout->addLayout(form);

    m_hint = new QLabel(this);
    m_hint->setWordWrap(true);
    Theme::setTextRole(m_hint, TextRole::Muted);
    layout->addWidget(m_hint);

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
    m_ok = buttons->addButton(tr("Override"), QDialogButtonBox::AcceptRole);
    m_ok->setObjectName(QStringLiteral("overrideButton"));
    m_ok->setDefault(true);
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (problem().isEmpty())
            accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);

    connect(m_reason, &QLineEdit::textChanged, this, &OverrideDialog::updateState);
    connect(m_picker, &QComboBox::currentIndexChanged, this, &OverrideDialog::updateState);
    updateState();
}

QString OverrideDialog::tier() const { return m_picker->selectedTier(); }
QString OverrideDialog::reason() const { return m_reason->text().trimmed(); }

QString OverrideDialog::problem() const
{
    if (m_picker->count() == 0)
        return tr("No tier to choose: no healthy pool offers one (see the Pools view).");
    if (tier() == m_session.tier)
        return tr("The session is already on %1: choose another tier.").arg(tier());
    if (reason().isEmpty())
        return tr("Type a reason: it is recorded with the decision.");
    return {};
}

void OverrideDialog::updateState()
{
    const QString why = problem();
    m_ok->setEnabled(why.isEmpty());
    m_ok->setToolTip(why);
    m_hint->setText(why);
}

} // namespace paddock::console
