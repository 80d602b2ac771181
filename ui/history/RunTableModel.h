#pragma once
// The history's runs as a table: one row per run, newest first; tags and notes are edited in place
// and written straight to the store. Sort through a QSortFilterProxyModel on SortRole.
#include "history/HistoryTypes.h"

#include <QAbstractTableModel>

#include <vector>

namespace pb {
class HistoryStore;
}

namespace pb::ui {

class RunTableModel final : public QAbstractTableModel {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RunTableModel)
public:
    enum Column { Id, Started, Kind, Model, Device, Verdict, Steps, P50, TokensPerSecond, PeakAllocated, Baseline, Tags, Notes, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1;
    static constexpr int RunIdRole = Qt::UserRole + 2;

    explicit RunTableModel(HistoryStore *store, QObject *parent = nullptr);
    void setStore(HistoryStore *store);
    void reload(const RunFilter &filter = {});
    const RunRecord *record(int row) const;
    int rowOfRun(int64_t runId) const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;
    bool setData(const QModelIndex &index, const QVariant &value, int role) override;

Q_SIGNALS:
    void storeError(const QString &message);

private:
    HistoryStore *m_store = nullptr;
    std::vector<RunRecord> m_runs;
};

} // namespace pb::ui
