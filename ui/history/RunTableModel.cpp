#include "history/RunTableModel.h"

#include "history/HistoryStore.h"
#include "util/Units.h"

#include <QLocale>

#include <exception>

namespace pb::ui {

RunTableModel::RunTableModel(HistoryStore *store, QObject *parent) : QAbstractTableModel(parent), m_store(store) {}

void RunTableModel::setStore(HistoryStore *store)
{
    m_store = store;
    reload();
}

void RunTableModel::reload(const RunFilter &filter)
{
    beginResetModel();
    m_runs.clear();
    if (m_store) {
        try {
            m_runs = m_store->listRuns(filter);
        } catch (const std::exception &e) {
            Q_EMIT storeError(QString::fromUtf8(e.what()));
        }
    }
    endResetModel();
}

const RunRecord *RunTableModel::record(int row) const
{
    return row >= 0 && row < static_cast<int>(m_runs.size()) ? &m_runs[static_cast<size_t>(row)] : nullptr;
}

int RunTableModel::rowOfRun(int64_t runId) const
{
    for (size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == runId)
            return static_cast<int>(i);
    return -1;
}

int RunTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunTableModel::data(const QModelIndex &index, int role) const
{
    const RunRecord *r = record(index.row());
    if (!r)
        return {};
    if (role == RunIdRole)
        return QVariant::fromValue<qlonglong>(r->id);
    const QJsonObject &s = r->summary;
    const auto number = [&](const char *key) -> QVariant {
        const QJsonValue v = s.value(QLatin1String(key));
        return v.isDouble() ? QVariant(v.toDouble()) : QVariant();
    };
    if (role == SortRole) {
        switch (index.column()) {
        case Id: return QVariant::fromValue<qlonglong>(r->id);
        case Started: return r->startedAt;
        case Steps: return QVariant::fromValue<qlonglong>(r->sampleCount);
        case P50: return number("step_time_p50_ms");
        case TokensPerSecond: return number("tokens_per_s");
        case PeakAllocated: return number("peak_allocated_bytes");
        case Baseline: return r->pinnedBaseline;
        default: return data(index, Qt::DisplayRole);
        }
    }
    if (role == Qt::TextAlignmentRole) {
        switch (index.column()) {
        case Id: case Steps: case P50: case TokensPerSecond: case PeakAllocated: return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        default: return {};
        }
    }
    if (role == Qt::ToolTipRole && index.column() == Notes)
        return r->notes;
    if (role != Qt::DisplayRole && role != Qt::EditRole)
        return {};
    const QLocale locale;
    switch (index.column()) {
    case Id: return QVariant::fromValue<qlonglong>(r->id);
    case Started: return r->startedAt.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
    case Kind: return r->kind;
    case Model: return r->model;
    case Device: return r->card.isEmpty() ? r->device : r->card;
    case Verdict: return r->verdict.isEmpty() ? r->status : r->verdict;
    case Steps: return QVariant::fromValue<qlonglong>(r->sampleCount);
    case P50: {
        const QVariant v = number("step_time_p50_ms");
        return v.isValid() ? QVariant(QString::number(v.toDouble(), 'f', 1)) : QVariant();
    }
    case TokensPerSecond: {
        const QVariant v = number("tokens_per_s");
        return v.isValid() ? QVariant(locale.toString(v.toDouble(), 'f', 0)) : QVariant();
    }
    case PeakAllocated: {
        const QVariant v = number("peak_allocated_bytes");
        return v.isValid() ? QVariant(formatBytes(static_cast<int64_t>(v.toDouble()), 1)) : QVariant();
    }
    case Baseline: return r->pinnedBaseline ? QStringLiteral("★ baseline") : QString();
    case Tags: return r->tags.join(QStringLiteral(", "));
    case Notes: return role == Qt::EditRole ? r->notes : r->notes.section(QLatin1Char('\n'), 0, 0);
    default: return {};
    }
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Id: return tr("Run");
    case Started: return tr("Started");
    case Kind: return tr("Kind");
    case Model: return tr("Model");
    case Device: return tr("Device / card");
    case Verdict: return tr("Verdict");
    case Steps: return tr("Samples");
    case P50: return tr("p50 (ms)");
    case TokensPerSecond: return tr("Tokens/s");
    case PeakAllocated: return tr("Peak allocated");
    case Baseline: return tr("Baseline");
    case Tags: return tr("Tags");
    case Notes: return tr("Notes");
    default: return {};
    }
}

Qt::ItemFlags RunTableModel::flags(const QModelIndex &index) const
{
    Qt::ItemFlags f = QAbstractTableModel::flags(index);
    if (index.column() == Tags || index.column() == Notes)
        f |= Qt::ItemIsEditable;
    return f;
}

bool RunTableModel::setData(const QModelIndex &index, const QVariant &value, int role)
{
    if (role != Qt::EditRole || !m_store || (index.column() != Tags && index.column() != Notes))
        return false;
    const RunRecord *r = record(index.row());
    if (!r)
        return false;
    RunRecord &run = m_runs[static_cast<size_t>(index.row())];
    try {
        if (index.column() == Tags) {
            QStringList tags;
            for (const QString &t : value.toString().split(QLatin1Char(','), Qt::SkipEmptyParts))
                if (!t.trimmed().isEmpty())
                    tags << t.trimmed();
            m_store->setTags(run.id, tags);
            run.tags = tags;
        } else {
            m_store->setNotes(run.id, value.toString());
            run.notes = value.toString();
        }
    } catch (const std::exception &e) {
        Q_EMIT storeError(QString::fromUtf8(e.what()));
        return false;
    }
    Q_EMIT dataChanged(index, index);
    return true;
}

} // namespace pb::ui
