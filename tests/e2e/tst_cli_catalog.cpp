// The catalog command as a user runs it: the built-in cards, a bad replacement refused with the
// field named (exit 2), and a detected device matched or flagged.
#include "e2e/CliProcess.h"
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

namespace {

using Result = pbtest::CliResult;

Result cli(const QStringList &args) { return pbtest::runCli(args); }

QJsonObject json(const Result &r) { return QJsonDocument::fromJson(r.out.toUtf8()).object(); }

QString data(const char *path) { return QStringLiteral(PB_TEST_DATA_DIR "/") + QLatin1String(path); }

} // namespace

class TestCliCatalog : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void listJson()
    {
        const Result r = cli({QStringLiteral("catalog"), QStringLiteral("--json")});
        QCOMPARE(r.code, 0);
        const QJsonObject catalog = json(r);
        QCOMPARE(catalog.value(QStringLiteral("source")).toString(), QStringLiteral(":/catalog.json"));
        QCOMPARE(catalog.value(QStringLiteral("modelled_on")).toString(), QStringLiteral("2026-12-02"));
        QStringList ids;
        for (const auto &c : catalog.value(QStringLiteral("cards")).toArray())
            ids << c.toObject().value(QStringLiteral("id")).toString();
        QCOMPARE(ids, (QStringList {QStringLiteral("a100-sxm-80gb"), QStringLiteral("h100-sxm-80gb"), QStringLiteral("h200-sxm-141gb"), QStringLiteral("mi300x-192gb"),
                                    QStringLiteral("b200-sxm-180gb"), QStringLiteral("h200-nvl-141gb"), QStringLiteral("mi325x-256gb"), QStringLiteral("mi355x-288gb"),
                                    QStringLiteral("l40s-48gb"), QStringLiteral("rtx-pro-6000-96gb")}));
        // Each price with its source and the date it was read.
        const QJsonObject b200 = catalog.value(QStringLiteral("cards")).toArray().at(4).toObject();
        QCOMPARE(b200.value(QStringLiteral("price_source")).toObject().value(QStringLiteral("as_of")).toString(), QStringLiteral("2026-09-25"));
        QCOMPARE(b200.value(QStringLiteral("fp4_dense_tflops")).toDouble(), 9000.0);
    }

    void listText()
    {
        const Result r = cli({QStringLiteral("catalog")});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains(QStringLiteral("not a quote")));
        // id, stack, memory, TB/s, BF16, FP8, link, on-demand price for one GPU, price as of
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("h200-sxm-141gb\\s+cuda\\s+141 GB\\s+4.80\\s+989\\s+1979\\s+900\\s+3.65\\s+2026-09-25"))), qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("a100-sxm-80gb\\s+cuda\\s+80 GB\\s+2.04\\s+312\\s+-\\s+600\\s+1.89"))), qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("l40s-48gb\\s+cuda\\s+48 GB\\s+0.86\\s+362\\s+733\\s+64\\s+1.29"))), qPrintable(r.out));
        const Result show = cli({QStringLiteral("catalog"), QStringLiteral("show"), QStringLiteral("mi355x-288gb")});
        QCOMPARE(show.code, 0);
        QVERIFY2(show.out.contains(QStringLiteral("FP4 10066.3")) && show.out.contains(QStringLiteral("as of 2026-12-02: No public on-demand price")), qPrintable(show.out));
    }

    void badFileNamesTheField()
    {
        const QString bad = data("catalog/missing-term-price.json");
        Result r = cli({QStringLiteral("catalog"), QStringLiteral("validate"), bad});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QStringLiteral("cards[2].prices.terms.1w.gpus_4: missing")), qPrintable(r.err));
        r = cli({QStringLiteral("catalog"), QStringLiteral("--file"), bad});
        QCOMPARE(r.code, 2);
        QVERIFY(r.out.isEmpty());
        QVERIFY2(r.err.contains(QStringLiteral("cards[2].prices.terms.1w.gpus_4: missing")), qPrintable(r.err));
        r = cli({QStringLiteral("catalog"), QStringLiteral("validate"), bad, QStringLiteral("--json")});
        QCOMPARE(r.code, 2);
        QCOMPARE(json(r).value(QStringLiteral("field")).toString(), QStringLiteral("cards[2].prices.terms.1w.gpus_4"));
        QCOMPARE(json(r).value(QStringLiteral("valid")).toBool(true), false);
    }

    void shippedFileValidates()
    {
        const Result r = cli({QStringLiteral("catalog"), QStringLiteral("validate"), QStringLiteral(PB_SOURCE_DIR "/resources/catalog.json")});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.startsWith(QStringLiteral("valid: 10 cards")));
    }

    void match()
    {
        Result r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA H200"), QStringLiteral("--memory-mib"), QStringLiteral("143771"),
                        QStringLiteral("--cc"), QStringLiteral("9.0"), QStringLiteral("--runtime"), QStringLiteral("12.4"), QStringLiteral("--json")});
        QCOMPARE(r.code, 0);
        QCOMPARE(json(r).value(QStringLiteral("card")).toString(), QStringLiteral("h200-sxm-141gb"));
        QVERIFY(json(r).value(QStringLiteral("clean")).toBool());
        r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA H100 NVL"), QStringLiteral("--json")});
        QCOMPARE(r.code, 1);
        QCOMPARE(json(r).value(QStringLiteral("mismatches")).toArray().at(0).toObject().value(QStringLiteral("kind")).toString(), QStringLiteral("form-factor"));
        r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA H200 NVL"), QStringLiteral("--json")});
        QCOMPARE(json(r).value(QStringLiteral("card")).toString(), QStringLiteral("h200-nvl-141gb"));
        r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA L4")});
        QCOMPARE(r.code, 1);
        QVERIFY(r.out.contains(QStringLiteral("not in the catalog")));
        r = cli({QStringLiteral("catalog"), QStringLiteral("match")});
        QCOMPARE(r.code, 2);
    }

    void unknownSubcommandAndCard()
    {
        QCOMPARE(cli({QStringLiteral("catalog"), QStringLiteral("frobnicate")}).code, 2);
        const Result r = cli({QStringLiteral("catalog"), QStringLiteral("show"), QStringLiteral("b300")});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains(QStringLiteral("h100-sxm-80gb")));
    }
};

QTEST_GUILESS_MAIN(TestCliCatalog)
#include "tst_cli_catalog.moc"
