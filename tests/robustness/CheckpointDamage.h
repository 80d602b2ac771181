#pragma once
// Damaging a copy of a real checkpoint as a line of data/checkpoint/inputs.tsv says. The steps of a
// damage are separated by ';', and each is a verb with its words:
//
//   json FILE PATH=VALUE   set a value in a JSON file (PATH dotted, array items by index, VALUE
//                          JSON); PATH without =VALUE removes it
//   replace FILE SOURCE    FILE's bytes become SOURCE's: a data file of the surface, or other:NAME
//                          for that file of the reference checkpoint of another shape
//   symlink FILE TARGET    FILE becomes a link to TARGET
//   add FILE               a file appears that the manifest does not list
//   drop-entry FILE        the manifest stops listing FILE (the file stays)
//   remove FILE            FILE goes (the manifest still lists it)
//   truncate FILE          FILE loses its second half
//   flip FILE              one byte in the middle of FILE changes
//
// json, replace and symlink then list FILE (unless it is the manifest) in the manifest again with its
// new size and SHA-256, so the sizes and digests still agree and the only defect left is the one the
// line names.
#include "robustness/RefusalCheck.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <optional>

namespace pbtest {

namespace damage {

inline const QString kManifest = QStringLiteral("manifest.json");

inline QJsonValue withPath(const QJsonValue &node, QStringList parts, const std::optional<QJsonValue> &value)
{
    const QString key = parts.takeFirst();
    if (node.isArray()) {
        QJsonArray array = node.toArray();
        const int i = key.toInt();
        if (!parts.isEmpty())
            array[i] = withPath(array.at(i), parts, value);
        else if (value)
            array[i] = *value;
        else
            array.removeAt(i);
        return array;
    }
    QJsonObject object = node.toObject();
    if (!parts.isEmpty())
        object[key] = withPath(object.value(key), parts, value);
    else if (value)
        object[key] = *value;
    else
        object.remove(key);
    return object;
}

inline QJsonDocument readJson(const QString &path, QString &error)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        error += QStringLiteral("cannot read %1\n").arg(path);
        return {};
    }
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll());
    if (doc.isNull())
        error += QStringLiteral("%1 is not JSON\n").arg(path);
    return doc;
}

inline void writeBytes(const QString &path, const QByteArray &bytes, QString &error)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(bytes) != bytes.size())
        error += QStringLiteral("cannot write %1\n").arg(path);
}

inline void editJson(const QString &path, const QString &assignment, QString &error)
{
    const QJsonDocument doc = readJson(path, error);
    if (!error.isEmpty())
        return;
    const qsizetype eq = assignment.indexOf(QLatin1Char('='));
    std::optional<QJsonValue> value;
    if (eq >= 0) {
        const QJsonDocument parsed = QJsonDocument::fromJson((QLatin1Char('[') + assignment.mid(eq + 1) + QLatin1Char(']')).toUtf8());
        if (!parsed.isArray() || parsed.array().size() != 1) {
            error += QStringLiteral("'%1' is not JSON\n").arg(assignment.mid(eq + 1));
            return;
        }
        value = parsed.array().at(0);
    }
    const QStringList keys = assignment.left(eq >= 0 ? eq : assignment.size()).split(QLatin1Char('.'));
    const QJsonValue root = withPath(doc.isArray() ? QJsonValue(doc.array()) : QJsonValue(doc.object()), keys, value);
    writeBytes(path, root.isArray() ? QJsonDocument(root.toArray()).toJson() : QJsonDocument(root.toObject()).toJson(), error);
}

// Rewrites the manifest's list of files through `change`.
inline void editEntries(const QString &folder, const std::function<void(QJsonArray &)> &change, QString &error)
{
    const QString path = QDir(folder).filePath(kManifest);
    QJsonObject manifest = readJson(path, error).object();
    if (!error.isEmpty())
        return;
    QJsonArray files = manifest.value(QStringLiteral("files")).toArray();
    change(files);
    manifest[QStringLiteral("files")] = files;
    writeBytes(path, QJsonDocument(manifest).toJson(), error);
}

inline void dropEntry(const QString &folder, const QString &name, QString &error)
{
    editEntries(folder, [&](QJsonArray &files) {
        for (qsizetype i = files.size() - 1; i >= 0; --i)
            if (files.at(i).toObject().value(QStringLiteral("file")).toString() == name)
                files.removeAt(i);
    }, error);
}

// Lists `name` with the size and SHA-256 of what it now holds (through a link, the target's).
inline void relist(const QString &folder, const QString &name, QString &error)
{
    const QString path = QDir(folder).filePath(name);
    const QJsonObject entry {{QStringLiteral("file"), name}, {QStringLiteral("bytes"), QFileInfo(path).size()},
                             {QStringLiteral("sha256"), QString::fromLatin1(sha256Of(path))}};
    editEntries(folder, [&](QJsonArray &files) {
        for (qsizetype i = 0; i < files.size(); ++i) {
            if (files.at(i).toObject().value(QStringLiteral("file")).toString() == name) {
                files[i] = entry;
                return;
            }
        }
        files.append(entry);
    }, error);
}

} // namespace damage

// Applies `spec` to the checkpoint step folder `folder`; returns what could not be done.
inline QString damageCheckpoint(const QString &folder, const QString &spec, const QString &dataFolder, const QString &otherFolder)
{
    QString error;
    for (const QString &step : spec.split(QLatin1Char(';'), Qt::SkipEmptyParts)) {
        const QStringList w = step.split(QLatin1Char(' '), Qt::SkipEmptyParts);
        if (w.size() < 2) {
            error += QStringLiteral("damage step '%1' names no file\n").arg(step);
            break;
        }
        const QString &verb = w[0];
        const QString &name = w[1];
        const QString path = QDir(folder).filePath(name);
        QFile file(path);
        const bool relisted = name != damage::kManifest;
        if (verb == QLatin1String("json") && w.size() == 3) {
            damage::editJson(path, w[2], error);
            if (relisted)
                damage::relist(folder, name, error);
        } else if (verb == QLatin1String("replace") && w.size() == 3) {
            const QString source = w[2].startsWith(QLatin1String("other:")) ? QDir(otherFolder).filePath(w[2].mid(6)) : QDir(dataFolder).filePath(w[2]);
            if (!file.remove() || !QFile::copy(source, path))
                error += QStringLiteral("cannot replace %1 with %2\n").arg(name, source);
            if (relisted)
                damage::relist(folder, name, error);
        } else if (verb == QLatin1String("symlink") && w.size() == 3) {
            if (!file.remove() || !QFile::link(w[2], path))
                error += QStringLiteral("cannot link %1 to %2\n").arg(name, w[2]);
            if (relisted)
                damage::relist(folder, name, error);
        } else if (verb == QLatin1String("add") && w.size() == 2) {
            damage::writeBytes(path, QByteArrayLiteral("not part of the checkpoint\n"), error);
        } else if (verb == QLatin1String("drop-entry") && w.size() == 2) {
            damage::dropEntry(folder, name, error);
        } else if (verb == QLatin1String("remove") && w.size() == 2) {
            if (!file.remove())
                error += QStringLiteral("cannot remove %1\n").arg(name);
        } else if (verb == QLatin1String("truncate") && w.size() == 2) {
            if (!file.resize(QFileInfo(path).size() / 2))
                error += QStringLiteral("cannot truncate %1\n").arg(name);
        } else if (verb == QLatin1String("flip") && w.size() == 2) {
            if (!file.open(QIODevice::ReadWrite) || !file.seek(file.size() / 2)) {
                error += QStringLiteral("cannot open %1\n").arg(name);
                continue;
            }
            const char byte = file.read(1).at(0);
            file.seek(file.size() / 2);
            file.write(QByteArray(1, static_cast<char>(byte ^ 0x5a)));
        } else {
            error += QStringLiteral("unknown damage step '%1'\n").arg(step);
        }
    }
    return error;
}

} // namespace pbtest
