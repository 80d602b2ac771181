#include "history/ConfigDiff.h"

#include <QJsonArray>

namespace pb {
namespace {

void flatten(const QJsonValue &value, const QString &path, QMap<QString, QJsonValue> &out)
{
    if (value.isObject() && !value.toObject().isEmpty()) {
        const QJsonObject object = value.toObject();
        for (auto it = object.begin(); it != object.end(); ++it)
            flatten(it.value(), path.isEmpty() ? it.key() : path + QLatin1Char('.') + it.key(), out);
    } else if (value.isArray() && !value.toArray().isEmpty()) {
        const QJsonArray array = value.toArray();
        for (qsizetype i = 0; i < array.size(); ++i)
            flatten(array.at(i), path + QStringLiteral("[%1]").arg(i), out);
    } else {
        out.insert(path, value);
    }
}

} // namespace

QMap<QString, QJsonValue> flattenJson(const QJsonObject &object)
{
    QMap<QString, QJsonValue> out;
    flatten(object, QString(), out);
    if (object.isEmpty())
        out.clear();
    return out;
}

std::vector<ConfigDifference> diffJson(const QJsonObject &left, const QJsonObject &right)
{
    const auto a = flattenJson(left);
    const auto b = flattenJson(right);
    std::vector<ConfigDifference> diffs;
    auto ia = a.constBegin();
    auto ib = b.constBegin();
    while (ia != a.constEnd() || ib != b.constEnd()) {
        if (ib == b.constEnd() || (ia != a.constEnd() && ia.key() < ib.key())) {
            diffs.push_back({ia.key(), ia.value(), QJsonValue(QJsonValue::Undefined)});
            ++ia;
        } else if (ia == a.constEnd() || ib.key() < ia.key()) {
            diffs.push_back({ib.key(), QJsonValue(QJsonValue::Undefined), ib.value()});
            ++ib;
        } else {
            if (ia.value() != ib.value())
                diffs.push_back({ia.key(), ia.value(), ib.value()});
            ++ia;
            ++ib;
        }
    }
    return diffs;
}

} // namespace pb
