// One rank in-process: with a real Gloo process group of one (TCPStore rendezvous on a free port)
// the pilot must end with exactly the parameters of the plain single-device pilot (the mean of one
// gradient is itself), and the parameter dump must hold every parameter.
#include "config/Presets.h"
#include "dist/DistributedPilot.h"
#include "dist/Rendezvous.h"
#include "engine/PilotEngine.h"
#include "util/Errors.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>

using namespace pb;

namespace {
PilotOptions tinyOptions()
{
    PilotOptions o;
    o.device = "cpu";
    o.steps = 3;
    o.warmupSteps = 1;
    o.cpuThreads = 1;
    o.parameterChecksum = true;
    return o;
}
} // namespace

class TestDistributedPilot : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void singleRankGroupMatchesPlainPilot_data()
    {
        QTest::addColumn<bool>("processGroup");
        QTest::addColumn<QString>("strategy");
        QTest::newRow("ddp, gloo group of one") << true << QStringLiteral("ddp");
        QTest::newRow("zero2, gloo group of one") << true << QStringLiteral("zero2");
        QTest::newRow("fsdp, gloo group of one") << true << QStringLiteral("fsdp");
        QTest::newRow("fsdp, no group") << false << QStringLiteral("fsdp");
        QTest::newRow("no group") << false << QStringLiteral("ddp");
    }

    void singleRankGroupMatchesPlainPilot()
    {
        QFETCH(bool, processGroup);
        QFETCH(QString, strategy);
        const RunConfig config = presetConfig(QStringLiteral("tiny"));
        PilotEngine engine;
        const PilotRun plain = engine.run(config, tinyOptions());
        QCOMPARE(plain.summary.verdict, Verdict::Fits);
        QVERIFY(!plain.parameterChecksum.empty());

        QTemporaryDir dir;
        DistributedPilotOptions dist;
        if (processGroup)
            dist.rendezvous.masterPort = freeLocalPort();
        dist.timeoutSeconds = 60;
        dist.strategy = strategy.toStdString();
        dist.parameterDumpPath = dir.filePath(QStringLiteral("params.f32")).toStdString();
        const DistributedPilotResult result = runDistributedPilot(config, tinyOptions(), dist);
        QCOMPARE(result.run.summary.verdict, Verdict::Fits);
        QCOMPARE(result.collective, std::string(processGroup ? "gloo" : "none"));
        QCOMPARE(result.run.parameterChecksum, plain.parameterChecksum);
        QCOMPARE(result.run.losses, plain.losses);
        QCOMPARE(result.run.summary.measuredSteps, int64_t(3));
        QCOMPARE(result.strategy, strategy.toStdString());
        QCOMPARE(result.optimizerParameters, result.parameterCount); // one rank owns every parameter (all trainable)
        QVERIFY(!result.cpuAffinity.empty());

        QFile dump(QString::fromStdString(dist.parameterDumpPath));
        QVERIFY(dump.open(QIODevice::ReadOnly));
        const QByteArray bytes = dump.readAll();
        QCOMPARE(int64_t(bytes.size()), result.parameterCount * int64_t(sizeof(float)));
        double sum = 0;
        for (qsizetype i = 0; i < bytes.size(); i += 4) {
            float v;
            std::memcpy(&v, bytes.constData() + i, sizeof v);
            sum += v;
        }
        QVERIFY2(std::abs(sum - result.parameterSum) <= 1e-6 * result.parameterAbsSum, qPrintable(QStringLiteral("%1 vs %2").arg(sum).arg(result.parameterSum)));
    }

    void badStrategyRefused()
    {
        DistributedPilotOptions dist;
        dist.strategy = "zero9";
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, runDistributedPilot(presetConfig(QStringLiteral("tiny")), tinyOptions(), dist));
    }

    void badRankRefused()
    {
        DistributedPilotOptions dist;
        dist.rendezvous.rank = 1; // of a world of 1
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, runDistributedPilot(presetConfig(QStringLiteral("tiny")), tinyOptions(), dist));
    }
};

QTEST_GUILESS_MAIN(TestDistributedPilot)
#include "tst_distributed_pilot.moc"
