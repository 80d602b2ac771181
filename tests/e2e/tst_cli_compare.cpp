// `pilotbench-cli compare` as a user runs it: JSON keys and types, exactly one recommended row when
// something fits, the newest pilot of the same config used as measured evidence, and bad input
// refused with exit 2 naming the option.
#include "e2e/CliProcess.h"
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

using Result = pbtest::CliResult;

Result cli(const QStringList &args) { return pbtest::runCli(args); }

QJsonObject json(const Result &r) { return QJsonDocument::fromJson(r.out.toUtf8()).object(); }

} // namespace

class TestCliCompare : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString db() const { return m_dir.filePath(QStringLiteral("history.sqlite")); }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const Result r = cli({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("5"),
                              QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--db"), db()});
        QVERIFY2(r.code == 0, qPrintable(r.err));
    }

    void jsonRows()
    {
        const Result r = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db(), QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject o = json(r);
        const QJsonArray rows = o.value(QStringLiteral("rows")).toArray();
        QCOMPARE(rows.size(), 40); // 10 cards x 1, 2, 4, 8 GPUs
        QVERIFY(o.value(QStringLiteral("recommendation")).toString().startsWith(QStringLiteral("Rent ")));
        QCOMPARE(o.value(QStringLiteral("catalog_date")).toString(), QStringLiteral("2026-12-02"));
        QCOMPARE(o.value(QStringLiteral("catalog_revision")).toString().size(), 16);
        QCOMPARE(o.value(QStringLiteral("precision")).toString(), QStringLiteral("fp32"));
        QVERIFY(o.value(QStringLiteral("fp8_speedup")).isNull());
        QVERIFY(o.value(QStringLiteral("assumptions")).isArray());
        QCOMPARE(o.value(QStringLiteral("pilot_run_id")).toInt(), 1); // the pilot of the same config
        int recommended = 0;
        for (const auto &v : rows) {
            const QJsonObject row = v.toObject();
            QVERIFY(row.value(QStringLiteral("card")).isString());
            for (const char *key : {"gpus", "max_micro_batch", "step_time_ms", "tokens_per_s", "job_hours", "window_hours", "total_cost", "cost_per_million_tokens"})
                QVERIFY2(row.value(QLatin1String(key)).isDouble(), key);
            for (const char *key : {"fits", "recommended", "meets_deadline"})
                QVERIFY2(row.value(QLatin1String(key)).isBool(), key);
            const QString basis = row.value(QStringLiteral("step_time_basis")).toString();
            // A CPU pilot ran on no catalog card: every figure is projected.
            QCOMPARE(basis, QStringLiteral("modelled"));
            QVERIFY(row.value(QStringLiteral("step_time_ms")).toDouble() > 0);
            // cost per million = total / (planned tokens / 1e6)
            const double perM = row.value(QStringLiteral("total_cost")).toDouble() / (o.value(QStringLiteral("planned_tokens")).toDouble() / 1e6);
            QVERIFY(qAbs(row.value(QStringLiteral("cost_per_million_tokens")).toDouble() - perM) < 1e-9);
            recommended += row.value(QStringLiteral("recommended")).toBool() ? 1 : 0;
        }
        QCOMPARE(recommended, 1);
    }

    void oneCountAndTerm()
    {
        const Result r = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db(), QStringLiteral("--gpus"),
                              QStringLiteral("2"), QStringLiteral("--term"), QStringLiteral("1w"), QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonArray rows = json(r).value(QStringLiteral("rows")).toArray();
        QCOMPARE(rows.size(), 10);
        for (const auto &v : rows) {
            QCOMPARE(v.toObject().value(QStringLiteral("gpus")).toInt(), 2);
            QCOMPARE(v.toObject().value(QStringLiteral("term")).toString(), QStringLiteral("1w"));
            QCOMPARE(v.toObject().value(QStringLiteral("strategy")).toString(), QStringLiteral("ddp"));
        }
    }

    // ZeRO-2's rows follow the bucket size the user names (DeepSpeed's 954 MiB against DDP's 25): each
    // row heavier per GPU, the H100's exactly the total `estimate` gives at each size (whose tensor
    // peak is two buckets' difference higher: tst_cli_estimate), the assumption saying which; a DDP
    // row is untouched.
    void zero2RowsFollowTheBucketSize()
    {
        const QStringList model {QStringLiteral("--config"), QStringLiteral("preset:llama-3.1-8b"), QStringLiteral("--set"), QStringLiteral("train.mode=full"),
                                 QStringLiteral("--set"), QStringLiteral("train.recompute=true"), QStringLiteral("--set"), QStringLiteral("train.micro_batch=1"),
                                 QStringLiteral("--gpus"), QStringLiteral("8"), QStringLiteral("--json")};
        auto rows = [&](const QString &strategy, const QString &bucket, QJsonArray *assumptions = nullptr) {
            const Result r = cli(QStringList {QStringLiteral("compare")} + model +
                                 QStringList {QStringLiteral("--db"), m_dir.filePath(QStringLiteral("absent.sqlite")), QStringLiteral("--strategy"), strategy,
                                              QStringLiteral("--bucket-mb"), bucket});
            if (assumptions)
                *assumptions = json(r).value(QStringLiteral("assumptions")).toArray();
            return json(r).value(QStringLiteral("rows")).toArray();
        };
        auto estimated = [&](const QString &bucket) {
            const Result r = cli(QStringList {QStringLiteral("estimate")} + model +
                                 QStringList {QStringLiteral("--card"), QStringLiteral("h100-sxm-80gb"), QStringLiteral("--strategy"), QStringLiteral("zero2"),
                                              QStringLiteral("--bucket-mb"), bucket, QStringLiteral("--no-calibration")});
            return json(r).value(QStringLiteral("estimates")).toArray().at(0).toObject().value(QStringLiteral("total_bytes")).toDouble();
        };
        QJsonArray said;
        const QJsonArray small = rows(QStringLiteral("zero2"), QStringLiteral("25")), large = rows(QStringLiteral("zero2"), QStringLiteral("954"), &said);
        QCOMPARE(small.size(), 10);
        QCOMPARE(large.size(), small.size());
        int h100 = 0;
        for (int i = 0; i < small.size(); ++i) {
            const QJsonObject a = small.at(i).toObject(), b = large.at(i).toObject();
            QCOMPARE(a.value(QStringLiteral("strategy")).toString(), QStringLiteral("zero2"));
            QVERIFY(b.value(QStringLiteral("peak_bytes")).toDouble() - a.value(QStringLiteral("peak_bytes")).toDouble() >= 2.0 * (954 - 25) * 1024 * 1024);
            if (a.value(QStringLiteral("card")).toString() == QLatin1String("h100-sxm-80gb")) {
                ++h100;
                QCOMPARE(a.value(QStringLiteral("peak_bytes")).toDouble(), estimated(QStringLiteral("25")));
                QCOMPARE(b.value(QStringLiteral("peak_bytes")).toDouble(), estimated(QStringLiteral("954")));
            }
        }
        QCOMPARE(h100, 1);
        QVERIFY2(said.toVariantList().contains(QStringLiteral("ZeRO-1/2 reduce gradients through a pair of 954 MiB buckets per GPU (DDP's bucket_cap_mb is 25; "
                                                              "DeepSpeed's stage 2 defaults to 954 MiB of bf16)")),
                 qPrintable(QJsonDocument(said).toJson()));
        const QJsonArray ddpSmall = rows(QStringLiteral("ddp"), QStringLiteral("25")), ddpLarge = rows(QStringLiteral("ddp"), QStringLiteral("954"));
        QCOMPARE(ddpSmall.size(), 10);
        for (int i = 0; i < ddpSmall.size(); ++i)
            QCOMPARE(ddpLarge.at(i).toObject().value(QStringLiteral("peak_bytes")).toDouble(), ddpSmall.at(i).toObject().value(QStringLiteral("peak_bytes")).toDouble());
    }

    void withoutHistoryNoPilot()
    {
        const Result r = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"),
                              m_dir.filePath(QStringLiteral("absent.sqlite")), QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(json(r).value(QStringLiteral("pilot_run_id")).isNull());
    }

    void textTable()
    {
        const Result r = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db()});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains(QStringLiteral("<- recommended")));
        QVERIFY(r.out.contains(QStringLiteral("not a quote")));
        QCOMPARE(r.out.count(QStringLiteral("<- recommended")), 1);
        QVERIFY(r.out.contains(QStringLiteral("Numerical format: fp32.")));
        QVERIFY2(!r.out.contains(QStringLiteral("0.0 h")), "a job of seconds reads in its own unit"); // tiny: a rental window of milliseconds
    }

    // The text output opens with the model compared: its layers by attention kind, its experts and
    // its parameters (describeModelSummary, tst_model_traits_text); a hybrid names its Gated DeltaNet layers.
    void textNamesTheModel_data()
    {
        QTest::addColumn<QStringList>("config");
        QTest::addColumn<QString>("model");
        QTest::newRow("tiny") << QStringList {QStringLiteral("preset:tiny")} << QStringLiteral("Model: llama: 2 layers; 125,248 parameters\n");
        QTest::newRow("qwen3.5-9b") << QStringList {QStringLiteral("preset:qwen3.5-9b")}
                                    << QStringLiteral("Model: qwen3_5_text: 24 Gated DeltaNet layers of 32 (full attention on every 4th layer); 8,953,803,264 parameters\n");
        // Qwen3-Next-80B-A3B cut to 8 layers and 16 experts: the full one takes a minute to compare
        // at 8 GPUs (tst_model_traits_text checks its line).
        QTest::newRow("qwen3-next, 8 layers, 16 experts")
            << QStringList {QStringLiteral("preset:qwen3-next-80b-a3b"), QStringLiteral("--set"), QStringLiteral("model.layers=8"), QStringLiteral("--set"),
                            QStringLiteral("model.moe.experts=16")}
            << QStringLiteral("Model: qwen3_next: 6 Gated DeltaNet layers of 8 (full attention on every 4th layer); 16 experts, 10 per token, and a shared expert; "
                              "1,307,299,968 parameters, 1,156,305,024 active per token\n");
        QTest::newRow("moonlight-16b-a3b") << QStringList {QStringLiteral("preset:moonlight-16b-a3b")}
                                           << QStringLiteral("Model: deepseek_v3: 27 layers of multi-head latent attention; 64 experts, 6 per token, and a shared expert "
                                                             "(26 of 27 layers sparse); 15,960,108,544 parameters, 2,914,774,528 active per token\n");
    }
    void textNamesTheModel()
    {
        QFETCH(QStringList, config);
        QFETCH(QString, model);
        const Result r = cli(QStringList {QStringLiteral("compare"), QStringLiteral("--config")} + config +
                             QStringList {QStringLiteral("--gpus"), QStringLiteral("8"), QStringLiteral("--db"), m_dir.filePath(QStringLiteral("absent.sqlite"))});
        QVERIFY2(r.code == 0 || r.code == 3, qPrintable(r.err));
        QVERIFY2(r.out.startsWith(model), qPrintable(r.out.left(400)));
    }

    void nothingFitsExitsThree()
    {
        // Full fine-tuning of a 70B model needs about a terabyte of model states: no single card holds it.
        const Result r = cli({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:llama-3.1-70b"), QStringLiteral("--gpus"), QStringLiteral("1"),
                              QStringLiteral("--db"), m_dir.filePath(QStringLiteral("absent.sqlite")), QStringLiteral("--json")});
        QCOMPARE(r.code, 3);
        const QJsonObject o = json(r);
        QCOMPARE(o.value(QStringLiteral("rows")).toArray().size(), 10);
        for (const auto &v : o.value(QStringLiteral("rows")).toArray()) {
            QCOMPARE(v.toObject().value(QStringLiteral("fits")).toBool(), false);
            QCOMPARE(v.toObject().value(QStringLiteral("recommended")).toBool(), false);
        }
        QCOMPARE(o.value(QStringLiteral("recommended_index")).toInt(), -1);
        QVERIFY(o.value(QStringLiteral("recommendation")).toString().startsWith(QStringLiteral("No configuration fits")));
    }

    void badInput_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("field");
        QTest::newRow("term") << QStringList {QStringLiteral("--term"), QStringLiteral("2w")} << QStringLiteral("--term");
        QTest::newRow("gpus 3") << QStringList {QStringLiteral("--gpus"), QStringLiteral("3")} << QStringLiteral("--gpus");
        QTest::newRow("gpus word") << QStringList {QStringLiteral("--gpus"), QStringLiteral("two")} << QStringLiteral("--gpus");
        QTest::newRow("strategy") << QStringList {QStringLiteral("--strategy"), QStringLiteral("pipeline")} << QStringLiteral("--strategy");
        QTest::newRow("run") << QStringList {QStringLiteral("--run"), QStringLiteral("99")} << QStringLiteral("--run");
        QTest::newRow("bucket 0") << QStringList {QStringLiteral("--bucket-mb"), QStringLiteral("0")} << QStringLiteral("--bucket-mb");
        QTest::newRow("bucket word") << QStringList {QStringLiteral("--bucket-mb"), QStringLiteral("large")} << QStringLiteral("--bucket-mb");
        QTest::newRow("config field") << QStringList {QStringLiteral("--set"), QStringLiteral("train.seq_len=0")} << QStringLiteral("train.seq_len");
    }

    void badInput()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, field);
        const Result r = cli(QStringList {QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db()} + args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(field), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestCliCompare)
#include "tst_cli_compare.moc"
