// Queries the views need: filters, tags and notes, the pinned baseline, overlay curves and config diffs.
#include "core/history/HistoryTestUtil.h"
#include "history/ConfigDiff.h"
#include "history/HistoryStore.h"
#include "history/HistoryWriter.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

Q_DECLARE_METATYPE(pb::RunFilter)

class TestHistoryStore : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString m_path;
    int64_t m_a = 0, m_b = 0, m_c = 0, m_estimate = 0;

    static QStringList ids(const std::vector<RunRecord> &runs)
    {
        QStringList out;
        for (const RunRecord &r : runs)
            out << QString::number(r.id);
        return out;
    }

private Q_SLOTS:
    void initTestCase()
    {
        m_path = m_dir.filePath(QStringLiteral("h.sqlite"));
        HistoryWriter writer(m_path);
        RunStart a = test::pilotStart(QStringLiteral("llama-8b"), QStringLiteral("cuda:0"), 2048);
        a.card = QStringLiteral("a100-80g");
        a.startedAt = QDateTime(QDate(2025, 1, 10), QTime(9, 0), Qt::UTC);
        RunStart b = test::pilotStart(QStringLiteral("llama-8b"), QStringLiteral("cuda:0"), 4096);
        b.card = QStringLiteral("h100-80g");
        b.startedAt = QDateTime(QDate(2025, 2, 10), QTime(9, 0), Qt::UTC);
        b.tags = QStringList {QStringLiteral("long-context")};
        RunStart c = test::pilotStart(QStringLiteral("tiny"), QStringLiteral("cpu"), 128);
        c.startedAt = QDateTime(QDate(2025, 3, 10), QTime(9, 0), Qt::UTC);
        RunStart e = test::pilotStart(QStringLiteral("llama-8b"), QString(), 2048);
        e.kind = QStringLiteral("estimate");
        e.startedAt = QDateTime(QDate(2025, 3, 11), QTime(9, 0), Qt::UTC);
        m_a = writer.beginRun(a);
        m_b = writer.beginRun(b);
        m_c = writer.beginRun(c);
        m_estimate = writer.beginRun(e);
        for (int64_t step = 1; step <= 30; ++step) {
            writer.appendSample(m_a, test::sampleAt(step));
            if (step <= 10)
                writer.appendSample(m_b, test::sampleAt(step));
        }
        PilotSummary fits;
        fits.verdict = Verdict::Fits;
        PilotSummary oom;
        oom.verdict = Verdict::DoesNotFit;
        writer.finishRun(m_a, fits);
        writer.finishRun(m_b, oom);
        writer.finishRun(m_c, fits);
        QVERIFY(writer.flush());
    }

    void filters_data()
    {
        QTest::addColumn<RunFilter>("filter");
        QTest::addColumn<QStringList>("expected"); // ids, newest first; filled in the test from names
        auto f = [](auto set) { RunFilter r; set(r); return r; };
        QTest::newRow("all") << RunFilter() << QStringList {QStringLiteral("e"), QStringLiteral("c"), QStringLiteral("b"), QStringLiteral("a")};
        QTest::newRow("model") << f([](RunFilter &r) { r.model = QStringLiteral("llama-8b"); }) << QStringList {QStringLiteral("e"), QStringLiteral("b"), QStringLiteral("a")};
        QTest::newRow("card") << f([](RunFilter &r) { r.card = QStringLiteral("h100-80g"); }) << QStringList {QStringLiteral("b")};
        QTest::newRow("verdict") << f([](RunFilter &r) { r.verdict = QStringLiteral("fits"); }) << QStringList {QStringLiteral("c"), QStringLiteral("a")};
        QTest::newRow("kind") << f([](RunFilter &r) { r.kind = QStringLiteral("estimate"); }) << QStringList {QStringLiteral("e")};
        QTest::newRow("status running") << f([](RunFilter &r) { r.status = QStringLiteral("running"); }) << QStringList {QStringLiteral("e")};
        QTest::newRow("tag") << f([](RunFilter &r) { r.tag = QStringLiteral("long-context"); }) << QStringList {QStringLiteral("b")};
        QTest::newRow("tag prefix does not match") << f([](RunFilter &r) { r.tag = QStringLiteral("long"); }) << QStringList {};
        QTest::newRow("date range") << f([](RunFilter &r) {
            r.startedFrom = QDateTime(QDate(2025, 2, 1), QTime(0, 0), Qt::UTC);
            r.startedTo = QDateTime(QDate(2025, 3, 10), QTime(9, 0), Qt::UTC); // inclusive
        }) << QStringList {QStringLiteral("c"), QStringLiteral("b")};
        QTest::newRow("limit") << f([](RunFilter &r) { r.limit = 2; }) << QStringList {QStringLiteral("e"), QStringLiteral("c")};
        QTest::newRow("device") << f([](RunFilter &r) { r.device = QStringLiteral("cpu"); }) << QStringList {QStringLiteral("c")};
    }
    void filters()
    {
        QFETCH(RunFilter, filter);
        QFETCH(QStringList, expected);
        HistoryStore store(m_path);
        QStringList expectedIds;
        for (const QString &name : expected)
            expectedIds << QString::number(name == QLatin1String("a") ? m_a : name == QLatin1String("b") ? m_b : name == QLatin1String("c") ? m_c : m_estimate);
        QCOMPARE(ids(store.listRuns(filter)), expectedIds);
    }

    void sampleCountsAndCurves()
    {
        HistoryStore store(m_path);
        QCOMPARE(store.run(m_a).sampleCount, int64_t(30));
        const auto curves = store.curves({m_a, m_b});
        QCOMPARE(curves.size(), size_t(2));
        QCOMPARE(curves[0].runId, m_a);
        QCOMPARE(curves[0].size(), size_t(30));
        QCOMPARE(curves[1].size(), size_t(10));
        QCOMPARE(curves[1].allocatedBytes[4], 1000005.0);
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, store.curves({m_a, 9999}));
    }

    void unknownRunNamesTheId()
    {
        HistoryStore store(m_path);
        QVERIFY(!store.findRun(424242));
        try {
            store.run(424242);
            QFAIL("no error");
        } catch (const InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), QStringLiteral("run 424242"));
        }
    }

    void tagsAndNotes()
    {
        HistoryStore store(m_path);
        store.addTag(m_c, QStringLiteral("smoke"));
        store.addTag(m_c, QStringLiteral("smoke")); // no duplicate
        store.addTag(m_c, QStringLiteral("cpu only"));
        QCOMPARE(store.run(m_c).tags, (QStringList {QStringLiteral("smoke"), QStringLiteral("cpu only")}));
        RunFilter byTag;
        byTag.tag = QStringLiteral("cpu only");
        QCOMPARE(ids(store.listRuns(byTag)), QStringList {QString::number(m_c)});
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, store.addTag(m_c, QStringLiteral("  ")));
        store.setNotes(m_c, QStringLiteral("loss spikes at step 20 \"quoted\""));
        QCOMPARE(store.run(m_c).notes, QStringLiteral("loss spikes at step 20 \"quoted\""));
        store.setTags(m_c, {});
        QVERIFY(store.run(m_c).tags.isEmpty());
    }

    void oneBaselinePerModel()
    {
        HistoryStore store(m_path);
        QVERIFY(!store.pinnedBaseline(QStringLiteral("llama-8b")));
        store.pinBaseline(m_a);
        store.pinBaseline(m_c);
        QCOMPARE(store.pinnedBaseline(QStringLiteral("llama-8b")), std::optional<int64_t>(m_a));
        store.pinBaseline(m_b); // same model: replaces a
        QCOMPARE(store.pinnedBaseline(QStringLiteral("llama-8b")), std::optional<int64_t>(m_b));
        QVERIFY(!store.run(m_a).pinnedBaseline);
        QCOMPARE(store.pinnedBaseline(QStringLiteral("tiny")), std::optional<int64_t>(m_c)); // other model kept
        store.unpinBaseline(m_b);
        QVERIFY(!store.pinnedBaseline(QStringLiteral("llama-8b")));
    }

    void configDiffOfTwoRuns()
    {
        HistoryStore store(m_path);
        const auto diffs = store.diffConfigs(m_a, m_b);
        QCOMPARE(diffs.size(), size_t(1)); // only seq_len differs: 2048 vs 4096
        QCOMPARE(diffs[0].path, QStringLiteral("train.seq_len"));
        QCOMPARE(diffs[0].left.toInt(), 2048);
        QCOMPARE(diffs[0].right.toInt(), 4096);
        QVERIFY(store.diffConfigs(m_a, m_estimate).empty());
    }

    void flattenedDiffOfNestedJson()
    {
        const QJsonObject left {{QStringLiteral("lora"), QJsonObject {{QStringLiteral("rank"), 8}, {QStringLiteral("targets"), QJsonArray {QStringLiteral("q"), QStringLiteral("v")}}}},
                                {QStringLiteral("precision"), QStringLiteral("bf16")},
                                {QStringLiteral("seed"), 1}};
        const QJsonObject right {{QStringLiteral("lora"), QJsonObject {{QStringLiteral("rank"), 8.0}, {QStringLiteral("targets"), QJsonArray {QStringLiteral("q"), QStringLiteral("k"), QStringLiteral("v")}}}},
                                 {QStringLiteral("precision"), QStringLiteral("fp16")},
                                 {QStringLiteral("extra"), QJsonObject {}}};
        const auto diffs = diffJson(left, right);
        QStringList paths;
        for (const auto &d : diffs)
            paths << d.path;
        // rank 8 == 8.0; targets[0] equal; [1] v->k; [2] new; precision changed; seed gone; extra added.
        QCOMPARE(paths, (QStringList {QStringLiteral("extra"), QStringLiteral("lora.targets[1]"), QStringLiteral("lora.targets[2]"),
                                      QStringLiteral("precision"), QStringLiteral("seed")}));
        QVERIFY(diffs[0].left.isUndefined() && diffs[0].right.isObject());
        QCOMPARE(diffs[1].left.toString(), QStringLiteral("v"));
        QCOMPARE(diffs[1].right.toString(), QStringLiteral("k"));
        QVERIFY(diffs[2].left.isUndefined());
        QCOMPARE(diffs[2].right.toString(), QStringLiteral("v"));
        QCOMPARE(diffs[4].left.toInt(), 1);
        QVERIFY(diffs[4].right.isUndefined());
    }
};

QTEST_GUILESS_MAIN(TestHistoryStore)
#include "tst_history_store.moc"
