// Opening a history file: fresh creation, migration of every earlier schema version from its fixture,
// and refusal (file untouched) of newer, corrupt and foreign files.
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryDatabase.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QFile>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

namespace {

QString copyFixture(const QTemporaryDir &dir, const QString &name)
{
    const QString target = dir.filePath(name);
    QFile::copy(QStringLiteral(PB_TEST_DATA_DIR "/history/") + name, target);
    QFile::setPermissions(target, QFile::ReadOwner | QFile::WriteOwner);
    return target;
}

// A raw connection outside the history code, to prepare files the way another program would.
void rawExec(const QString &path, const QStringList &statements)
{
    {
        QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        for (const QString &s : statements)
            QVERIFY2(q.exec(s), qPrintable(s));
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
}

bool hasColumn(const HistoryStore &store, const char *table, const char *column)
{
    return store.connection().scalar(QStringLiteral("SELECT count(*) FROM pragma_table_info(?) WHERE name = ?"),
                                     {QLatin1String(table), QLatin1String(column)}).toInt() == 1;
}

} // namespace

class TestHistoryMigration : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void freshFileGetsCurrentSchema()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("sub/folder/history.sqlite"));
        HistoryStore store(path);
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA user_version")).toInt(), 4);
        QCOMPARE(HistoryStore::schemaVersion(), 4);
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA journal_mode")).toString(), QStringLiteral("wal"));
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA busy_timeout")).toInt(), 5000);
        for (const char *table : {"runs", "sample_chunks", "phase_marks", "validations", "checkpoints", "calibration_residuals"})
            QVERIFY2(store.connection().scalar(QStringLiteral("SELECT count(*) FROM sqlite_schema WHERE name = ?"), {QLatin1String(table)}).toInt() == 1, table);
        // v4 dropped the tables no code wrote.
        for (const char *table : {"estimates", "restore_results", "catalog_snapshots", "pilot_plans", "plan_stages"})
            QVERIFY2(store.connection().scalar(QStringLiteral("SELECT count(*) FROM sqlite_schema WHERE name = ?"), {QLatin1String(table)}).toInt() == 0, table);
        QCOMPARE(store.connection().scalar(QStringLiteral("SELECT count(*) FROM sqlite_schema WHERE name = 'samples'")).toInt(), 0);
        QVERIFY(store.listRuns().empty());
        QVERIFY(!QFileInfo::exists(path + QStringLiteral(".v0-backup")));
    }

    void migratesVersion1Fixture()
    {
        QTemporaryDir dir;
        const QString path = copyFixture(dir, QStringLiteral("v1.sqlite"));
        const QByteArray before = test::fileSha256(path);
        HistoryStore store(path);
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA user_version")).toInt(), 4);
        QVERIFY(hasColumn(store, "calibration_residuals", "framework_bytes"));

        // The backup is the untouched v1 file.
        const QString backup = path + QStringLiteral(".v1-backup");
        QVERIFY(QFileInfo::exists(backup));
        {
            QFile f(backup);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray header = f.read(100);
            QCOMPARE(int(uchar(header[63])), 1); // user_version, big-endian at offset 60
        }
        QVERIFY(!before.isEmpty());

        const auto runs = store.listRuns();
        QCOMPARE(runs.size(), size_t(2));
        QCOMPARE(runs[0].id, int64_t(2)); // newest first
        const RunRecord one = store.run(1);
        QCOMPARE(one.kind, QStringLiteral("pilot"));
        QCOMPARE(one.verdict, QStringLiteral("fits"));
        QCOMPARE(one.startedAt, QDateTime(QDate(2024, 3, 1), QTime(10, 0), Qt::UTC));
        QCOMPARE(one.model, QStringLiteral("tiny-llama"));
        QCOMPARE(one.configHash, std::string("aaaa1111"));
        QCOMPARE(one.config[QStringLiteral("train")].toObject()[QStringLiteral("seq_len")].toInt(), 256);
        QCOMPARE(one.summary[QStringLiteral("peak_allocated_bytes")].toInteger(), 123456789);
        QCOMPARE(one.sampleCount, int64_t(5));
        QVERIFY(one.tags.isEmpty());
        QVERIFY(!one.pinnedBaseline);
        QCOMPARE(one.uuid.size(), 36);
        QVERIFY(one.uuid != store.run(2).uuid);

        const SampleSeries s = store.samples(1);
        QCOMPARE(s.stepTimeMs, (std::vector<double> {50.25, 45.0, 41.5, 42.0, 40.0}));
        QCOMPARE(s.step, (std::vector<double> {1, 2, 3, 4, 5}));
        QCOMPARE(s.peakAllocatedBytes, (std::vector<double> {1500000, 1600000, 1700000, 1700000, 1800000}));
        QCOMPARE(s.loss.back(), 9.25);
        QCOMPARE(s.gradNorm[2], 1.125);
        QVERIFY(s.phase[1] == Phase::Warmup && s.phase[2] == Phase::Train);
        const auto two = store.sampleList(2);
        QCOMPARE(two.size(), size_t(1));
        QCOMPARE(two[0].allocatedBytes, int64_t(70000000000));
        QCOMPARE(two[0].tokens, int64_t(32768));

        const auto phases = store.phases(1);
        QCOMPARE(phases.size(), size_t(3));
        QVERIFY(phases[2].phase == Phase::Train);
        QCOMPARE(phases[2].startMs, 1295.25);
        QCOMPARE(store.validations(1).at(0).loss, 9.125);
        QCOMPARE(store.checkpoints(1).at(0).path, std::string("/tmp/pilot/ckpt-5.pt"));
        QCOMPARE(store.checkpoints(1).at(0).bytes, int64_t(4096000));

        // The migrated file takes new runs and their samples.
        store.addTag(1, QStringLiteral("baseline"));
        QCOMPARE(store.run(1).tags, QStringList {QStringLiteral("baseline")});
    }

    // A v2 file (made by taking v3's step back) keeps its residuals; their framework bytes are unknown.
    void migratesVersion2ToFrameworkBytes()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("v2.sqlite"));
        { HistoryStore fresh(path); }
        rawExec(path, {QStringLiteral("ALTER TABLE calibration_residuals DROP COLUMN framework_bytes"),
                       QStringLiteral("ALTER TABLE runs DROP COLUMN pid"), QStringLiteral("ALTER TABLE runs DROP COLUMN host"),
                       QStringLiteral("INSERT INTO calibration_residuals (created_at, backend, torch_version, device, config_hash,"
                                      " predicted_peak_bytes, measured_peak_bytes) VALUES ('2025-01-02T03:04:05Z', 'cuda', '2.5.1', 'NVIDIA H100', 'h', 100, 110)"),
                       QStringLiteral("PRAGMA user_version = 2")});
        HistoryStore store(path);
        QCOMPARE(store.connection().scalar(QStringLiteral("PRAGMA user_version")).toInt(), 4);
        QVERIFY(hasColumn(store, "calibration_residuals", "framework_bytes"));
        QVERIFY(QFileInfo::exists(path + QStringLiteral(".v2-backup")));
        const auto residuals = calibrationResiduals(store);
        QCOMPARE(residuals.size(), size_t(1));
        QCOMPARE(residuals[0].measuredPeakBytes, int64_t(110));
        QVERIFY(!residuals[0].frameworkBytes);
        addCalibrationResidual(store, {0, std::nullopt, {}, QStringLiteral("cuda"), QStringLiteral("2.5.1"), QStringLiteral("NVIDIA H100"), "h", 100, 120, 5});
        QCOMPARE(calibrationResiduals(store).back().frameworkBytes, std::optional<int64_t>(5));
    }

    void migrationIsIdempotentOnReopen()
    {
        QTemporaryDir dir;
        const QString path = copyFixture(dir, QStringLiteral("v1.sqlite"));
        { HistoryStore first(path); }
        HistoryStore second(path);
        QCOMPARE(second.sampleCount(1), int64_t(5));
        QVERIFY(!QFileInfo::exists(path + QStringLiteral(".v1-backup.1"))); // no second migration, no second backup
    }

    void newerVersionIsRefusedUntouched_data()
    {
        QTest::addColumn<int>("version");
        QTest::newRow("next") << 5;
        QTest::newRow("far future") << 42;
    }
    void newerVersionIsRefusedUntouched()
    {
        QFETCH(int, version);
        QTemporaryDir dir;
        const QString path = copyFixture(dir, QStringLiteral("v1.sqlite"));
        rawExec(path, {QStringLiteral("PRAGMA user_version = %1").arg(version)});
        const QByteArray before = test::fileSha256(path);
        try {
            HistoryStore store(path);
            QFAIL("a newer schema was opened");
        } catch (const InvalidInputError &e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.contains(path), e.what());
            QVERIFY2(message.contains(QStringLiteral("schema version %1").arg(version)), e.what());
            QVERIFY2(message.contains(QStringLiteral("up to 4")), e.what());
            QCOMPARE(e.code(), ExitCode::InvalidInput);
        }
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, HistoryWriter writer(path));
        QCOMPARE(test::fileSha256(path), before);
        QVERIFY(!QFileInfo::exists(path + QStringLiteral("-wal")));
    }

    void corruptFileIsReportedUntouched_data()
    {
        QTest::addColumn<qint64>("offset");
        QTest::addColumn<int>("length");
        QTest::newRow("header") << qint64(0) << 100;
        QTest::newRow("b-tree pages") << qint64(16384) << 16384 * 3;
    }
    void corruptFileIsReportedUntouched()
    {
        QFETCH(qint64, offset);
        QFETCH(int, length);
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("history.sqlite"));
        {
            HistoryWriter writer(path);
            const int64_t id = writer.beginRun(test::pilotStart(QStringLiteral("m"), QStringLiteral("cpu"), 128));
            for (int64_t step = 1; step <= 20000; ++step)
                writer.appendSample(id, test::sampleAt(step));
            QVERIFY(writer.flush());
        }
        QVERIFY(!QFileInfo::exists(path + QStringLiteral("-wal"))); // checkpointed on close
        {
            QFile f(path);
            QVERIFY(f.open(QIODevice::ReadWrite));
            QVERIFY(f.seek(offset));
            QByteArray garbage(length, '\0');
            for (int i = 0; i < length; ++i)
                garbage[i] = char((i * 37 + 11) & 0xff);
            QCOMPARE(f.write(garbage), qint64(length));
        }
        const QByteArray before = test::fileSha256(path);
        try {
            HistoryStore store(path);
            QFAIL("a corrupt file was opened");
        } catch (const InvalidInputError &e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.startsWith(path + QStringLiteral(": ")), e.what());
            QVERIFY2(message.contains(QStringLiteral("corrupt")), e.what());
            QVERIFY2(message.contains(QStringLiteral("untouched")), e.what());
        }
        QCOMPARE(test::fileSha256(path), before);
        QVERIFY(!QFileInfo::exists(path + QStringLiteral(".v0-backup")));
    }

    void foreignSqliteFileIsRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("other.sqlite"));
        rawExec(path, {QStringLiteral("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance REAL)"),
                       QStringLiteral("INSERT INTO accounts VALUES (1, 100.0)")});
        const QByteArray before = test::fileSha256(path);
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, HistoryStore store(path));
        QCOMPARE(test::fileSha256(path), before);
    }
};

QTEST_GUILESS_MAIN(TestHistoryMigration)
#include "tst_history_migration.moc"
