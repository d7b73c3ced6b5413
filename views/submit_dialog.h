#pragma once
// Submit a session: a playbook the broker ships (by name), a playbook file, or a goal and a model;
// optionally a tier, an agent and tags.
//
// Threads: GUI thread only.

#include "models/console_types.h"
#include "views/tier_picker.h"

#include <QDialog>

class QButtonGroup;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QRadioButton;
class QPushButton;
class QStackedWidget;

namespace paddock::console {

class SubmitDialog : public QDialog {
    Q_OBJECT

public:
    explicit SubmitDialog(QWidget *parent = nullptr);

    // Names offered in the playbook list (the demo playbooks by default).
    void setPlaybookNames(const QStringList &names);
    void setDefaultModel(const QString &model);
    // The tiers the connected pools offer, each with its price per hour and limits ("lite · $0.020/h
    // · 0.5 CPU · 512.0 MiB · bwrap"). The first entry, "Let the agent's selection mode decide",
    // sends no tier.
    void setTiers(const QList<TierInfo> &tiers);

    enum class Source { PlaybookName, PlaybookFile, Goal };
    void setSource(Source source);
    Source source() const;

    // The request as filled in; valid only after accept(). A playbook file's text is read on
    // accept (playbooks are a few KiB; the file was just picked by the user).
    SubmitRequest request() const { return m_request; }

    // For tests and scripts: fill the fields without the UI.
    QComboBox *playbookCombo() const { return m_playbook; }
    QLineEdit *goalEdit() const { return m_goal; }
    TierPicker *tierCombo() const { return m_tier; }

public slots:
    void accept() override;

private:
    void updateState();
    void browse();

    QButtonGroup *m_sourceGroup = nullptr;
    QStackedWidget *m_pages = nullptr;
    QComboBox *m_playbook = nullptr;
    QLineEdit *m_file = nullptr;
    QLineEdit *m_goal = nullptr;
    QComboBox *m_model = nullptr;
    TierPicker *m_tier = nullptr;
    QLineEdit *m_agent = nullptr;
    QLineEdit *m_tags = nullptr;
    QLabel *m_error = nullptr;
    QPushButton *m_submitButton = nullptr;
    SubmitRequest m_request;
};

} // namespace paddock::console
