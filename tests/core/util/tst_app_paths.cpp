// The data and configuration folders are $XDG_DATA_HOME/pilotbench and $XDG_CONFIG_HOME/pilotbench
// (Qt's AppDataLocation doubled them: organisation and application are both "pilotbench"), and a
// history left in the doubled folder moves to the new one once, never over one already there.
#include "util/AppPaths.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

namespace {

void write(const QString &path, const QByteArray &bytes)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(bytes);
}

QByteArray read(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

} // namespace

class TestAppPaths final : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    // A data and a configuration home of the test's own; each test takes fresh ones.
    QString home(const QString &name)
    {
        const QString data = m_dir.filePath(name + QStringLiteral("/data"));
        qputenv("XDG_DATA_HOME", data.toLocal8Bit());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath(name + QStringLiteral("/config")).toLocal8Bit());
        return data;
    }

private Q_SLOTS:
    void foldersAreNotDoubled()
    {
        const QString data = home(QStringLiteral("plain"));
        QCOMPARE(pb::appDataDir(), data + QStringLiteral("/pilotbench"));
        QVERIFY(QFileInfo(data + QStringLiteral("/pilotbench")).isDir());
        QCOMPARE(pb::appConfigDir(), m_dir.filePath(QStringLiteral("plain/config/pilotbench")));
        QCOMPARE(pb::defaultDatabasePath(), data + QStringLiteral("/pilotbench/history.sqlite"));
        QCOMPARE(pb::defaultLogPath(), data + QStringLiteral("/pilotbench/pilotbench.log"));
        QCOMPARE(pb::legacyAppDataDir(), data + QStringLiteral("/pilotbench/pilotbench"));
        QCOMPARE(pb::legacyAppConfigDir(), m_dir.filePath(QStringLiteral("plain/config/pilotbench/pilotbench")));
    }

    void legacyHistoryMovesWithItsJournal()
    {
        const QString data = home(QStringLiteral("move"));
        const QString legacy = data + QStringLiteral("/pilotbench/pilotbench/history.sqlite");
        write(legacy, "database");
        write(legacy + QStringLiteral("-wal"), "wal");
        write(legacy + QStringLiteral("-shm"), "shm");
        write(data + QStringLiteral("/pilotbench/pilotbench/checkpoints/step-1/manifest.json"), "{}");
        const QString moved = data + QStringLiteral("/pilotbench/history.sqlite");
        QCOMPARE(pb::defaultDatabasePath(), moved);
        QCOMPARE(read(moved), QByteArray("database"));
        QCOMPARE(read(moved + QStringLiteral("-wal")), QByteArray("wal"));
        QCOMPARE(read(moved + QStringLiteral("-shm")), QByteArray("shm"));
        QVERIFY(!QFile::exists(moved + QStringLiteral("-journal")));
        for (const char *suffix : {"", "-wal", "-shm"})
            QVERIFY2(!QFile::exists(legacy + QLatin1String(suffix)), suffix);
        // Only the history moves: recorded runs name their checkpoints where they are.
        QVERIFY(QFile::exists(data + QStringLiteral("/pilotbench/pilotbench/checkpoints/step-1/manifest.json")));
        QCOMPARE(pb::defaultDatabasePath(), moved);
    }

    void historyInTheNewPlaceIsNeverOverwritten()
    {
        const QString data = home(QStringLiteral("both"));
        const QString legacy = data + QStringLiteral("/pilotbench/pilotbench/history.sqlite");
        const QString current = data + QStringLiteral("/pilotbench/history.sqlite");
        write(legacy, "old");
        write(legacy + QStringLiteral("-wal"), "old wal");
        write(current, "new");
        QCOMPARE(pb::defaultDatabasePath(), current);
        QCOMPARE(read(current), QByteArray("new"));
        QVERIFY(!QFile::exists(current + QStringLiteral("-wal")));
        QCOMPARE(read(legacy), QByteArray("old"));
        QCOMPARE(read(legacy + QStringLiteral("-wal")), QByteArray("old wal"));
    }

    // A leftover WAL in the new place belongs to a database that was there: the legacy one stays.
    void strayJournalBlocksTheMove()
    {
        const QString data = home(QStringLiteral("stray"));
        const QString legacy = data + QStringLiteral("/pilotbench/pilotbench/history.sqlite");
        write(legacy, "old");
        write(data + QStringLiteral("/pilotbench/history.sqlite-wal"), "stray");
        QCOMPARE(pb::defaultDatabasePath(), data + QStringLiteral("/pilotbench/history.sqlite"));
        QCOMPARE(read(legacy), QByteArray("old"));
        QCOMPARE(read(data + QStringLiteral("/pilotbench/history.sqlite-wal")), QByteArray("stray"));
    }
};

QTEST_GUILESS_MAIN(TestAppPaths)
#include "tst_app_paths.moc"
