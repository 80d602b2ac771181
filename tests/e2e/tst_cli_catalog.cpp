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
        QCOMPARE(catalog.value(QStringLiteral("modelled_on")).toString(), QStringLiteral("2026-11-30"));
        QStringList ids;
        for (const auto &c : catalog.value(QStringLiteral("cards")).toArray())
            ids << c.toObject().value(QStringLiteral("id")).toString();
        QCOMPARE(ids, (QStringList {QStringLiteral("a100-sxm-80gb"), QStringLiteral("h100-sxm-80gb"), QStringLiteral("h200-sxm-141gb"), QStringLiteral("mi300x-192gb")}));
    }

    void listText()
    {
        const Result r = cli({QStringLiteral("catalog")});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains(QStringLiteral("not a quote")));
        // id, stack, memory, TB/s, BF16, FP8, link, on-demand price for one GPU
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("h200-sxm-141gb\\s+cuda\\s+141 GB\\s+4.80\\s+989\\s+1979\\s+900\\s+3.65"))), qPrintable(r.out));
        QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("a100-sxm-80gb\\s+cuda\\s+80 GB\\s+2.04\\s+312\\s+-\\s+600\\s+1.89"))), qPrintable(r.out));
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
        QVERIFY(r.out.startsWith(QStringLiteral("valid: 4 cards")));
    }

    void match()
    {
        Result r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA H200"), QStringLiteral("--memory-mib"), QStringLiteral("143771"),
                        QStringLiteral("--cc"), QStringLiteral("9.0"), QStringLiteral("--runtime"), QStringLiteral("12.4"), QStringLiteral("--json")});
        QCOMPARE(r.code, 0);
        QCOMPARE(json(r).value(QStringLiteral("card")).toString(), QStringLiteral("h200-sxm-141gb"));
        QVERIFY(json(r).value(QStringLiteral("clean")).toBool());
        r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA H200 NVL"), QStringLiteral("--json")});
        QCOMPARE(r.code, 1);
        QCOMPARE(json(r).value(QStringLiteral("mismatches")).toArray().at(0).toObject().value(QStringLiteral("kind")).toString(), QStringLiteral("form-factor"));
        r = cli({QStringLiteral("catalog"), QStringLiteral("match"), QStringLiteral("--name"), QStringLiteral("NVIDIA L4")});
        QCOMPARE(r.code, 1);
        QVERIFY(r.out.contains(QStringLiteral("not in the catalog")));
        r = cli({QStringLiteral("catalog"), QStringLiteral("match")});
        QCOMPARE(r.code, 2);
    }

    void unknownSubcommandAndCard()
    {
        QCOMPARE(cli({QStringLiteral("catalog"), QStringLiteral("frobnicate")}).code, 2);
        const Result r = cli({QStringLiteral("catalog"), QStringLiteral("show"), QStringLiteral("b200")});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains(QStringLiteral("h100-sxm-80gb")));
    }
};

QTEST_GUILESS_MAIN(TestCliCatalog)
#include "tst_cli_catalog.moc"
