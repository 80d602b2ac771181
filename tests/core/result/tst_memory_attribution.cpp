// The one JSON form of a measured peak attribution: round trip, and malformed input named by field.
#include "result/MemoryAttribution.h"
#include "estimate/MemoryEstimate.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QtTest>

using namespace pb;

namespace {

MemoryAttribution sample()
{
    MemoryAttribution a;
    a.step = 3;
    a.device = "cuda:0";
    a.peakAllocatedBytes = 1000;
    a.peakPhase = "backward";
    a.peakSite = "head / aten::mm";
    a.parts[static_cast<size_t>(MemoryPart::TrainableWeights)] = 400;
    a.parts[static_cast<size_t>(MemoryPart::WeightCasts)] = 100;
    a.parts[static_cast<size_t>(MemoryPart::Logits)] = 300;
    a.parts[static_cast<size_t>(MemoryPart::Other)] = 200;
    a.sites = {{"forward", "head", "aten::mm", MemoryPart::Logits, 300, 1}, {"forward", "attention", "aten::_to_copy", MemoryPart::WeightCasts, 100, 4}};
    a.live = {{"forward", "attention", "aten::_to_copy", MemoryPart::WeightCasts, 25, 1, 0}, {"forward", "attention", "aten::_to_copy", MemoryPart::WeightCasts, 75, 1, 3},
              {"forward", "head", "aten::mm", MemoryPart::Logits, 300, 1, -1}};
    return a;
}

} // namespace

class TestMemoryAttribution : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void roundTrip()
    {
        const MemoryAttribution a = sample();
        const MemoryAttribution b = memoryAttributionFromJson(toJson(a), "m");
        QCOMPARE(b.step, a.step);
        QCOMPARE(b.device, a.device);
        QCOMPARE(b.peakAllocatedBytes, a.peakAllocatedBytes);
        QCOMPARE(b.peakSite, a.peakSite);
        QVERIFY(b.parts == a.parts);
        QCOMPARE(b.sites.size(), size_t(2));
        QCOMPARE(b.sites[1].part, MemoryPart::WeightCasts);
        QCOMPARE(b.sites[1].blocks, int64_t(4));
        QCOMPARE(b.sites[1].layer, int64_t(-1));
        // The live tensors in the order made, each with its layer (none for the head's).
        QCOMPARE(b.live.size(), size_t(3));
        QCOMPARE(b.live[0].layer, int64_t(0));
        QCOMPARE(b.live[1].layer, int64_t(3));
        QCOMPARE(b.live[1].bytes, int64_t(75));
        QCOMPARE(b.live[2].layer, int64_t(-1));
        QVERIFY(!toJson(a).value(QStringLiteral("live")).toArray().at(2).toObject().contains(QStringLiteral("layer")));
        // The summary keeps the largest sites only, and no live list.
        const MemoryAttribution summary = memoryAttributionFromJson(toJson(a, 1), "m");
        QCOMPARE(summary.sites.size(), size_t(1));
        QVERIFY(summary.live.empty());
        // A file written before the live list reads as one without it.
        QJsonObject older = toJson(a);
        older.remove(QStringLiteral("live"));
        QVERIFY(memoryAttributionFromJson(older, "m").live.empty());
    }

    void foldsIntoTheEstimatorsParts()
    {
        const MemoryBreakdown b = measuredBreakdown(sample());
        QCOMPARE(b.trainableWeights, int64_t(500)); // weight casts book as the estimator books autocast's copies
        QCOMPARE(b.logits, int64_t(300));
        QCOMPARE(b.blasWorkspaces, int64_t(200));   // "other": on CUDA, the allocator's BLAS workspaces
        QCOMPARE(b.tensors(), int64_t(1000));
    }

    void malformedNamesTheField_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("field");
        QTest::newRow("part name") << "sites.0.part" << QJsonValue(QStringLiteral("weights")) << "m.sites[0].part";
        QTest::newRow("negative bytes") << "sites.1.bytes" << QJsonValue(-5) << "m.sites[1].bytes";
        QTest::newRow("fractional") << "parts.logits" << QJsonValue(1.5) << "m.parts.logits";
        QTest::newRow("missing part") << "parts.gradients" << QJsonValue(QJsonValue::Undefined) << "m.parts.gradients";
        QTest::newRow("text") << "peak_phase" << QJsonValue(3) << "m.peak_phase";
        QTest::newRow("negative layer") << "live.1.layer" << QJsonValue(-2) << "m.live[1].layer";
        QTest::newRow("layer as text") << "live.0.layer" << QJsonValue(QStringLiteral("3")) << "m.live[0].layer";
        QTest::newRow("live not a list") << "live" << QJsonValue(7) << "m.live";
    }

    void malformedNamesTheField()
    {
        QFETCH(QString, path);
        QFETCH(QJsonValue, value);
        QFETCH(QString, field);
        QJsonObject json = toJson(sample());
        const QStringList keys = path.split(QLatin1Char('.'));
        if ((keys[0] == QLatin1String("sites") || keys[0] == QLatin1String("live")) && keys.size() == 3) {
            QJsonArray sites = json.value(keys[0]).toArray();
            QJsonObject site = sites[keys[1].toInt()].toObject();
            site.insert(keys[2], value);
            sites[keys[1].toInt()] = site;
            json.insert(keys[0], sites);
        } else if (keys[0] == QLatin1String("parts")) {
            QJsonObject parts = json.value(QStringLiteral("parts")).toObject();
            if (value.isUndefined())
                parts.remove(keys[1]);
            else
                parts.insert(keys[1], value);
            json.insert(QStringLiteral("parts"), parts);
        } else {
            json.insert(keys[0], value);
        }
        try {
            memoryAttributionFromJson(json, "m");
            QFAIL("accepted");
        } catch (const InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), field);
        }
    }
};

QTEST_GUILESS_MAIN(TestMemoryAttribution)
#include "tst_memory_attribution.moc"
