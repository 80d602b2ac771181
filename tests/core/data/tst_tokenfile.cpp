// Raw token files (uint16/uint32): sample cutting, errors, the bounded range scan at open and the
// full check in read(), revision, concurrent reads.
#include "core/data/DataTestUtil.h"
#include "data/TokenDataset.h"

#include <QCryptographicHash>
#include <QDir>

#include <thread>

using namespace pbtest;

class TestTokenFile : public QObject {
    Q_OBJECT
private:
    static pb::DataConfig tokens(const std::string &path, const std::string &dtype = "uint16")
    {
        pb::DataConfig c;
        c.kind = pb::DataKind::TokenFile;
        c.path = path;
        c.tokenDtype = dtype;
        return c;
    }

private Q_SLOTS:
    void checkedInUint16Fixture()
    {
        const std::string path = PB_TEST_DATA_DIR "/tokens/tiny_u16.bin";
        const auto ds = pb::openDataset(tokens(path), 100, 4, 1);
        QCOMPARE(ds->size(), int64_t(4)); // 20 tokens / 5 per sample
        QCOMPARE(ds->length(3), int64_t(5));
        QCOMPARE(readSample(*ds, 2), (std::vector<int32_t> {10, 11, 12, 13, 14}));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("tiny_u16.bin: 20 tokens uint16, 4 samples"));
        // seq_len 6: samples of 7 tokens, 20 = 2 * 7 + 6, the last partial 6 are dropped.
        const auto seven = pb::openDataset(tokens(path), 100, 6, 1);
        QCOMPARE(seven->size(), int64_t(2));
        QCOMPARE(readSample(*seven, 1), (std::vector<int32_t> {7, 8, 9, 10, 11, 12, 13}));
        QCOMPARE(seven->totalTokens(), int64_t(14));
    }

    void uint32Tokens()
    {
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("t32.bin"), rawTokens<uint32_t>({100000, 5, 6, 7, 70000, 1, 9}));
        const auto ds = pb::openDataset(tokens(path, "uint32"), 128000, 2, 1);
        QCOMPARE(ds->size(), int64_t(2));
        QCOMPARE(readSample(*ds, 0), (std::vector<int32_t> {100000, 5, 6}));
        QCOMPARE(readSample(*ds, 1), (std::vector<int32_t> {7, 70000, 1}));
        std::vector<int32_t> both;
        ds->read(0, both);
        ds->read(1, both); // read() appends
        QCOMPARE(both.size(), size_t(6));
    }

    void refused_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("dtype");
        QTest::addColumn<int>("seqLen");
        QTest::addColumn<bool>("whereIsFile");
        QTest::addColumn<QString>("needle");
        QTest::newRow("odd size for uint16") << QByteArray(5, '\1') << QStringLiteral("uint16") << 1 << true << QStringLiteral("size 5 bytes is not a multiple of 2");
        QTest::newRow("truncated uint32") << QByteArray(6, '\1') << QStringLiteral("uint32") << 1 << true << QStringLiteral("is not a multiple of 4");
        QTest::newRow("fewer tokens than one sample") << rawTokens<uint16_t>({1, 2, 3}) << QStringLiteral("uint16") << 4 << true
                                                      << QStringLiteral("holds 3 tokens, fewer than one sample of train.seq_len + 1 = 5");
        QTest::newRow("empty file") << QByteArray() << QStringLiteral("uint16") << 4 << true << QStringLiteral("file is empty");
        QTest::newRow("unknown dtype") << rawTokens<uint16_t>({1, 2, 3}) << QStringLiteral("int8") << 1 << false << QStringLiteral("unknown token dtype 'int8'");
        QTest::newRow("npy given as raw") << npyFile(npyDict("<u2", "(4,)"), rawTokens<uint16_t>({1, 2, 3, 4})) << QStringLiteral("uint16") << 1 << true
                                          << QStringLiteral("set data.token_dtype to npy");
        QTest::newRow("token out of range") << rawTokens<uint16_t>({0, 1, 2, 500}) << QStringLiteral("uint16") << 1 << true
                                            << QStringLiteral("token id 500 at token offset 3 (byte offset 6) is outside the vocabulary: ids must be in 0..99");
    }
    void refused()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, dtype);
        QFETCH(int, seqLen);
        QFETCH(bool, whereIsFile);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("t.bin"), bytes);
        PB_EXPECT_INVALID(pb::openDataset(tokens(path, dtype.toStdString()), 100, seqLen, 1), whereIsFile ? path : std::string("data.token_dtype"),
                          needle.toStdString());
    }

    void missingOrNoFile()
    {
        QTemporaryDir dir;
        const std::string missing = dir.filePath(QStringLiteral("nope.bin")).toStdString();
        PB_EXPECT_INVALID(pb::openDataset(tokens(missing), 100, 4, 1), missing, std::string("does not exist"));
        PB_EXPECT_INVALID(pb::openDataset(tokens(dir.path().toStdString()), 100, 4, 1), dir.path().toStdString(), std::string("is a folder"));
        PB_EXPECT_INVALID(pb::openDataset(tokens(""), 100, 4, 1), std::string("data.path"), std::string("is empty"));
    }

    void outOfRangeBeyondTheScannedWindowsIsCaughtByRead()
    {
        // 4,000,000 uint16 tokens (8,000,000 bytes); open scans tokens 0..524,287 and 3,475,712..3,999,999.
        std::vector<uint16_t> t(4000000, 7);
        t[2000000] = 65535;
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("big.bin"), rawTokens(t));
        const auto ds = pb::openDataset(tokens(path), 1000, 999, 1); // samples of 1000 tokens
        QCOMPARE(ds->size(), int64_t(4000));
        QCOMPARE(readSample(*ds, 1999), std::vector<int32_t>(1000, 7));
        PB_EXPECT_INVALID(readSample(*ds, 2000), path, std::string("token id 65535 at token offset 2000000 (byte offset 4000000)"));
        // The same value inside the last MiB is refused at open.
        t[2000000] = 7;
        t[3999990] = 1000;
        const auto tail = writeFile(dir, QStringLiteral("tail.bin"), rawTokens(t));
        PB_EXPECT_INVALID(pb::openDataset(tokens(tail), 1000, 999, 1), tail, std::string("token id 1000 at token offset 3999990"));
    }

    void revisionIsTheFileHash()
    {
        QTemporaryDir dir;
        std::vector<uint16_t> t(100000);
        for (size_t i = 0; i < t.size(); ++i)
            t[i] = static_cast<uint16_t>(i % 1000);
        const QByteArray bytes = rawTokens(t);
        const auto a = writeFile(dir, QStringLiteral("a.bin"), bytes);
        const auto b = writeFile(dir, QStringLiteral("b.bin"), bytes);
        QByteArray changed = bytes;
        changed[100001] = static_cast<char>(changed[100001] ^ 1);
        const auto c = writeFile(dir, QStringLiteral("c.bin"), changed);
        const std::string ra = pb::openDataset(tokens(a), 1000, 127, 1)->revision();
        QCOMPARE(ra, "sha256:" + QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString());
        QCOMPARE(pb::openDataset(tokens(b), 1000, 127, 1)->revision(), ra); // content, not name
        QCOMPARE(pb::openDataset(tokens(a), 1000, 63, 9)->revision(), ra);  // the data, not how it is cut
        QVERIFY(pb::openDataset(tokens(c), 1000, 127, 1)->revision() != ra);
    }

    void concurrentReads()
    {
        QTemporaryDir dir;
        std::vector<uint16_t> t(64 * 1000);
        for (size_t i = 0; i < t.size(); ++i)
            t[i] = static_cast<uint16_t>((i * 2654435761u) % 50000);
        const auto path = writeFile(dir, QStringLiteral("c.bin"), rawTokens(t));
        const auto ds = pb::openDataset(tokens(path), 50000, 63, 1);
        std::vector<int32_t> expected;
        for (int64_t i = 0; i < ds->size(); ++i)
            ds->read(i, expected);
        std::vector<int32_t> first, second;
        std::string revFirst, revSecond;
        std::thread a([&] { for (int64_t i = 0; i < ds->size(); ++i) ds->read(i, first); revFirst = ds->revision(); });
        std::thread b([&] { revSecond = ds->revision(); for (int64_t i = 0; i < ds->size(); ++i) ds->read(i, second); });
        a.join();
        b.join();
        QCOMPARE(first, expected);
        QCOMPARE(second, expected);
        QCOMPARE(revFirst, revSecond);
    }
};

QTEST_GUILESS_MAIN(TestTokenFile)
#include "tst_tokenfile.moc"
