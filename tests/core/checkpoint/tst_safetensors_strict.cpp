// The strict safetensors header check our checkpoints are read with (model/Safetensors.h), rule by
// rule: what the specification allows is accepted (tensors listed in any order, empty tensors,
// space padding), what it forbids is refused naming the tensor; the lenient reader Hugging Face
// weights go through is unchanged.
#include "model/Safetensors.h"
#include "util/Errors.h"

#include <QtTest>

class TestSafetensorsStrict : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void accepted_data()
    {
        QTest::addColumn<QByteArray>("header");
        QTest::addColumn<qint64>("dataBytes");
        QTest::addColumn<QStringList>("dataOrder");
        // The Rust writer orders the JSON by name, the data by alignment: the key order is free.
        QTest::newRow("keys not in data order") << QByteArray(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})")
                                                << qint64(11) << QStringList {QStringLiteral("b"), QStringLiteral("a")};
        QTest::newRow("empty tensors") << QByteArray(R"({"e":{"dtype":"F32","shape":[0,7],"data_offsets":[0,0]},"x":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})")
                                       << qint64(2) << QStringList {QStringLiteral("e"), QStringLiteral("x")};
        QTest::newRow("scalar, metadata, padding") << QByteArray(R"({"__metadata__":{"format":"pt"},"step":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}    )")
                                                   << qint64(8) << QStringList {QStringLiteral("step")};
        QTest::newRow("no tensors") << QByteArray("{}") << qint64(0) << QStringList {};
    }
    void accepted()
    {
        QFETCH(QByteArray, header);
        QFETCH(qint64, dataBytes);
        QFETCH(QStringList, dataOrder);
        const pb::SafetensorsHeader h = pb::parseSafetensorsHeaderStrict(header, dataBytes, "f.safetensors");
        QStringList order;
        for (const auto &e : h.entries)
            order << QString::fromStdString(e.name);
        QCOMPARE(order, dataOrder);
    }

    void refused_data()
    {
        QTest::addColumn<QByteArray>("header");
        QTest::addColumn<qint64>("dataBytes");
        QTest::addColumn<QString>("named");
        const QByteArray a = R"("a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]})";
        QTest::newRow("duplicate name") << QByteArray("{" + a + R"(,"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})") << qint64(8) << QStringLiteral("\"a\" appears twice");
        QTest::newRow("overlap") << QByteArray("{" + a + R"(,"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})") << qint64(4) << QStringLiteral("tensor 'b' overlaps tensor 'a'");
        QTest::newRow("hole") << QByteArray("{" + a + R"(,"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})") << qint64(8) << QStringLiteral("2 bytes before tensor 'b'");
        QTest::newRow("trailing bytes") << QByteArray("{" + a + "}") << qint64(68) << QStringLiteral("64 bytes after the last tensor 'a'");
        QTest::newRow("not from byte 0") << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})") << qint64(8) << QStringLiteral("4 bytes before tensor 'a'");
        QTest::newRow("metadata number") << QByteArray(R"({"__metadata__":{"step":2},)" + a + "}") << qint64(4) << QStringLiteral("__metadata__.step must be a string");
        QTest::newRow("metadata not an object") << QByteArray(R"({"__metadata__":"pt",)" + a + "}") << qint64(4) << QStringLiteral("__metadata__ must be an object");
        QTest::newRow("extra key") << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"crc":1}})") << qint64(4) << QStringLiteral("tensor 'a' has the key 'crc'");
        QTest::newRow("unknown dtype") << QByteArray(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}})") << qint64(4) << QStringLiteral("tensor 'a' has dtype 'Q4'");
        QTest::newRow("fractional dimension") << QByteArray(R"({"a":{"dtype":"U8","shape":[4.5],"data_offsets":[0,4]}})") << qint64(4) << QStringLiteral("tensor 'a': shape");
        QTest::newRow("three offsets") << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4,4]}})") << qint64(4) << QStringLiteral("tensor 'a': data_offsets");
        QTest::newRow("size of another dtype") << QByteArray(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,4]}})") << qint64(4) << QStringLiteral("tensor 'a' has 4 bytes");
        QTest::newRow("past the data") << QByteArray("{" + a + "}") << qint64(2) << QStringLiteral("tensor 'a' lies outside the file");
        QTest::newRow("newline padding") << QByteArray("{" + a + "}\n") << qint64(4) << QStringLiteral("padded with spaces only");
        QTest::newRow("tensor not an object") << QByteArray(R"({"a":[1]})") << qint64(0) << QStringLiteral("tensor 'a' must be an object");
    }
    void refused()
    {
        QFETCH(QByteArray, header);
        QFETCH(qint64, dataBytes);
        QFETCH(QString, named);
        try {
            pb::parseSafetensorsHeaderStrict(header, dataBytes, "f.safetensors");
            QFAIL("accepted");
        } catch (const pb::InvalidInputError &e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.contains(QStringLiteral("f.safetensors")) && what.contains(named), qPrintable(what));
        }
    }

    // Hugging Face weights keep their reader: a header the strict check refuses for bytes after
    // its last tensor still loads there.
    void lenientReaderUnchanged()
    {
        const QByteArray header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
        QCOMPARE(pb::parseSafetensorsHeader(header, 68, "w.safetensors").size(), size_t(1));
        QVERIFY_THROWS_EXCEPTION(pb::InvalidInputError, pb::parseSafetensorsHeaderStrict(header, 68, "w.safetensors"));
    }
};

QTEST_GUILESS_MAIN(TestSafetensorsStrict)
#include "tst_safetensors_strict.moc"
