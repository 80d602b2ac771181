// The file names of a version-2 checkpoint and the rule that a folder holds exactly one complete
// set of them for its world size and strategy.
#include "checkpoint/CheckpointLayout.h"
#include "util/Errors.h"

#include <QtTest>

using pb::CheckpointPart;

class TestCheckpointLayout : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void namesRoundTrip_data()
    {
        QTest::addColumn<int>("part");
        QTest::addColumn<int>("rank");
        QTest::addColumn<int>("index");
        QTest::addColumn<int>("count");
        QTest::addColumn<QString>("name");
        QTest::newRow("one model file") << int(CheckpointPart::Model) << -1 << 1 << 1 << QStringLiteral("model.safetensors");
        QTest::newRow("Hugging Face shard") << int(CheckpointPart::Model) << -1 << 2 << 3 << QStringLiteral("model-00002-of-00003.safetensors");
        QTest::newRow("fsdp shard of rank 1") << int(CheckpointPart::Model) << 1 << 1 << 1 << QStringLiteral("model.rank00001.safetensors");
        QTest::newRow("zero2 optimizer shard") << int(CheckpointPart::Optimizer) << 3 << 1 << 2 << QStringLiteral("optimizer.rank00003-00001-of-00002.safetensors");
        QTest::newRow("rng of rank 0") << int(CheckpointPart::Rng) << 0 << 1 << 1 << QStringLiteral("rng.rank00000.safetensors");
    }
    void namesRoundTrip()
    {
        QFETCH(int, part);
        QFETCH(int, rank);
        QFETCH(int, index);
        QFETCH(int, count);
        QFETCH(QString, name);
        QCOMPARE(QString::fromStdString(pb::checkpointFileName(CheckpointPart(part), rank, index, count)), name);
        const auto parsed = pb::parseCheckpointFileName(name.toStdString());
        QVERIFY(parsed);
        QCOMPARE(int(parsed->part), part);
        QCOMPARE(parsed->rank, rank);
        QCOMPARE(parsed->index, index);
        QCOMPARE(parsed->count, count);
    }

    void foreignNamesAreNotCheckpointFiles_data()
    {
        QTest::addColumn<QString>("name");
        for (const char *name : {"model.pt", "model-00001-of-00001.safetensors", "model-00003-of-00002.safetensors", "model-00000-of-00002.safetensors",
                                 "model.rank1.safetensors", "../model.safetensors", "model.safetensors.tmp", "weights.safetensors", "model-1-of-2.safetensors"})
            QTest::newRow(name) << QString::fromLatin1(name);
    }
    void foreignNamesAreNotCheckpointFiles()
    {
        QFETCH(QString, name);
        QVERIFY(!pb::parseCheckpointFileName(name.toStdString()));
    }

    void fileSets_data()
    {
        QTest::addColumn<QStringList>("names");
        QTest::addColumn<int>("world");
        QTest::addColumn<QString>("strategy");
        QTest::addColumn<QString>("refusal"); // empty: accepted
        const QStringList small {QStringLiteral("state.json"), QStringLiteral("config.json")};
        const QStringList single = small + QStringList {QStringLiteral("model.safetensors"), QStringLiteral("optimizer.safetensors"), QStringLiteral("rng.safetensors")};
        QTest::newRow("one process") << single << 1 << QStringLiteral("none") << QString();
        QTest::newRow("sharded model with index")
            << (small + QStringList {QStringLiteral("model-00001-of-00002.safetensors"), QStringLiteral("model-00002-of-00002.safetensors"),
                                     QStringLiteral("model.safetensors.index.json"), QStringLiteral("optimizer.safetensors"), QStringLiteral("rng.safetensors")})
            << 1 << QStringLiteral("none") << QString();
        QTest::newRow("sharded model without index")
            << (small + QStringList {QStringLiteral("model-00001-of-00002.safetensors"), QStringLiteral("model-00002-of-00002.safetensors"),
                                     QStringLiteral("optimizer.safetensors"), QStringLiteral("rng.safetensors")})
            << 1 << QStringLiteral("none") << QStringLiteral("index");
        QTest::newRow("a shard missing")
            << (small + QStringList {QStringLiteral("model.safetensors"), QStringLiteral("optimizer-00001-of-00003.safetensors"),
                                     QStringLiteral("optimizer-00003-of-00003.safetensors"), QStringLiteral("rng.safetensors")})
            << 1 << QStringLiteral("none") << QStringLiteral("2 of the 3 shards of the optimizer");
        QTest::newRow("no rng") << (small + QStringList {QStringLiteral("model.safetensors"), QStringLiteral("optimizer.safetensors")}) << 1 << QStringLiteral("none")
                                << QStringLiteral("rng");
        QTest::newRow("no state") << QStringList {QStringLiteral("config.json"), QStringLiteral("model.safetensors"), QStringLiteral("optimizer.safetensors"),
                                                  QStringLiteral("rng.safetensors")}
                                  << 1 << QStringLiteral("none") << QStringLiteral("state.json");
        const QStringList ddp = small + QStringList {QStringLiteral("model.safetensors"), QStringLiteral("optimizer.safetensors"), QStringLiteral("rng.rank00000.safetensors"),
                                                     QStringLiteral("rng.rank00001.safetensors")};
        QTest::newRow("ddp on two ranks") << ddp << 2 << QStringLiteral("ddp") << QString();
        QTest::newRow("ddp files read as zero2") << ddp << 2 << QStringLiteral("zero2") << QStringLiteral("optimizer");
        QTest::newRow("rank outside the world") << (ddp + QStringList {QStringLiteral("rng.rank00002.safetensors")}) << 2 << QStringLiteral("ddp") << QStringLiteral("rank00002");
        QTest::newRow("fsdp on two ranks")
            << (small + QStringList {QStringLiteral("model.rank00000.safetensors"), QStringLiteral("model.rank00001.safetensors"), QStringLiteral("optimizer.rank00000.safetensors"),
                                     QStringLiteral("optimizer.rank00001.safetensors"), QStringLiteral("rng.rank00000.safetensors"), QStringLiteral("rng.rank00001.safetensors")})
            << 2 << QStringLiteral("fsdp") << QString();
        QTest::newRow("fsdp missing rank 1's model")
            << (small + QStringList {QStringLiteral("model.rank00000.safetensors"), QStringLiteral("optimizer.rank00000.safetensors"), QStringLiteral("optimizer.rank00001.safetensors"),
                                     QStringLiteral("rng.rank00000.safetensors"), QStringLiteral("rng.rank00001.safetensors")})
            << 2 << QStringLiteral("fsdp") << QStringLiteral("model of rank 1");
        QTest::newRow("one process calling itself ddp") << single << 1 << QStringLiteral("ddp") << QStringLiteral("world_size");
    }
    void fileSets()
    {
        QFETCH(QStringList, names);
        QFETCH(int, world);
        QFETCH(QString, strategy);
        QFETCH(QString, refusal);
        std::vector<std::string> list;
        for (const auto &n : names)
            list.push_back(n.toStdString());
        try {
            pb::checkCheckpointFileSet(list, world, strategy.toStdString(), "manifest.json");
            QVERIFY2(refusal.isEmpty(), "accepted a set it should refuse");
        } catch (const pb::InvalidInputError &e) {
            QVERIFY2(!refusal.isEmpty(), e.what());
            QVERIFY2(QString::fromStdString(e.what()).contains(refusal), e.what());
            QVERIFY(QString::fromStdString(e.what()).startsWith(QStringLiteral("manifest.json: ")));
        }
    }

    void eachRankReadsItsOwnShards()
    {
        const std::vector<std::string> names {"model.safetensors", "optimizer.rank00001-00002-of-00002.safetensors", "optimizer.rank00001-00001-of-00002.safetensors",
                                              "optimizer.rank00000.safetensors", "rng.rank00000.safetensors", "rng.rank00001.safetensors"};
        QCOMPARE(pb::checkpointPartFiles(names, CheckpointPart::Optimizer, 1, 2, "zero2"),
                 (std::vector<std::string> {"optimizer.rank00001-00001-of-00002.safetensors", "optimizer.rank00001-00002-of-00002.safetensors"}));
        QCOMPARE(pb::checkpointPartFiles(names, CheckpointPart::Model, 1, 2, "zero2"), (std::vector<std::string> {"model.safetensors"}));
        QCOMPARE(pb::checkpointPartFiles(names, CheckpointPart::Rng, 0, 2, "zero2"), (std::vector<std::string> {"rng.rank00000.safetensors"}));
    }
};

QTEST_GUILESS_MAIN(TestCheckpointLayout)
#include "tst_checkpoint_layout.moc"
