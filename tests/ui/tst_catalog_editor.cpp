// Editing the card catalog in the GUI: a broken field is refused by name and the catalog in use
// stays; a valid edit is taken whole.
#include "cards/CatalogEditor.h"
#include "cards/CatalogTable.h"
#include "catalog/CatalogJson.h"
#include "workflow/CatalogSource.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonArray>
#include <QPlainTextEdit>

#include <QTabWidget>
#include <QtTest>

using namespace pb;

class TestCatalogEditor : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void brokenFieldIsRefusedByName()
    {
        const Catalog builtIn = builtInCatalog();
        ui::CatalogEditor editor(builtIn);
        QJsonObject root = catalogToJson(builtIn);
        QJsonArray cards = root.value(QStringLiteral("cards")).toArray();
        QJsonObject first = cards[0].toObject();
        first.remove(QStringLiteral("memory_bandwidth_tbps"));
        cards[0] = first;
        root.insert(QStringLiteral("cards"), cards);
        editor.editor()->setPlainText(QString::fromUtf8(QJsonDocument(root).toJson()));
        QVERIFY(!editor.apply());
        QVERIFY2(editor.errorText().contains(QStringLiteral("cards[0].memory_bandwidth_tbps")), qPrintable(editor.errorText()));
        // The catalog the editor hands back is still the one it was given.
        QCOMPARE(editor.catalog().cards[0].memoryBandwidthTbps, builtIn.cards[0].memoryBandwidthTbps);

        editor.editor()->setPlainText(QStringLiteral("{ not json"));
        QVERIFY(!editor.apply());
        QVERIFY(!editor.errorText().isEmpty());
    }

    void validEditIsTakenWhole()
    {
        const Catalog builtIn = builtInCatalog();
        ui::CatalogEditor editor(builtIn);
        QJsonObject root = catalogToJson(builtIn);
        QJsonArray cards = root.value(QStringLiteral("cards")).toArray();
        QJsonObject first = cards[0].toObject();
        first.insert(QStringLiteral("power_w"), 123.0);
        cards[0] = first;
        root.insert(QStringLiteral("cards"), cards);
        editor.editor()->setPlainText(QString::fromUtf8(QJsonDocument(root).toJson()));
        QVERIFY2(editor.apply(), qPrintable(editor.errorText()));
        QCOMPARE(editor.catalog().cards[0].powerW, 123.0);
        QCOMPARE(editor.catalog().cards.size(), builtIn.cards.size());
        QVERIFY(editor.errorText().isEmpty());
    }

    // The cards as a table: typed columns with units; a refused value marks its cell with the
    // message naming the field and the catalog in use is unchanged; a good one goes into the file
    // and is applied; the file, edited, fills the table when it is shown.
    void tableEditsTheFile()
    {
        const Catalog builtIn = builtInCatalog();
        ui::CatalogEditor editor(builtIn);
        ui::CatalogTable *table = editor.table();
        QCOMPARE(table->rowCount(), static_cast<int>(builtIn.cards.size()));
        QStringList headers;
        for (int c = 0; c < table->columnCount(); ++c)
            headers << table->horizontalHeaderItem(c)->text();
        for (const char *h : {"Memory (GB)", "Bandwidth (TB/s)", "BF16 (TFLOP/s)", "FP8 (TFLOP/s)", "On demand x1 (per GPU-h)", "Price as of", "Price source"})
            QVERIFY2(headers.contains(QLatin1String(h)), h);
        const int bandwidth = static_cast<int>(headers.indexOf(QStringLiteral("Bandwidth (TB/s)")));
        const int asOf = static_cast<int>(headers.indexOf(QStringLiteral("Price as of")));
        const int fp8 = static_cast<int>(headers.indexOf(QStringLiteral("FP8 (TFLOP/s)")));
        QCOMPARE(table->item(4, 0)->text(), QStringLiteral("b200-sxm-180gb"));
        QCOMPARE(table->item(0, fp8)->text(), QString()); // the A100: no FP8

        table->item(0, bandwidth)->setText(QStringLiteral("fast"));
        QVERIFY2(table->problem().startsWith(QStringLiteral("cards[0].memory_bandwidth_tbps: 'fast' is not a number")), qPrintable(table->problem()));
        QCOMPARE(table->item(0, bandwidth)->background().color(), QColor(0xff, 0xd0, 0xd0));
        QVERIFY(editor.errorText().contains(QStringLiteral("cards[0].memory_bandwidth_tbps")));
        table->item(1, asOf)->setText(QStringLiteral("yesterday"));
        QVERIFY2(table->problem().contains(QStringLiteral("cards[1].price_source.as_of")) && table->problem().contains(QStringLiteral("YYYY-MM-DD")),
                 qPrintable(table->problem()));
        QVERIFY(table->item(1, asOf)->toolTip().contains(QStringLiteral("YYYY-MM-DD")));
        QVERIFY(!editor.apply());
        QCOMPARE(editor.catalog().cards[1].priceSource->asOf, builtIn.cards[1].priceSource->asOf);

        table->item(1, asOf)->setText(QStringLiteral("2026-12-01"));
        table->item(0, bandwidth)->setText(QStringLiteral("2.5"));
        QVERIFY2(table->problem().isEmpty(), qPrintable(table->problem()));
        QVERIFY(editor.editor()->toPlainText().contains(QStringLiteral("\"2026-12-01\"")));
        QVERIFY2(editor.apply(), qPrintable(editor.errorText()));
        QCOMPARE(editor.catalog().cards[0].memoryBandwidthTbps, 2.5);
        QCOMPARE(editor.catalog().cards[1].priceSource->asOf, std::string("2026-12-01"));

        // Edited as a file: the table shows it when it comes back in front.
        QString text = editor.editor()->toPlainText();
        text.replace(QStringLiteral("\"power_w\": 400"), QStringLiteral("\"power_w\": 321"));
        editor.editor()->setPlainText(text);
        auto *views = editor.findChild<QTabWidget *>();
        views->setCurrentIndex(1);
        views->setCurrentIndex(0);
        const int power = static_cast<int>(headers.indexOf(QStringLiteral("Power (W)")));
        QCOMPARE(table->item(0, power)->text(), QStringLiteral("321"));
    }

    void userCatalogFallsBackToTheBuiltInOne()
    {
        std::string problem;
        const Catalog catalog = activeCatalogOrBuiltIn(&problem);
        QVERIFY(!catalog.empty());
    }
};

QTEST_MAIN(TestCatalogEditor)
#include "tst_catalog_editor.moc"
