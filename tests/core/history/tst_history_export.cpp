// Export to JSON and CSV, and import on "another machine": exact round trip, duplicates skipped,
// malformed files refused with the field named and nothing written.
#include "core/history/HistoryTestUtil.h"
#include "history/HistoryExport.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

namespace {

void writeFile(const QString &path, const QByteArray &bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

} // namespace

class TestHistoryExport : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString m_source;
    int64_t m_base = 0, m_scaled = 0;

private Q_SLOTS:
    void initTestCase()
    {
        m_source = m_dir.filePath(QStringLiteral("server.sqlite"));
        HistoryWriter writer(m_source);
        RunStart base = test::pilotStart(QStringLiteral("llama-8b"), QStringLiteral("cuda:0"), 2048);
        base.tags = QStringList {QStringLiteral("rented")};
        base.notes = QStringLiteral("headless on the rented server");
        m_base = writer.beginRun(base);
        RunStart scaled = test::pilotStart(QStringLiteral("llama-8b"), QStringLiteral("cuda:0"), 2048);
        scaled.kind = QStringLiteral("scale");
        scaled.parentRunId = m_base;
        m_scaled = writer.beginRun(scaled);
        for (int64_t step = 1; step <= 5000; ++step)
            writer.appendSample(m_base, test::sampleAt(step));
        writer.appendSample(m_scaled, test::sampleAt(1));
        writer.appendPhase(m_base, PhaseMark {Phase::Train, 3, 100.5, 2000.25, 1500009, 3000000003});
        writer.appendValidation(m_base, ValidationResult {5000, 1.875, 16, 250.5});
        writer.appendCheckpoint(m_base, CheckpointWrite {5000, "/scratch/ckpt.pt", 987654321, 1234.5});
        PilotSummary summary;
        summary.verdict = Verdict::Fits;
        summary.mfu = 0.4375;
        writer.finishRun(m_base, summary);
        QVERIFY(writer.flush());
    }

    void jsonRoundTripIsExact()
    {
        const QString file = m_dir.filePath(QStringLiteral("export.json"));
        HistoryStore source(m_source);
        writeRunsJson(source, {m_base, m_scaled}, file);

        QTemporaryDir home;
        HistoryStore local(home.filePath(QStringLiteral("home.sqlite")));
        { HistoryWriter other(local.path()); other.beginRun(test::pilotStart(QStringLiteral("x"), QStringLiteral("cpu"), 8)); } // occupies id 1
        const ImportResult result = importRunsJson(local, file);
        QCOMPARE(result.importedRunIds.size(), size_t(2));
        QVERIFY(result.skipped.isEmpty());
        const int64_t id = result.importedRunIds[0];
        QVERIFY(id != m_base);

        const RunRecord a = source.run(m_base);
        const RunRecord b = local.run(id);
        QCOMPARE(b.uuid, a.uuid);
        QCOMPARE(b.originRunId, std::optional<int64_t>(m_base));
        QCOMPARE(b.originHost, QSysInfo::machineHostName());
        QCOMPARE(b.config, a.config);
        QCOMPARE(b.configHash, a.configHash);
        QCOMPARE(b.summary, a.summary);
        QCOMPARE(b.summary[QStringLiteral("mfu")].toDouble(), 0.4375);
        QCOMPARE(b.tags, a.tags);
        QCOMPARE(b.notes, a.notes);
        QCOMPARE(b.startedAt, a.startedAt);
        QCOMPARE(b.finishedAt, a.finishedAt);
        QCOMPARE(b.verdict, QStringLiteral("fits"));
        const auto sa = source.sampleList(m_base);
        const auto sb = local.sampleList(id);
        QCOMPARE(sb.size(), size_t(5000));
        for (size_t i = 0; i < sa.size(); ++i)
            QVERIFY2(test::sameSample(sa[i], sb[i]), qPrintable(QString::number(i)));
        QCOMPARE(local.phases(id).at(0).peakDeviceUsedBytes, int64_t(3000000003));
        QCOMPARE(local.phases(id).at(0).durationMs, 2000.25);
        QCOMPARE(local.validations(id).at(0).loss, 1.875);
        QCOMPARE(local.checkpoints(id).at(0).bytes, int64_t(987654321));
        // The scaling step still points at its baseline, by the new local id.
        QCOMPARE(local.run(result.importedRunIds[1]).parentRunId, std::optional<int64_t>(id));

        // Importing the same export again adds nothing and says why.
        const ImportResult again = importRunsJson(local, file);
        QVERIFY(again.importedRunIds.empty());
        QCOMPARE(again.skipped.size(), 2);
        QVERIFY2(again.skipped[0].contains(QStringLiteral("already in this history as run %1").arg(id)), qPrintable(again.skipped[0]));
        QCOMPARE(local.listRuns().size(), size_t(3));
    }

    void csvHasHeaderAndExactValues()
    {
        const QString file = m_dir.filePath(QStringLiteral("samples.csv"));
        HistoryStore source(m_source);
        writeSamplesCsv(source, {m_scaled}, file);
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = f.readAll().split('\n');
        QCOMPARE(lines.size(), 3); // header, one sample, trailing newline
        QCOMPARE(lines[0], QByteArray("run_id,step,phase,step_time_ms,forward_ms,backward_ms,optimizer_ms,data_wait_ms,allocated_bytes,"
                                      "reserved_bytes,peak_allocated_bytes,device_used_bytes,tokens,loss,lr,grad_norm"));
        // sampleAt(1): 40 + 1*0.25, 15.5 + 1, 20.25, 4 + 0.125, 0.5, 1000001, 2000002, 1500003, 3000000001, 1024,
        // 10 - 1/1024, 1e-4 * 1, 1 + 1/8.
        QCOMPARE(lines[1], QByteArray::number(qlonglong(m_scaled))
                 + ",1,warmup,40.25,16.5,20.25,4.125,0.5,1000001,2000002,1500003,3000000001,1024,9.9990234375,1e-04,1.125"); // shortest exact form
    }

    void malformedExportIsRefused_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("field");
        const QByteArray ok = R"({"format":"pilotbench-history-export","format_version":1,"host":"gpu-box","runs":[{"id":7,"uuid":"u-1","kind":"pilot","status":"done","started_at":"2025-01-01T00:00:00Z",RUN}]})";
        auto run = [&](const char *fields) { QByteArray j = ok; return j.replace("RUN", fields); };
        QTest::newRow("not json") << QByteArray("{\"format\": ") << QStringLiteral("offset");
        QTest::newRow("wrong format") << QByteArray(R"({"format":"other","format_version":1,"runs":[]})") << QStringLiteral("format:");
        QTest::newRow("newer format") << QByteArray(R"({"format":"pilotbench-history-export","format_version":9,"runs":[]})") << QStringLiteral("format_version");
        QTest::newRow("no runs") << QByteArray(R"({"format":"pilotbench-history-export","format_version":1})") << QStringLiteral("runs: is missing");
        QTest::newRow("bad kind") << QByteArray(ok).replace("\"pilot\"", "\"party\"").replace("RUN", "\"notes\":\"\"") << QStringLiteral("runs[0].kind");
        QTest::newRow("bad date") << QByteArray(ok).replace("2025-01-01T00:00:00Z", "yesterday").replace("RUN", "\"notes\":\"\"") << QStringLiteral("runs[0].started_at");
        QTest::newRow("short column") << run(R"("samples":{"step":[1,2],"phase":["train","train"],"step_time_ms":[1,2],"forward_ms":[1,2],"backward_ms":[1,2],"optimizer_ms":[1,2],"data_wait_ms":[1,2],"allocated_bytes":[1,2],"reserved_bytes":[1,2],"peak_allocated_bytes":[1,2],"device_used_bytes":[1,2],"tokens":[1,2],"loss":[1],"lr":[1,2],"grad_norm":[1,2]})")
                                      << QStringLiteral("runs[0].samples.loss");
        QTest::newRow("text loss") << run(R"("samples":{"step":[1],"phase":["train"],"step_time_ms":[1],"forward_ms":[1],"backward_ms":[1],"optimizer_ms":[1],"data_wait_ms":[1],"allocated_bytes":[1],"reserved_bytes":[1],"peak_allocated_bytes":[1],"device_used_bytes":[1],"tokens":[1],"loss":["nan"],"lr":[1],"grad_norm":[1]})")
                                   << QStringLiteral("runs[0].samples.loss[0]: must be a number");
        QTest::newRow("fractional bytes") << run(R"("samples":{"step":[1],"phase":["train"],"step_time_ms":[1],"forward_ms":[1],"backward_ms":[1],"optimizer_ms":[1],"data_wait_ms":[1],"allocated_bytes":[1.5],"reserved_bytes":[1],"peak_allocated_bytes":[1],"device_used_bytes":[1],"tokens":[1],"loss":[1],"lr":[1],"grad_norm":[1]})")
                                          << QStringLiteral("runs[0].samples.allocated_bytes[0]: must be an integer");
        QTest::newRow("bad phase mark") << run(R"("phases":[{"phase":"lunch","step":1,"start_ms":0,"duration_ms":1,"peak_allocated_bytes":1,"peak_device_used_bytes":1}])")
                                        << QStringLiteral("runs[0].phases[0].phase");
        QTest::newRow("checkpoint without bytes") << run(R"("checkpoints":[{"step":1,"path":"x","write_ms":1}])") << QStringLiteral("runs[0].checkpoints[0].bytes: is missing");
    }
    void malformedExportIsRefused()
    {
        QFETCH(QByteArray, json);
        QFETCH(QString, field);
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("bad.json"));
        writeFile(file, json);
        HistoryStore local(dir.filePath(QStringLiteral("home.sqlite")));
        try {
            importRunsJson(local, file);
            QFAIL("a malformed export was imported");
        } catch (const InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), file);
            QVERIFY2(QString::fromUtf8(e.what()).contains(field), e.what());
        }
        QVERIFY(local.listRuns().empty());
    }

    void failedImportWritesNothing()
    {
        // The second run is bad: the first must not be imported either.
        HistoryStore source(m_source);
        QJsonObject doc = exportRunsJson(source, {m_scaled, m_base});
        QJsonArray runs = doc[QStringLiteral("runs")].toArray();
        QJsonObject second = runs[1].toObject();
        second.insert(QStringLiteral("status"), QStringLiteral("exploded"));
        runs[1] = second;
        doc.insert(QStringLiteral("runs"), runs);
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("half.json"));
        writeFile(file, QJsonDocument(doc).toJson());
        HistoryStore local(dir.filePath(QStringLiteral("home.sqlite")));
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, importRunsJson(local, file));
        QVERIFY(local.listRuns().empty());
    }
};

QTEST_GUILESS_MAIN(TestHistoryExport)
#include "tst_history_export.moc"
