#include "views/storage_card.h"

#include "models/pools_model.h"
#include "views/theme.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace paddock::console {

StorageCard::StorageCard(QWidget *parent)
    : QFrame(parent)
{
    setObjectName(QStringLiteral("checkpointStoreCard"));
    setFrameShape(QFrame::StyledPanel);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 6, 10, 6);
    layout->setSpacing(2);
    auto *title = new QLabel(tr("Checkpoint store"), this);
    QFont titleFont = title->font();
    titleFont.setWeight(QFont::DemiBold);
    title->setFont(titleFont);
    m_where = new QLabel(this);
    m_where->setTextInteractionFlags(Qt::TextSelectableByMouse);
    Theme::setTextRole(m_where, TextRole::Muted);
    auto *titleRow = new QHBoxLayout;
    titleRow->addWidget(title);
    titleRow->addWidget(m_where, 1);
    layout->addLayout(titleRow);
    m_figures = new QLabel(this);
    QFont figuresFont = m_figures->font();
    figuresFont.setPointSizeF(figuresFont.pointSizeF() * 1.1);
    m_figures->setFont(figuresFont);
    layout->addWidget(m_figures);
    m_detail = new QLabel(this);
    m_detail->setWordWrap(true);
    Theme::setTextRole(m_detail, TextRole::Muted);
    layout->addWidget(m_detail);
    m_warning = new QLabel(this);
    m_warning->setWordWrap(true);
    Theme::setTextRole(m_warning, TextRole::Error);
    layout->addWidget(m_warning);
    setVisible(false);
}

void StorageCard::setModel(PoolsModel *model)
{
    m_model = model;
    connect(model, &PoolsModel::storageChanged, this, &StorageCard::refresh);
    refresh();
}

void StorageCard::refresh()
{
    if (!m_model || !m_model->hasStorage()) {
        setVisible(false);
        return;
    }
    const StorageCardText text = storageCardText(m_model->storage());
    m_where->setText(text.where);
    m_figures->setText(text.figures);
    m_detail->setText(text.detail);
    QString warning = text.warning;
    if (!m_model->storageError().isEmpty())
        warning = tr("Not refreshed: %1").arg(m_model->storageError());
    m_warning->setText(warning);
    m_warning->setVisible(!warning.isEmpty());
    setVisible(true);
}

QString StorageCard::whereText() const { return m_where->text(); }
QString StorageCard::figuresText() const { return m_figures->text(); }
QString StorageCard::detailText() const { return m_detail->text(); }
QString StorageCard::warningText() const { return m_warning->text(); }

} // namespace paddock::console
