#include "views/tier_picker.h"

#include "models/snapshot_files_model.h"

namespace paddock::console {

QString tierLabel(const TierInfo &tier)
{
    QStringList parts{tier.name};
    if (tier.pricePerHourUsd > 0)
        parts << QStringLiteral("$%1/h").arg(tier.pricePerHourUsd, 0, 'f', tier.pricePerHourUsd < 1 ? 3 : 2);
    if (tier.cpu > 0)
        parts << QStringLiteral("%1 CPU").arg(tier.cpu);
    if (tier.memoryBytes > 0)
        parts << formatBytes(tier.memoryBytes);
    if (!tier.runtime.isEmpty())
        parts << tier.runtime;
    return parts.join(QStringLiteral(" · "));
}

TierPicker::TierPicker(QWidget *parent) : QComboBox(parent)
{
    setObjectName(QStringLiteral("tierPicker"));
    setSizeAdjustPolicy(QComboBox::AdjustToContents);
}

void TierPicker::setTiers(const QList<TierInfo> &tiers, const QString &noChoiceText)
{
    const QString current = selectedTier();
    clear();
    m_tiers.clear();
    if (!noChoiceText.isEmpty()) {
        addItem(noChoiceText, QString());
        setItemData(0, tr("No tier: the agent's selection mode decides (its default tier, the agent's request, the "
                          "platform's rules or a review, as configured)."),
                    Qt::ToolTipRole);
    }
    for (const TierInfo &tier : tiers) {
        if (std::any_of(m_tiers.cbegin(), m_tiers.cend(), [&](const TierInfo &t) { return t.name == tier.name; }))
            continue;
        m_tiers.append(tier);
        addItem(tierLabel(tier), tier.name);
        setItemData(count() - 1,
                    tr("%1: %2 per hour, %3 CPU, %4 memory, network %5")
                        .arg(tier.name, QStringLiteral("$%1").arg(tier.pricePerHourUsd, 0, 'f', 3))
                        .arg(tier.cpu)
                        .arg(formatBytes(tier.memoryBytes), tier.network.isEmpty() ? tr("none") : tier.network),
                    Qt::ToolTipRole);
    }
    selectTier(current);
}

QString TierPicker::selectedTier() const { return currentData().toString(); }

bool TierPicker::selectTier(const QString &name)
{
    const int index = findData(name);
    if (index < 0)
        return false;
    setCurrentIndex(index);
    return true;
}

} // namespace paddock::console
