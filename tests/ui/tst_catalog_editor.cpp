// Editing the card catalog in the GUI: a broken field is refused by name and the catalog in use
// stays; a valid edit is taken whole.
#include "cards/CatalogEditor.h"
#include "catalog/CatalogJson.h"
#include "workflow/CatalogSource.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonArray>
#include <QPlainTextEdit>

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

    void userCatalogFallsBackToTheBuiltInOne()
    {
        std::string problem;
        const Catalog catalog = activeCatalogOrBuiltIn(&problem);
        QVERIFY(!catalog.empty());
    }
};

QTEST_MAIN(TestCatalogEditor)
#include "tst_catalog_editor.moc"
