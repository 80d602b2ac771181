// The staged pilot walked through the CLI as a user would, on the tiny preset on CPU: pilot, one
// scaling step, restore check and a recorded decision pass the four-stage checklist; runs that fail
// after they began are recorded failed; a run whose process died is found interrupted; the edited
// catalog in the configuration folder prices `compare` and `report`; the 8B full fine-tune is
// placed on NVIDIA cards once a sharded strategy may be chosen.
#include "e2e/CliProcess.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <csignal>
#include <memory>
#include <vector>

namespace {

struct Result {
    int code = -1;
    QByteArray out;
    QString err;
};

class Cli {
public:
    // `dataHome` empty: the test environment's data folder.
    explicit Cli(const QString &configHome, const QString &dataHome = {}) : m_configHome(configHome), m_dataHome(dataHome) {}
    Result operator()(const QStringList &args, int timeoutMs = 240000) const
    {
        const pbtest::CliBytes r = pbtest::runCliBytes(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn")} + args, timeoutMs, environment());
        return {r.exitCode, r.out, QString::fromUtf8(r.err)};
    }
    // The edited catalog's place for this test's own configuration folder (parallel tests must not
    // see it): $XDG_CONFIG_HOME/pilotbench/catalog.json.
    QString catalogPath() const { return m_configHome + QStringLiteral("/pilotbench/catalog.json"); }
    QProcessEnvironment environment() const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), m_configHome);
        if (!m_dataHome.isEmpty())
            env.insert(QStringLiteral("XDG_DATA_HOME"), m_dataHome);
        return env;
    }

private:
    QString m_configHome;
    QString m_dataHome;
};

QJsonObject json(const Result &r) { return QJsonDocument::fromJson(r.out).object(); }

QJsonArray runs(const Cli &cli, const QString &db)
{
    const Result r = cli({QStringLiteral("history"), QStringLiteral("--db"), db, QStringLiteral("--json")});
    return json(r).value(QStringLiteral("runs")).toArray();
}

} // namespace

class TestCliWorkflow : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir;
    QString path(const char *name) const { return m_dir.filePath(QLatin1String(name)); }
    Cli cli() const { return Cli(m_dir.filePath(QStringLiteral("config-home"))); }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // Stage by stage: the checklist says which evidence is missing until the decision is recorded.
    void checklistPassesFromRecordedEvidence()
    {
        const Cli run = cli();
        const QString db = path("stages.sqlite");
        const QStringList config {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db};

        Result r = run(QStringList {QStringLiteral("pilot"), QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run(QStringList {QStringLiteral("checklist"), QStringLiteral("--json")} + config);
        QCOMPARE(r.code, 1);
        QJsonArray stages = json(r).value(QStringLiteral("stages")).toArray();
        QCOMPARE(stages.size(), 4);
        QCOMPARE(stages[0].toObject().value(QStringLiteral("state")).toString(), QStringLiteral("passed"));
        QVERIFY2(stages[0].toObject().value(QStringLiteral("evidence")).toString().contains(QStringLiteral("(pilot, fp32)")), // the format its evidence ran in
                 qPrintable(stages[0].toObject().value(QStringLiteral("evidence")).toString()));
        QCOMPARE(stages[3].toObject().value(QStringLiteral("state")).toString(), QStringLiteral("missing"));

        r = run(QStringList {QStringLiteral("scale"), QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--device"), QStringLiteral("cpu"),
                             QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run(QStringList {QStringLiteral("restore-check"), QStringLiteral("--steps-before"), QStringLiteral("2"), QStringLiteral("--steps-after"), QStringLiteral("2"),
                             QStringLiteral("--checkpoint-dir"), path("ckpt")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run(QStringList {QStringLiteral("checklist"), QStringLiteral("--json")} + config);
        QCOMPARE(r.code, 1); // no decision yet
        stages = json(r).value(QStringLiteral("stages")).toArray();
        for (int i = 0; i < 3; ++i)
            QVERIFY2(stages[i].toObject().value(QStringLiteral("state")).toString() == QLatin1String("passed"), qPrintable(stages[i].toObject().value(QStringLiteral("evidence")).toString()));

        r = run(QStringList {QStringLiteral("compare"), QStringLiteral("--record"), QStringLiteral("--json")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject comparison = json(r);
        const int decisionRun = comparison.value(QStringLiteral("decision_run_id")).toInt();
        QVERIFY(decisionRun > 0);
        r = run(QStringList {QStringLiteral("checklist"), QStringLiteral("--json")} + config);
        QVERIFY2(r.code == 0, r.out.constData());
        QVERIFY(json(r).value(QStringLiteral("passed")).toBool());
        QCOMPARE(json(r).value(QStringLiteral("stages")).toArray()[3].toObject().value(QStringLiteral("run_id")).toInt(), decisionRun);

        // The recorded decision names the recommended row and the evidence it rests on.
        const QJsonObject recommended = comparison.value(QStringLiteral("rows")).toArray()[comparison.value(QStringLiteral("recommended_index")).toInt()].toObject();
        QJsonObject decision;
        for (const auto &v : runs(run, db))
            if (v.toObject().value(QStringLiteral("id")).toInt() == decisionRun)
                decision = v.toObject();
        QCOMPARE(decision.value(QStringLiteral("kind")).toString(), QStringLiteral("decision"));
        const QJsonObject summary = decision.value(QStringLiteral("summary")).toObject();
        QCOMPARE(summary.value(QStringLiteral("card")).toString(), recommended.value(QStringLiteral("card")).toString());
        QCOMPARE(summary.value(QStringLiteral("gpus")).toInt(), recommended.value(QStringLiteral("gpus")).toInt());
        QCOMPARE(summary.value(QStringLiteral("total_cost")).toDouble(), recommended.value(QStringLiteral("total_cost")).toDouble());
        const QJsonObject evidence = summary.value(QStringLiteral("evidence")).toObject();
        QCOMPARE(evidence.value(QStringLiteral("pilot_run_id")).toInt(), comparison.value(QStringLiteral("pilot_run_id")).toInt());
        QCOMPARE(evidence.value(QStringLiteral("restore_check_run_ids")).toArray().size(), 1);

        // The report of the pilot shows the decision.
        const QString pdf = path("stages.pdf");
        r = run({QStringLiteral("report"), QStringLiteral("--run"), QString::number(comparison.value(QStringLiteral("pilot_run_id")).toInt()), QStringLiteral("--db"), db,
                 QStringLiteral("--out"), pdf});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QString body = pbtest::pdfText(pdf);
        QVERIFY2(body.contains(QStringLiteral("Recorded decision (run %1").arg(decisionRun)), qPrintable(body.right(2000)));
    }

    // Errors after a run began: recorded failed with the message, never left running.
    void failuresAfterBeginAreRecordedFailed_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("kind");
        QTest::newRow("pilot on a missing device") << QStringList {QStringLiteral("pilot"), QStringLiteral("--device"), QStringLiteral("cuda:99"), QStringLiteral("--steps"), QStringLiteral("2")}
                                                   << QStringLiteral("pilot");
        QTest::newRow("restore check on a missing device")
            << QStringList {QStringLiteral("restore-check"), QStringLiteral("--device"), QStringLiteral("cuda:99"), QStringLiteral("--steps-before"), QStringLiteral("1"),
                            QStringLiteral("--steps-after"), QStringLiteral("1")}
            << QStringLiteral("restore-check");
    }
    void failuresAfterBeginAreRecordedFailed()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, kind);
        const Cli run = cli();
        const QString db = path(QTest::currentDataTag()).replace(QLatin1Char(' '), QLatin1Char('-')) + QStringLiteral(".sqlite");
        const Result r = run(args + QStringList {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db,
                                                 QStringLiteral("--checkpoint-dir"), path("ckpt-fail")});
        QVERIFY2(r.code != 0, r.out.constData());
        const QJsonArray list = runs(run, db);
        QCOMPARE(list.size(), 1);
        const QJsonObject rec = list[0].toObject();
        QCOMPARE(rec.value(QStringLiteral("kind")).toString(), kind);
        QCOMPARE(rec.value(QStringLiteral("status")).toString(), QStringLiteral("done"));
        QCOMPARE(rec.value(QStringLiteral("verdict")).toString(), QStringLiteral("failed"));
        QVERIFY2(rec.value(QStringLiteral("summary")).toObject().value(QStringLiteral("message")).toString().contains(QStringLiteral("cuda:99")),
                 qPrintable(QString::fromUtf8(QJsonDocument(rec).toJson())));
    }

    // A pilot killed with SIGKILL cannot record anything; the next open of the history finds its
    // process gone and marks the run interrupted.
    void killedRunIsFoundInterrupted()
    {
        const Cli run = cli();
        const QString db = path("killed.sqlite");
        QProcess p;
        p.setProcessEnvironment(run.environment());
        p.start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("pilot"), QStringLiteral("--config"),
                                              QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("100000"), QStringLiteral("--db"), db,
                                              QStringLiteral("--jsonl")});
        QVERIFY(p.waitForStarted());
        // Wait until it has begun its run and measured a step.
        bool stepped = false;
        for (int i = 0; i < 600 && !stepped; ++i) {
            p.waitForReadyRead(100);
            stepped = p.readAllStandardOutput().contains("\"step\"");
        }
        QVERIFY(stepped);
        const qint64 pid = p.processId();
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        QVERIFY(p.waitForFinished(30000));

        const QJsonArray list = runs(run, db);
        QCOMPARE(list.size(), 1);
        const QJsonObject rec = list[0].toObject();
        QCOMPARE(rec.value(QStringLiteral("status")).toString(), QStringLiteral("interrupted"));
        QCOMPARE(rec.value(QStringLiteral("verdict")).toString(), QStringLiteral("interrupted"));
        QVERIFY(rec.value(QStringLiteral("summary")).toObject().value(QStringLiteral("message")).toString().contains(QString::number(pid)));
    }

    // Two ranks started the way torchrun starts them (environment only, no `scale` launcher): rank 0
    // records the step, with the efficiency against a named baseline pilot.
    void scaleWorkersUnderAnotherLauncherRecord()
    {
        const Cli run = cli();
        const QString db = path("torchrun.sqlite");
        Result r = run({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--set"), QStringLiteral("train.grad_accum=2"),
                        QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--db"), db});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const int port = 20000 + static_cast<int>(QCoreApplication::applicationPid() % 20000);
        std::vector<std::unique_ptr<QProcess>> ranks;
        for (int rank = 0; rank < 2; ++rank) {
            auto p = std::make_unique<QProcess>();
            QProcessEnvironment env = run.environment();
            env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
            env.insert(QStringLiteral("MASTER_PORT"), QString::number(port));
            env.insert(QStringLiteral("RANK"), QString::number(rank));
            env.insert(QStringLiteral("LOCAL_RANK"), QString::number(rank));
            env.insert(QStringLiteral("WORLD_SIZE"), QStringLiteral("2"));
            env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
            p->setProcessEnvironment(env);
            p->start(QStringLiteral(PB_CLI_PATH), {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("scale-worker"), QStringLiteral("--config"),
                                                   QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--warmup"),
                                                   QStringLiteral("1"), QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--db"), db,
                                                   QStringLiteral("--baseline-run"), QStringLiteral("1"), QStringLiteral("--result"),
                                                   path("rank%1.json").arg(rank)});
            ranks.push_back(std::move(p));
        }
        for (auto &p : ranks) {
            QVERIFY(p->waitForFinished(180000));
            QVERIFY2(p->exitCode() == 0, p->readAllStandardError().constData());
        }
        const QJsonArray list = runs(run, db);
        QCOMPARE(list.size(), 2); // the baseline pilot and rank 0's scaling step
        const QJsonObject scale = list[0].toObject();
        QCOMPARE(scale.value(QStringLiteral("kind")).toString(), QStringLiteral("scale"));
        QCOMPARE(scale.value(QStringLiteral("verdict")).toString(), QStringLiteral("fits"));
        QCOMPARE(scale.value(QStringLiteral("sample_count")).toInt(), 4);
        const QJsonObject summary = scale.value(QStringLiteral("summary")).toObject();
        QCOMPARE(summary.value(QStringLiteral("gpus")).toInt(), 2);
        // Efficiency is the job's rate over twice the named baseline's (no timing bound: CI is loaded).
        const double baseline = list[1].toObject().value(QStringLiteral("summary")).toObject().value(QStringLiteral("tokens_per_s")).toDouble();
        QVERIFY(baseline > 0);
        QCOMPARE(summary.value(QStringLiteral("baseline_tokens_per_s")).toDouble(), baseline);
        const double efficiency = summary.value(QStringLiteral("scaling_efficiency")).toDouble();
        QVERIFY(qFuzzyCompare(efficiency, summary.value(QStringLiteral("tokens_per_s")).toDouble() / (2 * baseline)));
    }

    // DDP alone fits none of the A100, H100 and H200 for a full AdamW fine-tune of an 8B model; with
    // the strategy left to the decision, sharding over several of them fits and is recommended. (A
    // 180 GB B200 holds it alone: the catalog here is the shipped one cut to those three cards.)
    void fullFineTuneOf8bFindsShardedNvidia()
    {
        QFile shipped(QStringLiteral(PB_SOURCE_DIR "/resources/catalog.json"));
        QVERIFY(shipped.open(QIODevice::ReadOnly));
        QJsonObject catalog = QJsonDocument::fromJson(shipped.readAll()).object();
        QJsonArray three;
        for (const auto &c : catalog.value(QStringLiteral("cards")).toArray())
            if (QStringList {QStringLiteral("a100-sxm-80gb"), QStringLiteral("h100-sxm-80gb"), QStringLiteral("h200-sxm-141gb")}.contains(c.toObject().value(QStringLiteral("id")).toString()))
                three.append(c);
        QCOMPARE(three.size(), 3);
        catalog.insert(QStringLiteral("cards"), three);
        QFile file(path("three-cards.json"));
        QVERIFY(file.open(QIODevice::WriteOnly) && file.write(QJsonDocument(catalog).toJson()) > 0);
        file.close();
        const Cli run = cli();
        const QStringList base {QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:llama-3.1-8b"), QStringLiteral("--db"), path("8b.sqlite"),
                                QStringLiteral("--catalog"), file.fileName(), QStringLiteral("--json")};
        const Result ddp = run(base + QStringList {QStringLiteral("--strategy"), QStringLiteral("ddp")});
        QCOMPARE(ddp.code, 3); // nothing fits
        const Result automatic = run(base);
        QVERIFY2(automatic.code == 0, qPrintable(automatic.err));
        const QJsonObject o = json(automatic);
        QCOMPARE(o.value(QStringLiteral("strategy")).toString(), QStringLiteral("auto"));
        const int index = o.value(QStringLiteral("recommended_index")).toInt();
        QVERIFY(index >= 0);
        const QJsonObject best = o.value(QStringLiteral("rows")).toArray()[index].toObject();
        QVERIFY(best.value(QStringLiteral("fits")).toBool());
        QVERIFY(best.value(QStringLiteral("card_name")).toString().startsWith(QStringLiteral("NVIDIA")));
        QVERIFY(best.value(QStringLiteral("gpus")).toInt() > 1);
        const QString strategy = best.value(QStringLiteral("strategy")).toString();
        QVERIFY2(strategy == QLatin1String("fsdp") || strategy.startsWith(QLatin1String("zero")), qPrintable(strategy));
        QVERIFY(best.value(QStringLiteral("comm_ms_per_step")).toDouble() > 0);
        QVERIFY(o.value(QStringLiteral("recommendation")).toString().contains(QStringLiteral("because ddp needs")));
        for (const auto &v : o.value(QStringLiteral("rows")).toArray())
            QVERIFY(v.toObject().value(QStringLiteral("card_name")).toString().startsWith(QStringLiteral("NVIDIA")));
    }

    // The catalog edited in the GUI lives in the configuration folder; compare and report price with
    // it and say so; --catalog still names another; a broken edited catalog is refused by name.
    // A recorded decision holds while its catalog and its evidence do: a price edit or a newer pilot
    // turns stage 4 stale (checklist and report say why); recording again replaces it, the old
    // one kept in the history marked superseded.
    void decisionGoesStaleAndIsReplaced()
    {
        const Cli run = cli();
        const QString db = path("stale.sqlite");
        const QStringList config {QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db};
        auto stage4 = [&](const QStringList &extra = {}) {
            const Result c = run(QStringList {QStringLiteral("checklist"), QStringLiteral("--json")} + config + extra);
            return json(c).value(QStringLiteral("stages")).toArray().at(3).toObject();
        };
        Result r = run(QStringList {QStringLiteral("pilot"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run(QStringList {QStringLiteral("compare"), QStringLiteral("--record"), QStringLiteral("--json")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const int first = json(r).value(QStringLiteral("decision_run_id")).toInt();
        QCOMPARE(stage4().value(QStringLiteral("state")).toString(), QStringLiteral("passed"));

        // The built-in catalog with one price changed.
        r = run({QStringLiteral("catalog"), QStringLiteral("export")});
        QJsonObject catalog = json(r);
        QJsonArray cards = catalog.value(QStringLiteral("cards")).toArray();
        QJsonObject a100 = cards[0].toObject();
        QJsonObject prices = a100.value(QStringLiteral("prices")).toObject();
        QJsonObject onDemand = prices.value(QStringLiteral("on_demand")).toObject();
        onDemand.insert(QStringLiteral("gpus_1"), 0.49);
        prices.insert(QStringLiteral("on_demand"), onDemand);
        a100.insert(QStringLiteral("prices"), prices);
        cards[0] = a100;
        catalog.insert(QStringLiteral("cards"), cards);
        QFile edited(path("cheaper-a100.json"));
        QVERIFY(edited.open(QIODevice::WriteOnly) && edited.write(QJsonDocument(catalog).toJson()) > 0);
        edited.close();
        const QStringList cheaper {QStringLiteral("--catalog"), edited.fileName()};
        QJsonObject s = stage4(cheaper);
        QCOMPARE(s.value(QStringLiteral("state")).toString(), QStringLiteral("stale"));
        QVERIFY2(s.value(QStringLiteral("evidence")).toString().contains(QStringLiteral("the catalog changed since it was made")), qPrintable(s.value(QStringLiteral("evidence")).toString()));
        r = run(QStringList {QStringLiteral("checklist")} + config + cheaper);
        QCOMPARE(r.code, 1);
        const QString pdf = path("stale.pdf");
        r = run({QStringLiteral("report"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--db"), db, QStringLiteral("--out"), pdf, QStringLiteral("--catalog"), edited.fileName()});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QString body = pbtest::pdfText(pdf);
        QVERIFY2(body.contains(QStringLiteral("This decision is out of date: the catalog changed since it was made")), "the report does not say the decision is out of date");

        // A newer pilot of the config: stale on the catalog it was made on too.
        r = run(QStringList {QStringLiteral("pilot"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        s = stage4();
        QCOMPARE(s.value(QStringLiteral("state")).toString(), QStringLiteral("stale"));
        QVERIFY2(s.value(QStringLiteral("evidence")).toString().contains(QStringLiteral("measured the config since")), qPrintable(s.value(QStringLiteral("evidence")).toString()));

        // Recording again replaces it; the first stays, tagged.
        r = run(QStringList {QStringLiteral("compare"), QStringLiteral("--record"), QStringLiteral("--json")} + config);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const int second = json(r).value(QStringLiteral("decision_run_id")).toInt();
        s = stage4();
        QCOMPARE(s.value(QStringLiteral("state")).toString(), QStringLiteral("passed"));
        QCOMPARE(s.value(QStringLiteral("run_id")).toInt(), second);
        r = run({QStringLiteral("history"), QStringLiteral("show"), QString::number(first), QStringLiteral("--db"), db});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("superseded") && r.out.contains(QStringLiteral("superseded by decision run %1").arg(second).toUtf8()), r.out.constData());
    }

    void editedCatalogPricesCompareAndReport()
    {
        const Cli run = cli();
        Result r = run({QStringLiteral("catalog"), QStringLiteral("export")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QJsonObject catalog = json(r);
        QVERIFY(catalog.contains(QStringLiteral("modelled_on")));
        catalog.insert(QStringLiteral("modelled_on"), QStringLiteral("2031-02-03"));
        QFile edited(path("edited-catalog.json"));
        QVERIFY(edited.open(QIODevice::WriteOnly));
        edited.write(QJsonDocument(catalog).toJson());
        edited.close();
        r = run({QStringLiteral("catalog"), QStringLiteral("use"), edited.fileName()});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(QFile::exists(run.catalogPath()));
        QFile file(run.catalogPath());

        const QString db = path("catalog.sqlite");
        r = run({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--db"), db});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db, QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(json(r).value(QStringLiteral("catalog_date")).toString(), QStringLiteral("2031-02-03"));
        QCOMPARE(json(r).value(QStringLiteral("catalog_source")).toString(), run.catalogPath());

        const QString pdf = path("catalog.pdf");
        r = run({QStringLiteral("report"), QStringLiteral("--run"), QStringLiteral("1"), QStringLiteral("--db"), db, QStringLiteral("--out"), pdf});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QString body = pbtest::pdfText(pdf);
        QVERIFY2(body.contains(QStringLiteral("2031-02-03")), "the report does not name the edited catalog's date");

        r = run({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db, QStringLiteral("--json"),
                 QStringLiteral("--catalog"), QStringLiteral(":/catalog.json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(json(r).value(QStringLiteral("catalog_source")).toString(), QStringLiteral("built-in"));

        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write("{\"cards\": 3}");
        file.close();
        r = run({QStringLiteral("compare"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--db"), db});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(run.catalogPath()), qPrintable(r.err));
        r = run({QStringLiteral("catalog"), QStringLiteral("reset")});
        QCOMPARE(r.code, 0);
        QVERIFY(!QFile::exists(run.catalogPath()));
    }

    // Earlier versions doubled both folders (Qt's organisation/application, both "pilotbench"):
    // the history and the edited catalog move to $XDG_DATA_HOME/pilotbench and
    // $XDG_CONFIG_HOME/pilotbench on first use, and the commands use them there.
    void doubledFoldersMoveOnFirstUse()
    {
        QTemporaryDir home;
        const Cli run(home.filePath(QStringLiteral("config")), home.filePath(QStringLiteral("data")));
        const QString legacyDb = home.filePath(QStringLiteral("data/pilotbench/pilotbench/history.sqlite"));
        const QString db = home.filePath(QStringLiteral("data/pilotbench/history.sqlite"));
        Result r = run({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                        QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), legacyDb});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run({QStringLiteral("catalog"), QStringLiteral("export")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QJsonObject catalog = json(r);
        catalog.insert(QStringLiteral("modelled_on"), QStringLiteral("2032-04-05"));
        const QString legacyCatalog = home.filePath(QStringLiteral("config/pilotbench/pilotbench/catalog.json"));
        QVERIFY(QDir().mkpath(QFileInfo(legacyCatalog).absolutePath()));
        QFile file(legacyCatalog);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(QJsonDocument(catalog).toJson());
        file.close();

        r = run({QStringLiteral("history"), QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(json(r).value(QStringLiteral("database")).toString(), db);
        QCOMPARE(json(r).value(QStringLiteral("runs")).toArray().size(), 1);
        QVERIFY(!QFile::exists(legacyDb));

        r = run({QStringLiteral("catalog"), QStringLiteral("--json")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(json(r).value(QStringLiteral("source")).toString(), run.catalogPath());
        QCOMPARE(json(r).value(QStringLiteral("modelled_on")).toString(), QStringLiteral("2032-04-05"));
        QVERIFY(!QFile::exists(legacyCatalog));

        // A history recorded again where earlier versions kept it is left alone: one is in use.
        r = run({QStringLiteral("pilot"), QStringLiteral("--config"), QStringLiteral("preset:tiny"), QStringLiteral("--steps"), QStringLiteral("1"),
                 QStringLiteral("--warmup"), QStringLiteral("0"), QStringLiteral("--db"), legacyDb});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = run({QStringLiteral("history"), QStringLiteral("--json")});
        QCOMPARE(json(r).value(QStringLiteral("runs")).toArray().size(), 1);
        QVERIFY(QFile::exists(legacyDb));
    }
};

QTEST_GUILESS_MAIN(TestCliWorkflow)
#include "tst_cli_workflow.moc"
