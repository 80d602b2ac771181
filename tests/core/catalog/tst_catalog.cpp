// Loading the catalog: the shipped figures, strict refusal of bad files with the field named, and
// the previous catalog kept when a replacement is refused.
#include "catalog/Catalog.h"
#include "catalog/CatalogJson.h"
#include "util/Errors.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QDate>
#include <QtTest>

namespace {

QJsonObject builtInJson()
{
    QFile file(pb::builtInCatalogPath());
    if (!file.open(QIODevice::ReadOnly))
        qFatal("cannot read the built-in catalog");
    return QJsonDocument::fromJson(file.readAll()).object();
}

// Applies `action` at a path such as "cards[2].prices.terms.1w.gpus_4": "remove" drops the key,
// "set" puts `value` there (adding the key when absent).
QJsonValue edit(QJsonValue node, QStringList segments, const QString &action, const QJsonValue &value)
{
    static const QRegularExpression indexed(QStringLiteral("^(.*)\\[([0-9]+)\\]$"));
    const QString head = segments.takeFirst();
    const auto m = indexed.match(head);
    if (m.hasMatch()) {
        QJsonObject object = node.toObject();
        QJsonArray array = object.value(m.captured(1)).toArray();
        const int i = m.captured(2).toInt();
        if (segments.isEmpty())
            array[i] = value;
        else
            array[i] = edit(array[i], segments, action, value);
        object.insert(m.captured(1), array);
        return object;
    }
    QJsonObject object = node.toObject();
    if (segments.isEmpty()) {
        if (action == QLatin1String("remove"))
            object.remove(head);
        else
            object.insert(head, value);
    } else {
        object.insert(head, edit(object.value(head), segments, action, value));
    }
    return object;
}

QString writeFile(const QTemporaryDir &dir, const QString &name, const QByteArray &bytes)
{
    const QString path = dir.filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size())
        qFatal("cannot write the fixture");
    return path;
}

QJsonValue parsed(const char *json) { return QJsonDocument::fromJson(QByteArray("[") + json + "]").array().at(0); }

} // namespace

class TestCatalog : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void builtInHasTheDatasheetFigures_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<qint64>("memoryBytes");
        QTest::addColumn<double>("bandwidthTbps");
        QTest::addColumn<double>("bf16Tflops");
        QTest::addColumn<double>("fp8Tflops");   // 0: none
        QTest::addColumn<double>("interconnectGBps");
        QTest::addColumn<QString>("computeCapability");
        QTest::addColumn<QString>("stack");
        QTest::addColumn<double>("onDemand1");
        // memory_bytes = nvidia-smi / amd-smi MiB x 1048576.
        QTest::newRow("A100") << "a100-sxm-80gb" << qint64(81920) * 1048576 << 2.039 << 312.0 << 0.0 << 600.0 << "8.0" << "cuda" << 1.89;
        QTest::newRow("H100") << "h100-sxm-80gb" << qint64(81559) * 1048576 << 3.35 << 989.0 << 1979.0 << 900.0 << "9.0" << "cuda" << 2.95;
        QTest::newRow("H200") << "h200-sxm-141gb" << qint64(143771) * 1048576 << 4.8 << 989.0 << 1979.0 << 900.0 << "9.0" << "cuda" << 3.65;
        QTest::newRow("MI300X") << "mi300x-192gb" << qint64(196592) * 1048576 << 5.3 << 1307.4 << 2614.9 << 896.0 << "gfx942" << "rocm" << 3.19;
        // The cards of 2026 (dense figures; NVIDIA's sparse ones halved).
        QTest::newRow("B200") << "b200-sxm-180gb" << qint64(183359) * 1048576 << 7.7 << 2250.0 << 4500.0 << 1800.0 << "10.0" << "cuda" << 6.49;
        QTest::newRow("H200 NVL") << "h200-nvl-141gb" << qint64(143771) * 1048576 << 4.8 << 835.5 << 1670.5 << 900.0 << "9.0" << "cuda" << 3.29;
        QTest::newRow("MI325X") << "mi325x-256gb" << qint64(262128) * 1048576 << 6.0 << 1307.4 << 2614.9 << 896.0 << "gfx942" << "rocm" << 3.49;
        QTest::newRow("MI355X") << "mi355x-288gb" << qint64(294896) * 1048576 << 8.0 << 2516.6 << 5033.2 << 1075.0 << "gfx950" << "rocm" << 4.47;
        QTest::newRow("L40S") << "l40s-48gb" << qint64(46068) * 1048576 << 0.864 << 362.05 << 733.0 << 64.0 << "8.9" << "cuda" << 1.29;
        QTest::newRow("RTX PRO 6000") << "rtx-pro-6000-96gb" << qint64(97887) * 1048576 << 1.597 << 500.0 << 1000.0 << 128.0 << "12.0" << "cuda" << 2.49;
    }
    void builtInHasTheDatasheetFigures()
    {
        QFETCH(QString, id);
        QFETCH(qint64, memoryBytes);
        QFETCH(double, bandwidthTbps);
        QFETCH(double, bf16Tflops);
        QFETCH(double, fp8Tflops);
        QFETCH(double, interconnectGBps);
        QFETCH(QString, computeCapability);
        QFETCH(QString, stack);
        QFETCH(double, onDemand1);
        const pb::Catalog catalog = pb::builtInCatalog();
        QCOMPARE(catalog.modelledOn, std::string("2026-12-02"));
        QVERIFY(QString::fromStdString(catalog.notice).startsWith(QStringLiteral("Locally modelled catalog, not a quote")));
        const pb::CardSpec &card = catalog.card(id.toStdString());
        QCOMPARE(card.memoryBytes, memoryBytes);
        QCOMPARE(card.memoryBandwidthTbps, bandwidthTbps);
        QCOMPARE(card.bf16DenseTflops, bf16Tflops);
        QCOMPARE(card.fp8DenseTflops.value_or(0.0), fp8Tflops);
        QCOMPARE(card.interconnectGBps, interconnectGBps);
        QCOMPARE(QString::fromStdString(card.computeCapability), computeCapability);
        QCOMPARE(QString::fromLatin1(pb::toString(card.stack)), stack);
        QCOMPARE(card.onDemandPerGpuHour(1), onDemand1);
        // Every price says where it comes from and when that was read; every figure its datasheet.
        QVERIFY(card.priceSource);
        QVERIFY(QDate::fromString(QString::fromStdString(card.priceSource->asOf), Qt::ISODate).isValid());
        QVERIFY(QString::fromStdString(card.priceSource->asOf) <= QString::fromStdString(catalog.modelledOn));
        QVERIFY(!card.priceSource->text.empty());
        QVERIFY(!card.specSource.empty());
        // Every term is cheaper per hour than on demand, and longer terms cheaper still.
        for (int gpus : catalog.gpuCounts) {
            double previous = card.onDemandPerGpuHour(gpus);
            for (const auto &term : catalog.terms) {
                const double price = card.termPerGpuHour(term.id, gpus);
                QVERIFY2(price < previous, (term.id + " " + std::to_string(gpus)).c_str());
                previous = price;
            }
        }
    }

    void lookup()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        QCOMPARE(catalog.ids(), (std::vector<std::string> {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "mi300x-192gb", "b200-sxm-180gb", "h200-nvl-141gb",
                                                            "mi325x-256gb", "mi355x-288gb", "l40s-48gb", "rtx-pro-6000-96gb"}));
        QCOMPARE(catalog.card("b200-sxm-180gb").fp4DenseTflops.value_or(0), 9000.0);
        QVERIFY(!catalog.card("h200-sxm-141gb").fp4DenseTflops);
        QVERIFY(catalog.find("h200-sxm-141gb"));
        QVERIFY(!catalog.find("h100"));
        QCOMPARE(catalog.term("1m").hours, 730.0);
        try {
            catalog.card("b300");
            QFAIL("an unknown id was accepted");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(e.where(), std::string("card"));
            QVERIFY(std::string(e.what()).find("h100-sxm-80gb") != std::string::npos);
        }
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, catalog.card("h100-sxm-80gb").onDemandPerGpuHour(3));
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, catalog.card("h100-sxm-80gb").termPerGpuHour("6m", 1));
    }

    void roundTrip()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        const QJsonObject json = pb::catalogToJson(catalog);
        QCOMPARE(json, builtInJson());
        const pb::Catalog again = pb::catalogFromJson(json, "again");
        QCOMPARE(pb::catalogToJson(again), json);
    }

    void refusesBadCatalog_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("action");
        QTest::addColumn<QString>("value");   // JSON text for "set"
        QTest::addColumn<QString>("where");
        QTest::addColumn<QString>("message");
        auto row = [](const char *name, const char *path, const char *action, const char *value, const char *where, const char *message) {
            QTest::newRow(name) << QString::fromLatin1(path) << QString::fromLatin1(action) << QString::fromLatin1(value) << QString::fromLatin1(where) << QString::fromLatin1(message);
        };
        row("term price missing", "cards[2].prices.terms.1w.gpus_4", "remove", "", "cards[2].prices.terms.1w.gpus_4", "missing");
        row("version missing", "catalog_version", "remove", "", "catalog_version", "missing");
        row("version unsupported", "catalog_version", "set", "2", "catalog_version", "not supported");
        row("date not ISO", "modelled_on", "set", "\"30/11/2026\"", "modelled_on", "must be a date YYYY-MM-DD");
        row("currency lower case", "currency", "set", "\"usd\"", "currency", "three-letter code");
        row("notice missing", "notice", "remove", "", "notice", "missing");
        row("notice empty", "notice", "set", "\"  \"", "notice", "must not be empty");
        row("memory as text", "cards[0].memory_gb", "set", "\"80\"", "cards[0].memory_gb", "expected a number, got a string");
        row("zero TFLOP/s", "cards[1].bf16_dense_tflops", "set", "0", "cards[1].bf16_dense_tflops", "greater than zero");
        row("memory in MiB", "cards[3].memory_bytes", "set", "196592", "cards[3].memory_bytes", "within 10 % of memory_gb");
        row("fractional bytes", "cards[3].memory_bytes", "set", "206141652992.5", "cards[3].memory_bytes", "whole number");
        row("id style", "cards[0].id", "set", "\"A100_SXM\"", "cards[0].id", "lower-case");
        row("id twice", "cards[1].id", "set", "\"a100-sxm-80gb\"", "cards[1].id", "appears twice");
        row("stack unknown", "cards[2].software.stack", "set", "\"opencl\"", "cards[2].software.stack", "must be cuda or rocm");
        row("runtime not a version", "cards[0].software.min_runtime", "set", "\"eleven\"", "cards[0].software.min_runtime", "dotted version");
        row("cc malformed", "cards[0].software.compute_capability", "set", "\"sm80\"", "cards[0].software.compute_capability", "MAJOR.MINOR");
        row("bad regex", "cards[1].match.name_patterns[0]", "set", "\"(H100\"", "cards[1].match.name_patterns[0]", "not a valid regular expression");
        row("unknown key", "cards[0].memroy_gb", "set", "80", "cards[0].memroy_gb", "unknown field");
        row("fp8 must be explicit", "cards[3].fp8_dense_tflops", "remove", "", "cards[3].fp8_dense_tflops", "missing");
        row("fp8 as text", "cards[0].fp8_dense_tflops", "set", "\"none\"", "cards[0].fp8_dense_tflops", "expected a number, got a string");
        row("negative price", "cards[0].prices.on_demand.gpus_1", "set", "-1.0", "cards[0].prices.on_demand.gpus_1", "greater than zero");
        row("term table missing", "cards[1].prices.terms.3m", "remove", "", "cards[1].prices.terms.3m", "missing");
        row("term not in terms", "cards[1].prices.terms.6m", "set", "{}", "cards[1].prices.terms.6m", "unknown field");
        row("terms out of order", "terms[1].hours", "set", "100", "terms[1].hours", "shortest first");
        row("counts repeated", "gpu_counts", "set", "[1, 2, 2, 8]", "gpu_counts[2]", "increasing order");
        row("count not whole", "gpu_counts", "set", "[1, 2.5]", "gpu_counts[1]", "whole number");
        row("negative egress", "options.egress_per_tb", "set", "-5", "options.egress_per_tb", "zero or more");
        row("options missing", "options", "remove", "", "options", "missing");
        row("cards not an array", "cards", "set", "\"x\"", "cards", "expected an array, got a string");
        row("no cards", "cards", "set", "[]", "cards", "must not be empty");
        row("card not an object", "cards[1]", "set", "7", "cards[1]", "expected an object, got a number");
        row("price date not ISO", "cards[4].price_source.as_of", "set", "\"Sept 2026\"", "cards[4].price_source.as_of", "must be a date YYYY-MM-DD");
        row("price source without text", "cards[1].price_source.text", "remove", "", "cards[1].price_source.text", "missing");
        row("price source unknown key", "cards[1].price_source.date", "set", "\"2026-01-01\"", "cards[1].price_source.date", "unknown field");
        row("fp4 without fp8", "cards[0].fp4_dense_tflops", "set", "624", "cards[0].fp4_dense_tflops", "has FP8 ones too");
        row("fp4 as text", "cards[4].fp4_dense_tflops", "set", "\"9 PF\"", "cards[4].fp4_dense_tflops", "expected a number, got a string");
        row("variant without meaning", "cards[0].match.variant_patterns[0].meaning", "remove", "", "cards[0].match.variant_patterns[0].meaning", "missing");
    }
    void refusesBadCatalog()
    {
        QFETCH(QString, path);
        QFETCH(QString, action);
        QFETCH(QString, value);
        QFETCH(QString, where);
        QFETCH(QString, message);
        const QJsonValue edited = edit(builtInJson(), path.split(QLatin1Char('.')), action, parsed(value.toUtf8().constData()));
        QTemporaryDir dir;
        const QString file = writeFile(dir, QStringLiteral("bad.json"), QJsonDocument(edited.toObject()).toJson());
        try {
            pb::loadCatalog(file);
            QFAIL("the bad catalog was accepted");
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), where);
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.startsWith(where + QStringLiteral(": ")), qPrintable(what));
            QVERIFY2(what.contains(message), qPrintable(what));
            QVERIFY2(what.contains(file), qPrintable(what));
        }
    }

    void refusesNonJsonAndMissingFile()
    {
        QTemporaryDir dir;
        const QString file = writeFile(dir, QStringLiteral("broken.json"), "{\"catalog_version\": 1,");
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::loadCatalog(file));
        try {
            pb::loadCatalog(file);
        } catch (const pb::InvalidInputError &e) {
            QCOMPARE(QString::fromStdString(e.where()), file);
            QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("not valid JSON")));
        }
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::loadCatalog(dir.filePath(QStringLiteral("absent.json"))));
    }

    void refusedReplacementKeepsThePrevious()
    {
        pb::Catalog current = pb::builtInCatalog();
        QTemporaryDir dir;
        const QJsonValue bad = edit(builtInJson(), {QStringLiteral("cards[2]"), QStringLiteral("prices"), QStringLiteral("terms"), QStringLiteral("1w"), QStringLiteral("gpus_4")},
                                    QStringLiteral("remove"), {});
        const QString badPath = writeFile(dir, QStringLiteral("bad.json"), QJsonDocument(bad.toObject()).toJson());
        std::string error;
        QVERIFY(!pb::reloadCatalog(current, badPath, error));
        QVERIFY2(error.find("cards[2].prices.terms.1w.gpus_4: missing") == 0, error.c_str());
        QCOMPARE(current.source, std::string(":/catalog.json"));
        QCOMPARE(current.cards.size(), size_t(10));
        QCOMPARE(current.card("h200-sxm-141gb").termPerGpuHour("1w", 4), 3.29);

        const QJsonValue good = edit(builtInJson(), {QStringLiteral("cards[2]"), QStringLiteral("prices"), QStringLiteral("terms"), QStringLiteral("1w"), QStringLiteral("gpus_4")},
                                     QStringLiteral("set"), 3.01);
        const QString goodPath = writeFile(dir, QStringLiteral("good.json"), QJsonDocument(good.toObject()).toJson());
        QVERIFY(pb::reloadCatalog(current, goodPath, error));
        QVERIFY(error.empty());
        QCOMPARE(current.source, goodPath.toStdString());
        QCOMPARE(current.card("h200-sxm-141gb").termPerGpuHour("1w", 4), 3.01);
    }
};

QTEST_GUILESS_MAIN(TestCatalog)
#include "tst_catalog.moc"
