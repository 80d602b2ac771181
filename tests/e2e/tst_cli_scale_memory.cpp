// The data-parallel strategies as a user runs them with `scale` on CPU (two Gloo processes): ZeRO-2
// and FSDP end with DDP's parameters, and each rank's measured peak against the estimator's per-rank
// figure (DDP's buckets, ZeRO-2's share of the gradients and its buckets in flight, FSDP's gathered
// blocks, a vocabulary whose [V, h] gradient outweighs the rest).
#include "ScaleCli.h"

class TestCliScaleMemory : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void zero2MatchesDdpWithLessOptimizerMemory()
    {
        // grad_clip 0.1 is below the tiny model's gradient norm (about 0.9), so clipping acts and
        // zero2's norm over both ranks' shares is exercised.
        QTemporaryDir dir;
        QJsonObject summaries[2];
        const QStringList strategies {QStringLiteral("ddp"), QStringLiteral("zero2")};
        for (int i = 0; i < 2; ++i) {
            const Result r = cli(base(dir) + QStringList {QStringLiteral("--set"), QStringLiteral("train.grad_clip=0.1"), QStringLiteral("--gpus"), QStringLiteral("2"),
                                                          QStringLiteral("--strategy"), strategies[i], QStringLiteral("--no-overlap"), QStringLiteral("--steps"), QStringLiteral("3"),
                                                          QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--dump-dir"), dir.filePath(strategies[i]),
                                                          QStringLiteral("--jsonl")});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            summaries[i] = eventOf(r.out, QStringLiteral("summary"));
            QCOMPARE(summaries[i].value(QStringLiteral("strategy")).toString(), strategies[i]);
        }
        size_t dumped = 0;
        verifyRanksMatchDdp(dir, QStringLiteral("zero2"), dumped);
        if (QTest::currentTestFailed())
            return;

        // Each rank keeps AdamW's two fp32 moments only for the parameters it owns: against DDP (here
        // without its persistent overlap buckets, so only the optimizer state differs) it saves
        // 2 x 4 bytes for every parameter another rank owns.
        const qint64 parameters = static_cast<qint64>(dumped);
        const QJsonArray ddpPeaks = summaries[0].value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        const QJsonArray zeroPeaks = summaries[1].value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        const QJsonArray ddpOwned = summaries[0].value(QStringLiteral("per_rank_optimizer_parameters")).toArray();
        const QJsonArray owned = summaries[1].value(QStringLiteral("per_rank_optimizer_parameters")).toArray();
        QCOMPARE(owned.size(), 2);
        QCOMPARE(static_cast<qint64>(owned[0].toDouble() + owned[1].toDouble()), parameters);
        QCOMPARE(static_cast<qint64>(ddpOwned[0].toDouble()), parameters);
        for (int r = 0; r < 2; ++r) {
            const double saved = ddpPeaks[r].toDouble() - zeroPeaks[r].toDouble();
            const double expected = 8.0 * static_cast<double>(parameters - static_cast<qint64>(owned[r].toDouble()));
            QVERIFY2(expected > 0.4 * 8.0 * static_cast<double>(parameters), "the parameters are not shared out between the ranks");
            QVERIFY2(std::abs(saved - expected) <= 0.05 * expected, qPrintable(QStringLiteral("rank %1 saved %2 bytes, expected %3").arg(r).arg(saved).arg(expected)));
        }
        QVERIFY(summaries[1].contains(QStringLiteral("predicted_per_rank_peak_allocated_bytes")));
    }

    // The estimator's per-rank peak against the ranks' measured one, DDP with its persistent overlap
    // buckets (every gradient, held from the first step on) and without them: within 0.5% both ways
    // (the buckets were missing from every phase but the end of backward: -4.1% on the llama fixture).
    void ddpEstimateHoldsTheBuckets_data()
    {
        QTest::addColumn<bool>("overlap");
        QTest::newRow("overlap") << true;
        QTest::newRow("no overlap") << false;
    }
    void ddpEstimateHoldsTheBuckets()
    {
        QFETCH(bool, overlap);
        QTemporaryDir dir;
        QStringList args = base(dir) + QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), QStringLiteral("ddp"),
                                                    QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--jsonl")};
        if (!overlap)
            args << QStringLiteral("--no-overlap");
        const Result r = cli(args);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        const double predicted = summary.value(QStringLiteral("predicted_per_rank_peak_allocated_bytes")).toDouble();
        const QJsonArray peaks = summary.value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        QCOMPARE(peaks.size(), 2);
        for (const auto &peak : peaks) {
            const double measured = peak.toDouble();
            QVERIFY2(std::abs(predicted - measured) <= 0.005 * measured, qPrintable(QStringLiteral("estimate %1, measured %2").arg(predicted).arg(measured)));
        }
    }

    // ZeRO-2 with gradients over many buckets (1 MiB each; 27.8 MB of them, the embedding's and the
    // head's 2 MiB each reduced in their own .grad): each bucket is reduced to its owner during the
    // last backward and the other rank drops those gradients, so a rank's peak is its share of the
    // gradients plus the buckets in flight, as the estimate counts, and the parameters stay DDP's
    // through accumulation and clipping. (The engine held every gradient whole until after the
    // backward before: at a 512-token vocabulary the 1 MiB run then peaked 20% above the estimate.)
    void zero2ShardsGradientsDuringBackward_data()
    {
        QTest::addColumn<int>("accumulation");
        QTest::newRow("1 micro-batch") << 1;
        QTest::newRow("2 micro-batches") << 2;
    }
    void zero2ShardsGradientsDuringBackward()
    {
        QFETCH(int, accumulation);
        QTemporaryDir dir;
        const QString config = importParityConfig(dir, QStringLiteral("llama"),
                                                  {QStringLiteral("model.hidden_size=256"), QStringLiteral("model.head_dim=64"), QStringLiteral("model.intermediate_size=1024"),
                                                   QStringLiteral("model.layers=6"), QStringLiteral("model.vocab_size=2048"), QStringLiteral("train.seq_len=16"),
                                                   QStringLiteral("train.micro_batch=1"), QStringLiteral("train.grad_clip=0.1"),
                                                   QStringLiteral("train.grad_accum=") + QString::number(accumulation)},
                                                  QStringLiteral("wide.json"));
        QVERIFY(!config.isEmpty());
        QJsonObject summaries[2];
        const QStringList strategies {QStringLiteral("ddp"), QStringLiteral("zero2")};
        for (int i = 0; i < 2; ++i) {
            const Result r = cli({QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("scale"), QStringLiteral("--config"), config, QStringLiteral("--db"),
                                  dir.filePath(QStringLiteral("history.db")), QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), strategies[i],
                                  QStringLiteral("--bucket-mb"), QStringLiteral("1"), QStringLiteral("--steps"), QStringLiteral("3"), QStringLiteral("--warmup"),
                                  QStringLiteral("1"), QStringLiteral("--dump-dir"), dir.filePath(strategies[i]), QStringLiteral("--jsonl")});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            summaries[i] = eventOf(r.out, QStringLiteral("summary"));
        }
        size_t parameters = 0;
        verifyRanksMatchDdp(dir, QStringLiteral("zero2"), parameters);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(parameters > 6000000);
        const double predicted = summaries[1].value(QStringLiteral("predicted_per_rank_peak_allocated_bytes")).toDouble();
        const double measured = largestRankPeak(summaries[1]);
        // (Measured: -0.60% and +0.41%, the same in every run.)
        QVERIFY2(std::abs(predicted - measured) <= 0.01 * measured, qPrintable(QStringLiteral("estimate %1, measured %2").arg(predicted).arg(measured)));
    }

    // The per-rank estimate where one [V, h] gradient outweighs the rest: Gemma 2's parity config at
    // a vocabulary of 65,536 and 8 tokens a step (SGD). Eager DDP without overlap flattens its
    // buckets after the backward, once a tied embedding's two gradients and their sum are gone
    // (+20.1% with both counted at once); FSDP's root unit makes those gradients whole (-16.5%
    // from its shard's share). ZeRO-2 untied: each owner's flat bucket is let go as soon as its
    // reduce is done (before, most runs peaked one 8.5 MB flat higher, -14.1%, while Gloo's thread
    // still held the last one; not every run, so either row may pass on the old engine). Within 0.5%.
    void largeVocabularyEstimatePerRank_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::newRow("eager, tied, ddp without overlap") << QStringList {QStringLiteral("--strategy"), QStringLiteral("ddp"), QStringLiteral("--no-overlap")};
        QTest::newRow("eager, tied, fsdp") << QStringList {QStringLiteral("--strategy"), QStringLiteral("fsdp"), QStringLiteral("--no-overlap")};
        QTest::newRow("fused, tied, ddp without overlap") << QStringList {QStringLiteral("--strategy"), QStringLiteral("ddp"), QStringLiteral("--no-overlap"),
                                                                          QStringLiteral("--set"), QStringLiteral("train.kernels=fused")};
        QTest::newRow("eager, untied, zero2") << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--set"),
                                                              QStringLiteral("model.tie_embeddings=false")};
        QTest::newRow("fused, untied, zero2") << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--set"),
                                                              QStringLiteral("model.tie_embeddings=false"), QStringLiteral("--set"), QStringLiteral("train.kernels=fused")};
        // Untied and eager: the head's weight gradient in bf16 and its fp32 cast at once (-1.66%
        // under FSDP without that); with 2 micro-batches neither DDP without overlap nor ZeRO-2 has
        // its buckets during the backward (+6.45% and +15.5% with them).
        const QStringList untied {QStringLiteral("--set"), QStringLiteral("model.tie_embeddings=false")};
        const QStringList twoMicro {QStringLiteral("--set"), QStringLiteral("train.grad_accum=2")};
        QTest::newRow("eager, untied, fsdp") << QStringList {QStringLiteral("--strategy"), QStringLiteral("fsdp"), QStringLiteral("--no-overlap")} + untied;
        QTest::newRow("eager, untied, ddp without overlap, 2 micro-batches")
            << QStringList {QStringLiteral("--strategy"), QStringLiteral("ddp"), QStringLiteral("--no-overlap")} + untied + twoMicro;
        QTest::newRow("eager, untied, zero2, 2 micro-batches") << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2")} + untied + twoMicro;
        // Buckets of 1 MiB: the head's and the embedding's gradients (8 MiB each) are reduced in their
        // own .grad, the head's whole on both ranks until then.
        const QStringList smallBuckets {QStringLiteral("--bucket-mb"), QStringLiteral("1")};
        QTest::newRow("eager, untied, zero2, 2 micro-batches, 1 MiB buckets")
            << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2")} + untied + twoMicro + smallBuckets;
        QTest::newRow("fused, untied, zero2, 2 micro-batches, 1 MiB buckets")
            << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--set"), QStringLiteral("train.kernels=fused")} + untied + twoMicro + smallBuckets;
        // AdamW: the owner of the head updates its [V, h] whole, the step's transient unshared
        // (-10.65% when the estimate halved it).
        QTest::newRow("eager, untied, zero2, adamw, 1 MiB buckets")
            << QStringList {QStringLiteral("--strategy"), QStringLiteral("zero2"), QStringLiteral("--set"), QStringLiteral("train.optimizer=adamw")} + untied + smallBuckets;
    }
    void largeVocabularyEstimatePerRank()
    {
        QFETCH(QStringList, args);
        QTemporaryDir dir;
        // The config alone: the fixture's weights are for its own 128-token vocabulary.
        const QString config = importParityConfig(dir, QStringLiteral("gemma2"),
                                                  {QStringLiteral("model.vocab_size=65536"), QStringLiteral("train.seq_len=8"), QStringLiteral("train.micro_batch=1"),
                                                   QStringLiteral("train.optimizer=sgd")},
                                                  QStringLiteral("g2.json"));
        QVERIFY(!config.isEmpty());
        const Result r = cli(QStringList {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("scale"), QStringLiteral("--config"), config,
                                          QStringLiteral("--db"), dir.filePath(QStringLiteral("history.db")), QStringLiteral("--gpus"), QStringLiteral("2"),
                                          QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"), QStringLiteral("1"), QStringLiteral("--jsonl")} +
                             args);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = eventOf(r.out, QStringLiteral("summary"));
        const double predicted = summary.value(QStringLiteral("predicted_per_rank_peak_allocated_bytes")).toDouble();
        const double measured = largestRankPeak(summary);
        QVERIFY(measured > 0);
        QVERIFY2(std::abs(predicted - measured) <= 0.005 * measured, qPrintable(QStringLiteral("estimate %1, measured %2").arg(predicted).arg(measured)));
    }

    void fsdpMatchesDdpWithLessMemory_data()
    {
        QTest::addColumn<QStringList>("sets");
        // Whether sharding must lower the peak: with full training the sharded states dominate;
        // with LoRA over 16-bit frozen weights on the tiny model they are less than the gathered root.
        QTest::addColumn<bool>("lower");
        // The estimate against the ranks' peak: within 0.5% (it missed the root unit, its gradient
        // and autocast's copies before: +6.6% .. +10.2% here, -6.4% on the llama fixture); with
        // recompute it is over by 1.25% on this model (a rebuilt block's gather, not found).
        QTest::addColumn<double>("tolerance");
        QTest::newRow("full, clipped") << QStringList {QStringLiteral("train.grad_clip=0.1")} << true << 0.005;
        QTest::newRow("recompute, accumulation 2") << QStringList {QStringLiteral("train.recompute=true"), QStringLiteral("train.grad_accum=2")} << false << 0.02;
        QTest::newRow("accumulation 2") << QStringList {QStringLiteral("train.grad_accum=2")} << false << 0.005;
        QTest::newRow("lora") << QStringList {QStringLiteral("train.mode=lora")} << true << 0.005;
        // Frozen bfloat16 weights: Gloo has no bfloat16 collectives, so they travel as float32.
        QTest::newRow("lora, bf16-mixed") << QStringList {QStringLiteral("train.mode=lora"), QStringLiteral("train.precision=bf16-mixed")} << false << 0.005;
    }

    void fsdpMatchesDdpWithLessMemory()
    {
        // FSDP shards parameters, gradients and optimizer state and gathers one block at a time;
        // the mathematics is DDP's, so both ranks end with DDP's parameters (float tolerance).
        QFETCH(QStringList, sets);
        QFETCH(bool, lower);
        QFETCH(double, tolerance);
        QTemporaryDir dir;
        QJsonObject summaries[2];
        const QStringList strategies {QStringLiteral("ddp"), QStringLiteral("fsdp")};
        QStringList overrides;
        for (const auto &s : sets)
            overrides << QStringLiteral("--set") << s;
        for (int i = 0; i < 2; ++i) {
            const Result r = cli(base(dir) + overrides + QStringList {QStringLiteral("--gpus"), QStringLiteral("2"), QStringLiteral("--strategy"), strategies[i],
                                                                      QStringLiteral("--no-overlap"), QStringLiteral("--steps"), QStringLiteral("2"), QStringLiteral("--warmup"),
                                                                      QStringLiteral("1"), QStringLiteral("--dump-dir"), dir.filePath(strategies[i]), QStringLiteral("--jsonl")});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            summaries[i] = eventOf(r.out, QStringLiteral("summary"));
            QCOMPARE(summaries[i].value(QStringLiteral("strategy")).toString(), strategies[i]);
        }
        size_t parameters = 0;
        verifyRanksMatchDdp(dir, QStringLiteral("fsdp"), parameters);
        if (QTest::currentTestFailed())
            return;

        const QJsonArray ddpPeaks = summaries[0].value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        const QJsonArray fsdpPeaks = summaries[1].value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray();
        const double predicted = summaries[1].value(QStringLiteral("predicted_per_rank_peak_allocated_bytes")).toDouble();
        QVERIFY(predicted > 0);
        for (int r = 0; r < 2; ++r) {
            const double measured = fsdpPeaks[r].toDouble();
            QVERIFY2(!lower || measured < ddpPeaks[r].toDouble(),
                     qPrintable(QStringLiteral("rank %1: fsdp peak %2 not below ddp's %3").arg(r).arg(measured).arg(ddpPeaks[r].toDouble())));
            QVERIFY2(std::abs(measured - predicted) <= tolerance * measured,
                     qPrintable(QStringLiteral("rank %1: fsdp peak %2, estimator %3").arg(r).arg(measured).arg(predicted)));
        }
        // Each rank's optimizer holds half the (padded) trainable parameters.
        const QJsonArray owned = summaries[1].value(QStringLiteral("per_rank_optimizer_parameters")).toArray();
        const QJsonArray ddpOwned = summaries[0].value(QStringLiteral("per_rank_optimizer_parameters")).toArray();
        QVERIFY(owned[0].toDouble() >= ddpOwned[0].toDouble() / 2 && owned[0].toDouble() <= ddpOwned[0].toDouble() / 2 + 64);
    }

};

QTEST_GUILESS_MAIN(TestCliScaleMemory)
#include "tst_cli_scale_memory.moc"
