// Synthetic data: length distributions, the learnable progression, determinism and errors.
#include "core/data/DataTestUtil.h"
#include "data/TokenDataset.h"

#include <QRegularExpression>

#include <set>

using namespace pbtest;

class TestSynthetic : public QObject {
    Q_OBJECT
private:
    static pb::DataConfig synthetic(int64_t samples = 4096)
    {
        pb::DataConfig c;
        c.kind = pb::DataKind::Synthetic;
        c.syntheticSamples = samples;
        return c;
    }

private Q_SLOTS:
    void fixedLengths()
    {
        const auto ds = pb::openDataset(synthetic(), 1000, 64, 7);
        QCOMPARE(ds->size(), int64_t(4096));
        for (int64_t i : {int64_t(0), int64_t(1), int64_t(4095)}) {
            QCOMPARE(ds->length(i), int64_t(65));
            QCOMPARE(readSample(*ds, i).size(), size_t(65));
        }
        QCOMPARE(ds->totalTokens(), int64_t(4096 * 65));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("synthetic, 4,096 samples, fixed length 65"));
    }

    void learnableIsAnArithmeticProgression()
    {
        const int64_t vocab = 50;
        const auto ds = pb::openDataset(synthetic(200), vocab, 31, 3);
        std::set<int> strides;
        for (int64_t i = 0; i < ds->size(); ++i) {
            const auto t = readSample(*ds, i);
            QCOMPARE(t.size(), size_t(32));
            const int stride = ((t[1] - t[0]) % vocab + vocab) % vocab;
            QVERIFY2(stride >= 1 && stride <= 8, qPrintable(QString::number(stride)));
            strides.insert(stride);
            // The next token follows from the previous two: t[k] = t[k-1] + (t[k-1] - t[k-2]) mod vocab.
            for (size_t k = 2; k < t.size(); ++k) {
                QVERIFY(t[k] >= 0 && t[k] < vocab);
                QCOMPARE(t[k], int32_t(((2 * t[k - 1] - t[k - 2]) % vocab + vocab) % vocab));
            }
        }
        QCOMPARE(strides.size(), size_t(8)); // 200 samples draw every stride of 1..8
    }

    void randomTokensCoverTheVocabulary()
    {
        auto c = synthetic(64);
        c.learnable = false;
        const auto ds = pb::openDataset(c, 16, 63, 11);
        std::set<int32_t> seen;
        bool progression = true;
        for (int64_t i = 0; i < ds->size(); ++i) {
            const auto t = readSample(*ds, i);
            for (int32_t v : t) {
                QVERIFY(v >= 0 && v < 16);
                seen.insert(v);
            }
            progression = progression && ((2 * t[1] - t[0]) % 16 + 16) % 16 == t[2];
        }
        QCOMPARE(seen.size(), size_t(16));
        QVERIFY(!progression);
        QVERIFY(QString::fromStdString(ds->description()).endsWith(QStringLiteral(", uniform random tokens")));
    }

    void deterministicFromTheSeed()
    {
        const auto a = pb::openDataset(synthetic(), 1000, 64, 7);
        const auto b = pb::openDataset(synthetic(), 1000, 64, 7);
        const auto c = pb::openDataset(synthetic(), 1000, 64, 8);
        QCOMPARE(readSample(*a, 17), readSample(*b, 17));
        QVERIFY(readSample(*a, 17) != readSample(*c, 17));
        QVERIFY(readSample(*a, 17) != readSample(*a, 18));
    }

    void uniformLengths()
    {
        auto c = synthetic();
        c.lengths = pb::LengthDistribution::Uniform;
        c.minLength = 8;
        const auto ds = pb::openDataset(c, 1000, 64, 5);
        const auto again = pb::openDataset(c, 1000, 64, 5);
        const auto other = pb::openDataset(c, 1000, 64, 6);
        std::set<int64_t> lengths;
        bool sameAsOtherSeed = true;
        for (int64_t i = 0; i < ds->size(); ++i) {
            const int64_t n = ds->length(i);
            QVERIFY2(n >= 9 && n <= 65, qPrintable(QString::number(n)));
            QCOMPARE(again->length(i), n);
            sameAsOtherSeed = sameAsOtherSeed && other->length(i) == n;
            lengths.insert(n);
        }
        QCOMPARE(readSample(*ds, 3).size(), size_t(ds->length(3)));
        QVERIFY(!sameAsOtherSeed);
        // 4096 draws over 57 values: every length appears (missing one has probability ~e^-72).
        QCOMPARE(lengths.size(), size_t(57));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("synthetic, 4,096 samples, uniform length 9..65"));
    }

    void lengthsFromCheckedInFile()
    {
        auto c = synthetic(7);
        c.lengths = pb::LengthDistribution::FromFile;
        c.lengthsFile = PB_TEST_DATA_DIR "/tokens/lengths.txt";
        const auto ds = pb::openDataset(c, 100, 8, 1);
        const std::vector<int64_t> expected {3, 5, 9, 3, 5, 9, 3};
        for (int64_t i = 0; i < 7; ++i)
            QCOMPARE(ds->length(i), expected[size_t(i)]);
        QCOMPARE(ds->totalTokens(), int64_t(37));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("synthetic, 7 samples, lengths from lengths.txt (3 values, 3..9)"));
    }

    void badLengthsFile_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("needle");
        QTest::newRow("not a number") << QByteArray("3\nabc\n") << QStringLiteral("line 2: 'abc' is not an integer");
        QTest::newRow("below two") << QByteArray("3\n\n1\n") << QStringLiteral("line 3: length 1 is outside 2..9");
        QTest::newRow("above seq_len + 1") << QByteArray("10\n") << QStringLiteral("line 1: length 10 is outside 2..9");
        QTest::newRow("negative") << QByteArray("4\n-4\n") << QStringLiteral("line 2: length -4");
        QTest::newRow("fraction") << QByteArray("4.5\n") << QStringLiteral("line 1: '4.5' is not an integer");
        QTest::newRow("empty") << QByteArray("\n\n") << QStringLiteral("holds no lengths");
    }
    void badLengthsFile()
    {
        QFETCH(QByteArray, content);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        auto c = synthetic(4);
        c.lengths = pb::LengthDistribution::FromFile;
        c.lengthsFile = writeFile(dir, QStringLiteral("lengths.txt"), content);
        PB_EXPECT_INVALID(pb::openDataset(c, 100, 8, 1), c.lengthsFile, needle.toStdString());
    }

    void invalidParameters_data()
    {
        QTest::addColumn<int>("variant");
        QTest::addColumn<QString>("where");
        QTest::newRow("no samples") << 0 << QStringLiteral("data.synthetic_samples");
        QTest::newRow("min_length 0") << 1 << QStringLiteral("data.min_length");
        QTest::newRow("min_length above seq_len") << 2 << QStringLiteral("data.min_length");
        QTest::newRow("vocab 1") << 3 << QStringLiteral("model.vocab_size");
        QTest::newRow("seq_len 0") << 4 << QStringLiteral("train.seq_len");
        QTest::newRow("no lengths file named") << 5 << QStringLiteral("data.lengths_file");
        QTest::newRow("lengths file missing") << 6 << QStringLiteral("/nonexistent/lengths.txt");
    }
    void invalidParameters()
    {
        QFETCH(int, variant);
        QFETCH(QString, where);
        auto c = synthetic(16);
        int64_t vocab = 100, seqLen = 16;
        switch (variant) {
        case 0: c.syntheticSamples = 0; break;
        case 1: c.lengths = pb::LengthDistribution::Uniform; c.minLength = 0; break;
        case 2: c.lengths = pb::LengthDistribution::Uniform; c.minLength = 17; break;
        case 3: vocab = 1; break;
        case 4: seqLen = 0; break;
        case 5: c.lengths = pb::LengthDistribution::FromFile; break;
        case 6: c.lengths = pb::LengthDistribution::FromFile; c.lengthsFile = "/nonexistent/lengths.txt"; break;
        }
        PB_EXPECT_INVALID(pb::openDataset(c, vocab, seqLen, 1), where.toStdString(), std::string());
    }

    void revisionHashesTheParameters()
    {
        const std::string r = pb::openDataset(synthetic(), 1000, 64, 7)->revision();
        QVERIFY(QRegularExpression(QStringLiteral("^sha256:[0-9a-f]{64}$")).match(QString::fromStdString(r)).hasMatch());
        QCOMPARE(pb::openDataset(synthetic(), 1000, 64, 7)->revision(), r);
        QVERIFY(pb::openDataset(synthetic(), 1000, 64, 8)->revision() != r);
        QVERIFY(pb::openDataset(synthetic(4097), 1000, 64, 7)->revision() != r);
        QVERIFY(pb::openDataset(synthetic(), 1001, 64, 7)->revision() != r);
        auto random = synthetic();
        random.learnable = false;
        QVERIFY(pb::openDataset(random, 1000, 64, 7)->revision() != r);
    }

    void aMillionSamplesCostNothing()
    {
        const auto ds = pb::openDataset(synthetic(1000000), 32000, 2048, 1);
        QCOMPARE(ds->size(), int64_t(1000000));
        QCOMPARE(readSample(*ds, 999999).size(), size_t(2049));
        QVERIFY_THROWS_EXCEPTION(pb::PilotBenchError, ds->length(1000000));
    }
};

QTEST_GUILESS_MAIN(TestSynthetic)
#include "tst_synthetic.moc"
