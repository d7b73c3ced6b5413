#include "views/first_run_banner.h"

#include "views/theme.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QStyle>
#include <QVBoxLayout>

namespace paddock::console {

namespace {
constexpr int kIconPx = 32;
constexpr int kDetailsLines = 8;
} // namespace

FirstRunBanner::FirstRunBanner(QWidget *parent)
    : QFrame(parent)
{
    setObjectName(QStringLiteral("firstRunBanner"));
    setFrameShape(QFrame::StyledPanel);
    // The palette's alternate base: set apart from the pages under it in light and dark alike.
    setBackgroundRole(QPalette::AlternateBase);
    setAutoFillBackground(true);

    m_icon = new QLabel(this);
    m_icon->setAlignment(Qt::AlignTop);
    m_text = new QLabel(this);
    m_text->setObjectName(QStringLiteral("firstRunText"));
    m_text->setWordWrap(true);
    m_text->setTextFormat(Qt::PlainText);
    m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont bold = m_text->font();
    bold.setBold(true);
    m_text->setFont(bold);
    m_explanation = new QLabel(this);
    m_explanation->setWordWrap(true);
    m_explanation->setTextFormat(Qt::PlainText);
    m_explanation->setTextInteractionFlags(Qt::TextSelectableByMouse);
    Theme::setTextRole(m_explanation, TextRole::Muted);
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 0);   // busy: how long the broker takes is not known
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(8);
    m_details = new QPlainTextEdit(this);
    m_details->setObjectName(QStringLiteral("firstRunDetails"));
    m_details->setReadOnly(true);
    m_details->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_details->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_details->setFixedHeight(m_details->fontMetrics().lineSpacing() * kDetailsLines + 12);

    m_start = new QPushButton(tr("&Start the broker"), this);
    m_start->setObjectName(QStringLiteral("startBrokerButton"));
    m_start->setDefault(true);
    m_start->setToolTip(tr("Start paddockd for this user: its systemd user unit when there is one, otherwise the "
                           "program itself, in the background"));
    m_connect = new QPushButton(tr("Connect to &another…"), this);
    m_connect->setObjectName(QStringLiteral("connectElsewhereButton"));
    m_connect->setToolTip(tr("Choose another broker: a remote one (host:port) or another socket"));
    connect(m_start, &QPushButton::clicked, this, &FirstRunBanner::startRequested);
    connect(m_connect, &QPushButton::clicked, this, &FirstRunBanner::connectElsewhereRequested);

    auto *buttons = new QHBoxLayout;
    buttons->addWidget(m_start);
    buttons->addWidget(m_connect);
    buttons->addStretch(1);
    auto *column = new QVBoxLayout;
    column->addWidget(m_text);
    column->addWidget(m_explanation);
    column->addWidget(m_progress);
    column->addWidget(m_details);
    column->addLayout(buttons);
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(12, 10, 12, 10);
    layout->setSpacing(12);
    layout->addWidget(m_icon, 0, Qt::AlignTop);
    layout->addLayout(column, 1);

    setVisible(false);
}

void FirstRunBanner::setIcon(bool error)
{
    const QIcon icon = style()->standardIcon(error ? QStyle::SP_MessageBoxWarning : QStyle::SP_MessageBoxInformation);
    m_icon->setPixmap(icon.pixmap(kIconPx, kIconPx));
}

void FirstRunBanner::showOffer(const QString &text, const QString &explanation)
{
    m_state = State::Offer;
    setIcon(false);
    m_text->setText(text);
    m_explanation->setText(explanation);
    m_explanation->setVisible(!explanation.isEmpty());
    Theme::setTextRole(m_text, TextRole::Normal);
    m_progress->setVisible(false);
    m_details->setVisible(false);
    m_start->setText(tr("&Start the broker"));
    m_start->setEnabled(true);
    m_connect->setEnabled(true);
    setVisible(true);
}

void FirstRunBanner::showProgress(const QString &text)
{
    m_state = State::Starting;
    setIcon(false);
    m_text->setText(text);
    Theme::setTextRole(m_text, TextRole::Normal);
    m_explanation->setVisible(false);
    m_progress->setVisible(true);
    m_details->setVisible(false);
    m_start->setEnabled(false);
    m_connect->setEnabled(true);
    setVisible(true);
}

void FirstRunBanner::showError(const QString &error, const QString &details)
{
    m_state = State::Failed;
    setIcon(true);
    m_text->setText(error);
    Theme::setTextRole(m_text, TextRole::Error);
    m_explanation->setVisible(false);
    m_progress->setVisible(false);
    m_details->setPlainText(details);
    m_details->setVisible(!details.isEmpty());
    m_start->setText(tr("Try &again"));
    m_start->setEnabled(true);
    m_connect->setEnabled(true);
    setVisible(true);
}

void FirstRunBanner::dismiss()
{
    m_state = State::Hidden;
    setVisible(false);
}

QString FirstRunBanner::text() const { return m_text->text(); }

QString FirstRunBanner::explanation() const { return m_explanation->isHidden() ? QString() : m_explanation->text(); }

QString FirstRunBanner::details() const { return m_details->isHidden() ? QString() : m_details->toPlainText(); }

} // namespace paddock::console
