// .npy token arrays: header versions 1/2/3, accepted dtypes, 1-D streams and 2-D rows, and every
// refused header with the message that names what was found.
#include "core/data/DataTestUtil.h"
#include "data/TokenDataset.h"

using namespace pbtest;

class TestNpy : public QObject {
    Q_OBJECT
private:
    static pb::DataConfig npy(const std::string &path, const std::string &dtype = "uint16")
    {
        pb::DataConfig c;
        c.kind = pb::DataKind::TokenFile;
        c.path = path;
        c.tokenDtype = dtype; // the .npy suffix selects npy whatever this says
        return c;
    }
    template <typename T>
    static QByteArray zeroToEleven()
    {
        std::vector<T> v(12);
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = static_cast<T>(i);
        return rawTokens(v);
    }

private Q_SLOTS:
    void accepted_data()
    {
        QTest::addColumn<QByteArray>("file");
        QTest::addColumn<QString>("type");
        QTest::newRow("v1 <u2") << npyFile(npyDict("<u2", "(12,)"), zeroToEleven<uint16_t>(), 1) << QStringLiteral("uint16");
        QTest::newRow("v2 <u4") << npyFile(npyDict("<u4", "(12,)"), zeroToEleven<uint32_t>(), 2) << QStringLiteral("uint32");
        QTest::newRow("v3 <i4") << npyFile(npyDict("<i4", "(12,)"), zeroToEleven<int32_t>(), 3) << QStringLiteral("int32");
        QTest::newRow("v1 <i8") << npyFile(npyDict("<i8", "(12,)"), zeroToEleven<int64_t>(), 1) << QStringLiteral("int64");
        QTest::newRow("1-D fortran flag") << npyFile(npyDict("<u2", "(12,)", true), zeroToEleven<uint16_t>(), 1) << QStringLiteral("uint16");
        QTest::newRow("double quotes, no trailing comma")
            << npyFile("{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (12,)}", zeroToEleven<uint16_t>(), 1) << QStringLiteral("uint16");
    }
    void accepted()
    {
        QFETCH(QByteArray, file);
        QFETCH(QString, type);
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("t.npy"), file);
        const auto ds = pb::openDataset(npy(path), 100, 3, 1); // samples of 4 tokens from 0..11
        QCOMPARE(ds->size(), int64_t(3));
        QCOMPARE(readSample(*ds, 1), (std::vector<int32_t> {4, 5, 6, 7}));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("t.npy: 12 tokens %1 (npy), 3 samples").arg(type));
        // token_dtype "npy" selects the parser for any file name.
        const auto bin = writeFile(dir, QStringLiteral("t.bin"), file);
        QCOMPARE(readSample(*pb::openDataset(npy(bin, "npy"), 100, 3, 1), 2), (std::vector<int32_t> {8, 9, 10, 11}));
    }

    void checkedInRowsFixture()
    {
        const std::string path = PB_TEST_DATA_DIR "/tokens/tiny_rows_i4.npy";
        const auto ds = pb::openDataset(npy(path), 100, 8, 1);
        QCOMPARE(ds->size(), int64_t(3));
        QCOMPARE(ds->length(0), int64_t(6));
        QCOMPARE(readSample(*ds, 2), (std::vector<int32_t> {20, 21, 22, 23, 24, 25}));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("tiny_rows_i4.npy: 3 rows x 6 tokens int32 (npy), 3 samples"));
        // Rows longer than seq_len + 1 are truncated, as training truncates them.
        const auto cut = pb::openDataset(npy(path), 100, 3, 1);
        QCOMPARE(cut->length(1), int64_t(4));
        QCOMPARE(readSample(*cut, 1), (std::vector<int32_t> {10, 11, 12, 13}));
        QVERIFY(QString::fromStdString(cut->description()).endsWith(QStringLiteral(", rows truncated to 4 tokens")));
    }

    void refused_data()
    {
        QTest::addColumn<QByteArray>("file");
        QTest::addColumn<QString>("needle");
        const QByteArray twelve = zeroToEleven<uint16_t>();
        QTest::newRow("float32") << npyFile(npyDict("<f4", "(6,)"), QByteArray(24, '\0')) << QStringLiteral("unsupported .npy dtype '<f4'");
        QTest::newRow("big-endian") << npyFile(npyDict(">u2", "(12,)"), twelve) << QStringLiteral("unsupported .npy dtype '>u2'");
        QTest::newRow("uint8") << npyFile(npyDict("|u1", "(24,)"), twelve) << QStringLiteral("unsupported .npy dtype '|u1'");
        QTest::newRow("int16") << npyFile(npyDict("<i2", "(12,)"), twelve) << QStringLiteral("unsupported .npy dtype '<i2'");
        QTest::newRow("structured") << npyFile("{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (12,), }", twelve)
                                    << QStringLiteral("structured arrays");
        QTest::newRow("fortran 2-D") << npyFile(npyDict("<u2", "(3, 4)", true), twelve) << QStringLiteral("Fortran (column-major) order");
        QTest::newRow("3-D") << npyFile(npyDict("<u2", "(2, 2, 3)"), twelve) << QStringLiteral("has 3 dimensions");
        QTest::newRow("0-D") << npyFile(npyDict("<u2", "()"), QByteArray(2, '\0')) << QStringLiteral("0-dimensional");
        QTest::newRow("empty shape") << npyFile(npyDict("<u2", "(0,)"), QByteArray()) << QStringLiteral("array is empty");
        QTest::newRow("truncated data") << npyFile(npyDict("<u2", "(16,)"), twelve) << QStringLiteral("declares 16 elements (32 bytes) but only 24 bytes follow");
        QTest::newRow("bytes after the array") << npyFile(npyDict("<u2", "(10,)"), twelve) << QStringLiteral("has 4 bytes after the array");
        QTest::newRow("truncated header") << npyFile(npyDict("<u2", "(12,)"), twelve).left(30) << QStringLiteral("truncated .npy header");
        QTest::newRow("prefix only") << npyFile(npyDict("<u2", "(12,)"), twelve).left(9) << QStringLiteral("not a .npy file");
        QTest::newRow("no magic") << QByteArray("NUMPY not really an array") << QStringLiteral("not a .npy file");
        QByteArray v4 = npyFile(npyDict("<u2", "(12,)"), twelve);
        v4[6] = 4;
        QTest::newRow("version 4") << v4 << QStringLiteral("unsupported .npy format version 4.0");
        QTest::newRow("missing key") << npyFile("{'descr': '<u2', 'shape': (12,), }", twelve) << QStringLiteral("lacks descr, fortran_order or shape");
        QTest::newRow("unknown key") << npyFile("{'descr': '<u2', 'fortran_order': False, 'shape': (12,), 'x': 1}", twelve)
                                     << QStringLiteral("unexpected key 'x'");
        QTest::newRow("not a dict") << npyFile("garbage", twelve) << QStringLiteral("malformed .npy header (expected '{')");
        QTest::newRow("bad shape") << npyFile(npyDict("<u2", "(a,)"), twelve) << QStringLiteral("shape holds something other than");
        QTest::newRow("huge shape") << npyFile(npyDict("<u2", "(9223372036854775807,)"), twelve) << QStringLiteral("too large to address");
        QTest::newRow("overflowing shape") << npyFile(npyDict("<u2", "(99999999999999999999,)"), twelve) << QStringLiteral("overflows 64 bits");
        QTest::newRow("negative int32 id") << npyFile(npyDict("<i4", "(4,)"), rawTokens<int32_t>({1, 2, -1, 3}))
                                           << QStringLiteral("token id -1 at token offset 2 (byte offset 136)");
        QTest::newRow("int64 id out of range") << npyFile(npyDict("<i8", "(4,)"), rawTokens<int64_t>({1, 2, 3, int64_t(1) << 40}))
                                               << QStringLiteral("token id 1099511627776 at token offset 3");
        QTest::newRow("rows of one token") << npyFile(npyDict("<u2", "(12, 1)"), twelve) << QStringLiteral("rows of 1 token(s)");
        QTest::newRow("too few tokens") << npyFile(npyDict("<u2", "(3,)"), zeroToEleven<uint16_t>().left(6)) << QStringLiteral("holds 3 tokens, fewer than one sample");
    }
    void refused()
    {
        QFETCH(QByteArray, file);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("t.npy"), file);
        PB_EXPECT_INVALID(pb::openDataset(npy(path), 100, 3, 1), path, needle.toStdString());
    }

    void everyTruncationIsRefused()
    {
        // A file cut anywhere (a partial download) is an error, never a crash or a silent short read.
        const QByteArray whole = npyFile(npyDict("<u4", "(3, 4)"), zeroToEleven<uint32_t>(), 2);
        QTemporaryDir dir;
        for (qsizetype n = 0; n < whole.size(); ++n) {
            const auto path = writeFile(dir, QStringLiteral("cut%1.npy").arg(n), whole.left(n));
            PB_EXPECT_INVALID(pb::openDataset(npy(path), 100, 3, 1), path, std::string());
        }
        const auto path = writeFile(dir, QStringLiteral("whole.npy"), whole);
        QCOMPARE(readSample(*pb::openDataset(npy(path), 100, 3, 1), 2), (std::vector<int32_t> {8, 9, 10, 11}));
    }
};

QTEST_GUILESS_MAIN(TestNpy)
#include "tst_npy.moc"
