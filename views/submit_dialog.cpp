#include "views/submit_dialog.h"

#include "views/theme.h"
#include "views/tier_picker.h"

#include <QButtonGroup>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QStackedWidget>
#include <QToolButton>
#include <QUuid>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
constexpr qint64 kMaxPlaybookBytes = 1 << 20;
}

SubmitDialog::SubmitDialog(QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Submit a session"));
    setMinimumWidth(520);

    auto *layout = new QVBoxLayout(this);

    auto *sourceRow = new QHBoxLayout;
    m_sourceGroup = new QButtonGroup(this);
    const QList<QPair<Source, QString>> sources = {
        {Source::PlaybookName, tr("&Playbook")},
        {Source::PlaybookFile, tr("Playbook &file")},
        {Source::Goal, tr("&Goal and model")},
    };
    for (const auto &[id, text] : sources) {
        auto *radio = new QRadioButton(text, this);
        m_sourceGroup->addButton(radio, int(id));
        sourceRow->addWidget(radio);
    }
    sourceRow->addStretch();
    layout->addLayout(sourceRow);

    m_pages = new QStackedWidget(this);

    auto *namePage = new QWidget(m_pages);
    auto *nameForm = new QFormLayout(namePage);
    nameForm->setContentsMargins(0, 0, 0, 0);
    m_playbook = new QComboBox(namePage);
    m_playbook->setEditable(true);
    nameForm->addRow(tr("Playbook name:"), m_playbook);
    m_pages->addWidget(namePage);

    auto *filePage = new QWidget(m_pages);
    auto *fileForm = new QFormLayout(filePage);
    fileForm->setContentsMargins(0, 0, 0, 0);
    auto *fileRow = new QHBoxLayout;
    m_file = new QLineEdit(filePage);
    m_file->setPlaceholderText(tr("/path/to/playbook.toml"));
    auto *browseButton = new QToolButton(filePage);
    browseButton->setText(tr("Browse…"));
    connect(browseButton, &QToolButton::clicked, this, &SubmitDialog::browse);
    fileRow->addWidget(m_file);
    fileRow->addWidget(browseButton);
    fileForm->addRow(tr("Playbook file:"), fileRow);
    m_pages->addWidget(filePage);

    auto *goalPage = new QWidget(m_pages);
    auto *goalForm = new QFormLayout(goalPage);
    goalForm->setContentsMargins(0, 0, 0, 0);
    m_goal = new QLineEdit(goalPage);
    m_goal->setPlaceholderText(tr("What should the agent do?"));
    m_model = new QComboBox(goalPage);
    m_model->setEditable(true);
    // Every broker has "openai"; profiles ("openai:NAME") are typed in. "scripted" needs a playbook,
    // so it belongs to the other two pages.
    m_model->addItem(QStringLiteral("openai"));
    m_model->setToolTip(tr("A model configured on the broker: openai, or openai:PROFILE for a [models.openai.PROFILE] table"));
    goalForm->addRow(tr("Goal:"), m_goal);
    goalForm->addRow(tr("Model:"), m_model);
    m_pages->addWidget(goalPage);
    layout->addWidget(m_pages);

    auto *common = new QFormLayout;
    m_tier = new TierPicker(this);
    m_tier->setTiers({}, tr("Let the agent's selection mode decide"));
    m_agent = new QLineEdit(this);
    m_agent->setPlaceholderText(tr("default"));
    m_tags = new QLineEdit(this);
    m_tags->setPlaceholderText(tr("comma-separated, optional"));
    common->addRow(tr("&Tier:"), m_tier);
    common->addRow(tr("&Agent:"), m_agent);
    common->addRow(tr("Ta&gs:"), m_tags);
    layout->addLayout(common);

    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setVisible(false);
    Theme::setTextRole(m_error, TextRole::Error);
    layout->addWidget(m_error);

    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
    m_submitButton = buttons->addButton(tr("Submit"), QDialogButtonBox::AcceptRole);
    m_submitButton->setDefault(true);
    connect(buttons, &QDialogButtonBox::accepted, this, &SubmitDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &SubmitDialog::reject);
    layout->addWidget(buttons);

    connect(m_sourceGroup, &QButtonGroup::idClicked, this, [this](int) { updateState(); });
    connect(m_playbook, &QComboBox::currentTextChanged, this, &SubmitDialog::updateState);
    connect(m_file, &QLineEdit::textChanged, this, &SubmitDialog::updateState);
    connect(m_goal, &QLineEdit::textChanged, this, &SubmitDialog::updateState);

    setPlaybookNames({QStringLiteral("hello-c"), QStringLiteral("inspect"), QStringLiteral("data-pipeline"),
                      QStringLiteral("failing-build")});
    setSource(Source::PlaybookName);
}

void SubmitDialog::setPlaybookNames(const QStringList &names)
{
    const QString current = m_playbook->currentText();
    m_playbook->clear();
    m_playbook->addItems(names);
    if (!current.isEmpty())
        m_playbook->setCurrentText(current);
}

void SubmitDialog::setTiers(const QList<TierInfo> &tiers)
{
    m_tier->setTiers(tiers, tr("Let the agent's selection mode decide"));
}

void SubmitDialog::setDefaultModel(const QString &model) { m_model->setCurrentText(model); }

void SubmitDialog::setSource(Source source)
{
    m_sourceGroup->button(int(source))->setChecked(true);
    updateState();
}

SubmitDialog::Source SubmitDialog::source() const { return Source(m_sourceGroup->checkedId()); }

void SubmitDialog::updateState()
{
    m_pages->setCurrentIndex(m_sourceGroup->checkedId());
    bool ready = false;
    switch (source()) {
    case Source::PlaybookName: ready = !m_playbook->currentText().trimmed().isEmpty(); break;
    case Source::PlaybookFile: ready = !m_file->text().trimmed().isEmpty(); break;
    case Source::Goal: ready = !m_goal->text().trimmed().isEmpty(); break;
    }
    m_submitButton->setEnabled(ready);
    m_error->setVisible(false);
}

void SubmitDialog::browse()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Choose a playbook"), m_file->text(),
                                                      tr("Playbooks (*.toml);;All files (*)"));
    if (!path.isEmpty())
        m_file->setText(path);
}

void SubmitDialog::accept()
{
    SubmitRequest request;
    switch (source()) {
    case Source::PlaybookName:
        request.playbook = m_playbook->currentText().trimmed();
        break;
    case Source::PlaybookFile: {
        QFile file(m_file->text().trimmed());
        if (!file.open(QIODevice::ReadOnly)) {
            m_error->setText(tr("Cannot read %1: %2. Choose another file.").arg(file.fileName(), file.errorString()));
            m_error->setVisible(true);
            return;
        }
        if (file.size() > kMaxPlaybookBytes) {
            m_error->setText(tr("%1 is larger than 1 MiB; a playbook is a short TOML file.").arg(file.fileName()));
            m_error->setVisible(true);
            return;
        }
        request.playbookToml = QString::fromUtf8(file.readAll());
        break;
    }
    case Source::Goal:
        request.goal = m_goal->text().trimmed();
        request.model = m_model->currentText().trimmed();
        break;
    }
    request.tier = m_tier->selectedTier();
    request.agent = m_agent->text().trimmed();
    for (const QString &tag : m_tags->text().split(u',', Qt::SkipEmptyParts)) {
        if (!tag.trimmed().isEmpty())
            request.tags.append(tag.trimmed());
    }
    // A fresh id for this click: the client sends it again with every retry of this submit, so a
    // broker that answers late or another broker of the list makes no second session of it.
    request.requestId = QUuid::createUuid().toString(QUuid::WithoutBraces);
    m_request = request;
    QDialog::accept();
}

} // namespace paddock::console
