// JSONL: input_ids and byte-level text, truncation, blank lines, every malformed line named by
// file and line number, revision.
#include "core/data/DataTestUtil.h"
#include "data/TokenDataset.h"

#include <QCryptographicHash>

using namespace pbtest;

class TestJsonl : public QObject {
    Q_OBJECT
private:
    static pb::DataConfig jsonl(const std::string &path)
    {
        pb::DataConfig c;
        c.kind = pb::DataKind::Jsonl;
        c.path = path;
        return c;
    }

private Q_SLOTS:
    void checkedInFixture()
    {
        const auto ds = pb::openDataset(jsonl(PB_TEST_DATA_DIR "/tokens/tiny.jsonl"), 300, 8, 1);
        QCOMPARE(ds->size(), int64_t(3)); // the blank line is not a sample
        QCOMPARE(readSample(*ds, 0), (std::vector<int32_t> {1, 2, 3, 4}));
        QCOMPARE(readSample(*ds, 1), (std::vector<int32_t> {'h' + 2, 'i' + 2})); // UTF-8 byte + 2
        QCOMPARE(readSample(*ds, 2), (std::vector<int32_t> {5, 6}));
        QCOMPARE(ds->totalTokens(), int64_t(8));
        QCOMPARE(QString::fromStdString(ds->description()), QStringLiteral("tiny.jsonl: 3 JSONL samples, 8 tokens (1 from `text`, byte-level)"));
    }

    void textIsUtf8Bytes()
    {
        QTemporaryDir dir;
        // "hé€" is 68 | C3 A9 | E2 82 AC in UTF-8; CRLF line ends are fine.
        const auto path = writeFile(dir, QStringLiteral("t.jsonl"), QByteArray("{\"text\": \"h\\u00e9\\u20ac\"}\r\n{\"text\": \"ok\", \"input_ids\": [7, 8, 9]}\r\n"));
        const auto ds = pb::openDataset(jsonl(path), 258, 16, 1);
        QCOMPARE(readSample(*ds, 0), (std::vector<int32_t> {0x68 + 2, 0xC3 + 2, 0xA9 + 2, 0xE2 + 2, 0x82 + 2, 0xAC + 2}));
        QCOMPARE(readSample(*ds, 1), (std::vector<int32_t> {7, 8, 9})); // input_ids win over text
    }

    void longSamplesAreTruncated()
    {
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("t.jsonl"), QByteArray("{\"input_ids\": [0,1,2,3,4,5,6,7,8,9]}\n{\"input_ids\": [4,5]}\n"));
        const auto ds = pb::openDataset(jsonl(path), 10, 3, 1);
        QCOMPARE(ds->length(0), int64_t(4));
        QCOMPARE(ds->length(1), int64_t(2));
        QCOMPARE(readSample(*ds, 0), (std::vector<int32_t> {0, 1, 2, 3}));
        QVERIFY(QString::fromStdString(ds->description()).endsWith(QStringLiteral(", 1 truncated to 4 tokens")));
    }

    void badLines_data()
    {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<int>("vocab");
        QTest::addColumn<QString>("needle");
        const QByteArray good("{\"input_ids\": [1, 2]}\n");
        QTest::newRow("not JSON") << good + "{oops\n" << 300 << QStringLiteral("line 2: not valid JSON");
        QTest::newRow("truncated last line") << good + "{\"input_ids\": [1," << 300 << QStringLiteral("line 2: not valid JSON");
        QTest::newRow("line number counts blank lines") << "\n\n" + good + "\n{bad\n" << 300 << QStringLiteral("line 5: not valid JSON");
        QTest::newRow("array, not object") << QByteArray("[1, 2, 3]\n") << 300 << QStringLiteral("line 1: expected a JSON object");
        QTest::newRow("no known field") << good + "{\"ids\": [1, 2]}" << 300 << QStringLiteral("line 2: needs an `input_ids` array or a `text` string");
        QTest::newRow("ids not an array") << QByteArray("{\"input_ids\": \"1 2\"}") << 300 << QStringLiteral("line 1: `input_ids` must be an array of integers");
        QTest::newRow("fractional id") << QByteArray("{\"input_ids\": [1, 2.5]}") << 300 << QStringLiteral("line 1: `input_ids`[1] is not an integer");
        QTest::newRow("string id") << QByteArray("{\"input_ids\": [1, \"2\"]}") << 300 << QStringLiteral("`input_ids`[1] is not an integer");
        QTest::newRow("id at vocab") << QByteArray("{\"input_ids\": [1, 300]}") << 300
                                     << QStringLiteral("line 1: `input_ids`[1] = 300 is outside the vocabulary: ids must be in 0..299");
        QTest::newRow("negative id") << QByteArray("{\"input_ids\": [-1, 2]}") << 300 << QStringLiteral("`input_ids`[0] = -1 is outside");
        QTest::newRow("one token") << good + good + "{\"input_ids\": [1]}" << 300 << QStringLiteral("line 3: 1 token(s); a sample needs at least 2");
        QTest::newRow("empty text") << QByteArray("{\"text\": \"\"}") << 300 << QStringLiteral("line 1: 0 token(s)");
        QTest::newRow("text not a string") << QByteArray("{\"text\": 5}") << 300 << QStringLiteral("line 1: `text` must be a string");
        QTest::newRow("text needs 258 ids") << good + "{\"text\": \"hi\"}" << 100 << QStringLiteral("line 2: `text` is tokenized byte by byte, which needs model.vocab_size >= 258 (got 100)");
        QTest::newRow("only blank lines") << QByteArray("\n  \n\n") << 300 << QStringLiteral("holds no samples");
        QTest::newRow("empty file") << QByteArray() << 300 << QStringLiteral("file is empty");
        QTest::newRow("binary junk") << QByteArray("\x00\x01\x02\xff\xfe", 5) << 300 << QStringLiteral("line 1: not valid JSON");
    }
    void badLines()
    {
        QFETCH(QByteArray, content);
        QFETCH(int, vocab);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        const auto path = writeFile(dir, QStringLiteral("bad.jsonl"), content);
        PB_EXPECT_INVALID(pb::openDataset(jsonl(path), vocab, 8, 1), path, needle.toStdString());
    }

    void revisionIsTheFileHash()
    {
        QTemporaryDir dir;
        const QByteArray bytes("{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5, 6]}\n");
        QByteArray changed = bytes;
        changed[43] = '7'; // [4, 5, 6] -> [4, 7, 6]
        const auto a = writeFile(dir, QStringLiteral("a.jsonl"), bytes);
        const auto b = writeFile(dir, QStringLiteral("b.jsonl"), changed);
        const auto da = pb::openDataset(jsonl(a), 10, 8, 1);
        const auto db = pb::openDataset(jsonl(b), 10, 8, 1);
        QCOMPARE(readSample(*db, 1), (std::vector<int32_t> {4, 7, 6}));
        QCOMPARE(da->revision(), "sha256:" + QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString());
        QVERIFY(db->revision() != da->revision());
        QCOMPARE(pb::openDataset(jsonl(a), 10, 8, 1)->revision(), da->revision());
    }

    void everyTruncationOpensOrIsRefused()
    {
        // Cut anywhere: either a clean prefix of whole lines (opens, every sample reads) or an
        // InvalidInputError naming the file; never a crash.
        const QByteArray whole("{\"input_ids\": [1, 2, 3]}\n{\"text\": \"h\u00e9llo\"}\n\n{\"input_ids\": [4, 5]}\n");
        QTemporaryDir dir;
        int opened = 0;
        for (qsizetype n = 0; n <= whole.size(); ++n) {
            const auto path = writeFile(dir, QStringLiteral("cut%1.jsonl").arg(n), whole.left(n));
            try {
                const auto ds = pb::openDataset(jsonl(path), 300, 8, 1);
                for (int64_t i = 0; i < ds->size(); ++i)
                    QCOMPARE(readSample(*ds, i).size(), size_t(ds->length(i)));
                ++opened;
            } catch (const pb::InvalidInputError &e) {
                QCOMPARE(e.where(), path);
            }
        }
        // Cuts that leave whole lines: after line 1's "}" or its "\n" (2), after line 2's "}", its
        // "\n" or the blank line (3), after line 4's "}" or its "\n" (2).
        QCOMPARE(opened, 7);
    }

    void emptyPathIsRefused()
    {
        PB_EXPECT_INVALID(pb::openDataset(jsonl(""), 10, 8, 1), std::string("data.path"), std::string("is empty"));
    }
};

QTEST_GUILESS_MAIN(TestJsonl)
#include "tst_jsonl.moc"
