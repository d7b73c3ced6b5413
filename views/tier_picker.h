#pragma once
// Choosing a tier: each tier the pools offer with its price per hour and limits ("standard ·
// $0.12/h · 2 CPU · 4.0 GiB · runsc"), for the submit dialog and the override dialog.
//
// Threads: GUI thread only.

#include "models/console_types.h"

#include <QComboBox>

namespace paddock::console {

// "standard · $0.12/h · 2 CPU · 4.0 GiB · runsc" (what is not known is left out).
QString tierLabel(const TierInfo &tier);

class TierPicker : public QComboBox {
    Q_OBJECT

public:
    explicit TierPicker(QWidget *parent = nullptr);

    // Tiers by name (the first of each name wins: pools offering the same tier agree on it).
    // noChoiceText: a first entry meaning "no tier" (empty data), or empty for none.
    void setTiers(const QList<TierInfo> &tiers, const QString &noChoiceText = {});
    // The chosen tier's name; empty for the no-choice entry.
    QString selectedTier() const;
    bool selectTier(const QString &name);
    QList<TierInfo> tiers() const { return m_tiers; }

private:
    QList<TierInfo> m_tiers;
};

} // namespace paddock::console
