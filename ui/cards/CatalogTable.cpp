#include "cards/CatalogTable.h"

#include "catalog/CatalogJson.h"
#include "util/Errors.h"

#include <QHeaderView>
#include <QJsonArray>
#include <QSignalBlocker>

#include <cmath>

namespace pb::ui {
namespace {

enum class Kind { Text, Number, OptionalNumber, AbsentWhenEmpty, MiB };

struct Column {
    const char *header;
    QStringList path;                    // inside a card
    Kind kind;
};

const std::vector<Column> &columns()
{
    static const std::vector<Column> list {
        {QT_TRANSLATE_NOOP("CatalogTable", "Id"), {QStringLiteral("id")}, Kind::Text},
        {QT_TRANSLATE_NOOP("CatalogTable", "Name"), {QStringLiteral("name")}, Kind::Text},
        {QT_TRANSLATE_NOOP("CatalogTable", "Memory (GB)"), {QStringLiteral("memory_gb")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "Visible (MiB)"), {QStringLiteral("memory_bytes")}, Kind::MiB},
        {QT_TRANSLATE_NOOP("CatalogTable", "Bandwidth (TB/s)"), {QStringLiteral("memory_bandwidth_tbps")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "BF16 (TFLOP/s)"), {QStringLiteral("bf16_dense_tflops")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "FP8 (TFLOP/s)"), {QStringLiteral("fp8_dense_tflops")}, Kind::OptionalNumber},
        {QT_TRANSLATE_NOOP("CatalogTable", "FP4 (TFLOP/s)"), {QStringLiteral("fp4_dense_tflops")}, Kind::AbsentWhenEmpty},
        {QT_TRANSLATE_NOOP("CatalogTable", "Interconnect"), {QStringLiteral("interconnect")}, Kind::Text},
        {QT_TRANSLATE_NOOP("CatalogTable", "Link (GB/s)"), {QStringLiteral("interconnect_gbytes_per_s")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "Power (W)"), {QStringLiteral("power_w")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "On demand x1 (per GPU-h)"), {QStringLiteral("prices"), QStringLiteral("on_demand"), QStringLiteral("gpus_1")}, Kind::Number},
        {QT_TRANSLATE_NOOP("CatalogTable", "Price as of"), {QStringLiteral("price_source"), QStringLiteral("as_of")}, Kind::Text},
        {QT_TRANSLATE_NOOP("CatalogTable", "Price source"), {QStringLiteral("price_source"), QStringLiteral("text")}, Kind::Text},
    };
    return list;
}

QJsonValue valueAt(const QJsonObject &card, const QStringList &path)
{
    QJsonValue v = card;
    for (const QString &key : path)
        v = v.toObject().value(key);
    return v;
}

// Sets (or, for an undefined value, removes) the value at `path`, making the objects on the way.
void setAt(QJsonObject &object, const QStringList &path, int depth, const QJsonValue &value)
{
    const QString &key = path[depth];
    if (depth == path.size() - 1) {
        if (value.isUndefined())
            object.remove(key);
        else
            object.insert(key, value);
        return;
    }
    QJsonObject inner = object.value(key).toObject();
    setAt(inner, path, depth + 1, value);
    object.insert(key, inner);
}

QString cellText(const QJsonValue &v, Kind kind)
{
    if (v.isUndefined() || v.isNull())
        return {};
    if (kind == Kind::MiB)
        return QString::number(v.toDouble() / (1024.0 * 1024.0), 'f', 0);
    if (v.isDouble())
        return QString::number(v.toDouble(), 'g', 10);
    return v.toString();
}

} // namespace

CatalogTable::CatalogTable(QWidget *parent) : QTableWidget(parent)
{
    setObjectName(QStringLiteral("catalogTable"));
    setColumnCount(static_cast<int>(columns().size()));
    QStringList headers;
    for (const Column &c : columns())
        headers << tr(c.header);
    setHorizontalHeaderLabels(headers);
    horizontalHeader()->setStretchLastSection(true);
    connect(this, &QTableWidget::cellChanged, this, &CatalogTable::cellEdited);
}

void CatalogTable::setJson(const QJsonObject &root)
{
    m_root = root;
    m_filling = true;
    const QJsonArray cards = root.value(QStringLiteral("cards")).toArray();
    setRowCount(static_cast<int>(cards.size()));
    for (int r = 0; r < cards.size(); ++r) {
        const QJsonObject card = cards[r].toObject();
        for (int c = 0; c < columnCount(); ++c) {
            const Column &col = columns()[static_cast<size_t>(c)];
            auto *item = new QTableWidgetItem(cellText(valueAt(card, col.path), col.kind));
            item->setToolTip(QStringLiteral("cards[%1].%2").arg(r).arg(col.path.join(QLatin1Char('.'))));
            if (col.kind != Kind::Text)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            setItem(r, c, item);
        }
    }
    resizeColumnsToContents();
    setColumnWidth(static_cast<int>(columns().size()) - 1, 260);
    m_filling = false;
}

void CatalogTable::markProblem(const QString &where, const QString &message)
{
    m_problem = where.isEmpty() ? QString() : where + QStringLiteral(": ") + message;
    for (int r = 0; r < rowCount(); ++r)
        for (int c = 0; c < columnCount(); ++c) {
            QTableWidgetItem *it = item(r, c);
            const QString field = QStringLiteral("cards[%1].%2").arg(r).arg(columns()[static_cast<size_t>(c)].path.join(QLatin1Char('.')));
            const bool bad = !where.isEmpty() && field == where;
            const QSignalBlocker block(this);
            it->setBackground(bad ? QColor(0xff, 0xd0, 0xd0) : QBrush());
            it->setToolTip(bad ? m_problem : field);
        }
}

void CatalogTable::cellEdited(int row, int column)
{
    if (m_filling)
        return;
    const Column &col = columns()[static_cast<size_t>(column)];
    const QString where = QStringLiteral("cards[%1].%2").arg(row).arg(col.path.join(QLatin1Char('.')));
    const QString text = item(row, column)->text().trimmed();
    QJsonValue value;
    if (col.kind == Kind::Text) {
        value = text;
    } else if (text.isEmpty() && (col.kind == Kind::OptionalNumber || col.kind == Kind::AbsentWhenEmpty)) {
        value = col.kind == Kind::OptionalNumber ? QJsonValue(QJsonValue::Null) : QJsonValue(QJsonValue::Undefined);
    } else {
        bool ok = false;
        const double number = text.toDouble(&ok);
        if (!ok || !std::isfinite(number)) {
            markProblem(where, tr("'%1' is not a number").arg(text));
            Q_EMIT jsonEdited(m_root);
            return;
        }
        value = col.kind == Kind::MiB ? std::round(number) * 1024.0 * 1024.0 : number;
    }
    QJsonArray cards = m_root.value(QStringLiteral("cards")).toArray();
    QJsonObject card = cards[row].toObject();
    setAt(card, col.path, 0, value);
    cards[row] = card;
    m_root.insert(QStringLiteral("cards"), cards);
    // The whole catalog is what validates: a price without its date, a memory against its size.
    try {
        catalogFromJson(m_root, "the catalog table");
        markProblem(QString(), QString());
    } catch (const InvalidInputError &e) {
        markProblem(QString::fromStdString(e.where()), QString::fromStdString(e.message()));
    }
    Q_EMIT jsonEdited(m_root);
}

} // namespace pb::ui
