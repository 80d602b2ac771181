// What watch reads from a job's own output when the probe is absent: the Trainer's logged dicts and
// tqdm meters exactly as transformers, tqdm and Lightning print them, out-of-memory reports from
// PyTorch and the kernel, and the look-alikes that must not count. Long lines stay fast.
#include "watch/LogRecognizer.h"

#include <QElapsedTimer>
#include <QMap>
#include <QtTest>

#include <cmath>

using namespace pb::watch;

namespace {

// Expected fields as "key=value" words: loss lr epoch gn step total sps (seconds per step) and itps
// (iterations per second, so sps = 1/itps). A key that is absent must be unset; "nan" expects NaN.
QMap<QString, QString> parseExpect(const QString &expect)
{
    QMap<QString, QString> fields;
    const QStringList words = expect.split(QLatin1Char(' '), Qt::SkipEmptyParts);
    for (const QString &word : words) {
        const qsizetype eq = word.indexOf(QLatin1Char('='));
        fields.insert(word.left(eq), word.mid(eq + 1));
    }
    return fields;
}

bool close(double actual, double expected)
{
    return actual == expected || std::abs(actual - expected) <= 1e-9 * std::max(1.0, std::abs(expected));
}

// Empty when the field matches, otherwise what differs.
template <typename T>
QString mismatch(const char *name, const std::optional<T> &actual, const QMap<QString, QString> &fields, const char *key)
{
    const QString k = QLatin1String(key);
    if (!fields.contains(k))
        return actual ? QStringLiteral("%1 should be unset, is %2").arg(QLatin1String(name)).arg(static_cast<double>(*actual)) : QString();
    if (!actual)
        return QStringLiteral("%1 unset, expected %2").arg(QLatin1String(name), fields.value(k));
    const QString want = fields.value(k);
    const double value = static_cast<double>(*actual);
    if (want == QLatin1String("nan"))
        return std::isnan(value) ? QString() : QStringLiteral("%1 is %2, expected NaN").arg(QLatin1String(name)).arg(value);
    double expected = want.toDouble();
    if (k == QLatin1String("itps"))
        expected = 1.0 / expected;
    return close(value, expected) ? QString() : QStringLiteral("%1 is %2, expected %3").arg(QLatin1String(name)).arg(value, 0, 'g', 12).arg(expected, 0, 'g', 12);
}

QString kindName(const std::optional<RecognizedLine> &r)
{
    if (!r)
        return QStringLiteral("none");
    switch (r->kind) {
    case RecognizedLine::Kind::TrainerLog: return QStringLiteral("trainer");
    case RecognizedLine::Kind::TqdmProgress: return QStringLiteral("tqdm");
    case RecognizedLine::Kind::TrainerArguments: return QStringLiteral("args");
    }
    return QStringLiteral("?");
}

QString repeated(const QString &piece, int times)
{
    QString s;
    s.reserve(piece.size() * times);
    for (int i = 0; i < times; ++i)
        s += piece;
    return s;
}

const QString esc = QString(QChar(0x1b));

} // namespace

class TestLogRecognizer : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void recognize_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("kind"); // none, trainer, tqdm, args
        QTest::addColumn<QString>("expect");
        QTest::addColumn<QString>("description");

        // --- Trainer dicts: ProgressCallback.on_log writes str(logs) through tqdm.write;
        // PrinterCallback prints the same dict. Older releases print Python floats ...
        QTest::newRow("trainer: loss grad_norm lr epoch") << QStringLiteral("{'loss': 2.3456, 'grad_norm': 1.2345678, 'learning_rate': 5e-05, 'epoch': 0.01}")
                                                          << "trainer" << "loss=2.3456 gn=1.2345678 lr=5e-05 epoch=0.01" << "";
        QTest::newRow("trainer: no grad_norm, lr 0.0001") << QStringLiteral("{'loss': 1.8, 'learning_rate': 0.0001, 'epoch': 1.0}")
                                                          << "trainer" << "loss=1.8 lr=0.0001 epoch=1" << "";
        // ... newer ones format every float with "{v:.4g}", so the values arrive as strings.
        QTest::newRow("trainer: .4g strings") << QStringLiteral("{'loss': '2.346', 'grad_norm': '1.235', 'learning_rate': '5e-05', 'epoch': '0.01'}")
                                              << "trainer" << "loss=2.346 gn=1.235 lr=5e-05 epoch=0.01" << "";
        QTest::newRow("trainer: .4g exponent") << QStringLiteral("{'loss': '1.235e+04', 'grad_norm': 'inf', 'learning_rate': '1.5e-06', 'epoch': '2'}")
                                               << "trainer" << "loss=12350 gn=inf lr=1.5e-06 epoch=2" << "";
        QTest::newRow("trainer: nan grad_norm, int epoch") << QStringLiteral("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 3}")
                                                           << "trainer" << "loss=0 gn=nan lr=2e-05 epoch=3" << "";
        QTest::newRow("trainer: TRL extra keys") << QStringLiteral("{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 1.9999e-05, 'num_tokens': 204800.0, 'mean_token_accuracy': 0.61, 'epoch': 0.05}")
                                                 << "trainer" << "loss=1.2 gn=0.5 lr=1.9999e-05 epoch=0.05" << "";
        QTest::newRow("trainer: numpy 2 repr") << QStringLiteral("{'loss': np.float64(2.31), 'learning_rate': 5e-05, 'epoch': 0.5}")
                                               << "trainer" << "loss=2.31 lr=5e-05 epoch=0.5" << "";
        QTest::newRow("trainer: grad_norm a tensor") << QStringLiteral("{'loss': 2.31, 'grad_norm': tensor(0.8125, device='cuda:0'), 'learning_rate': 5e-05, 'epoch': 0.1}")
                                                     << "trainer" << "loss=2.31 gn=0.8125 lr=5e-05 epoch=0.1" << "";
        QTest::newRow("trainer: torchrun rank tag") << QStringLiteral("[rank0]: {'loss': 2.0, 'learning_rate': 3e-05, 'epoch': 0.2}")
                                                    << "trainer" << "loss=2 lr=3e-05 epoch=0.2" << "";
        QTest::newRow("trainer: after tqdm.write clears the bar") << QStringLiteral("\r                    \r{'loss': 2.5, 'learning_rate': 5e-05, 'epoch': 0.02}\r")
                                                                  << "trainer" << "loss=2.5 lr=5e-05 epoch=0.02" << "";
        QTest::newRow("trainer: coloured") << esc + QStringLiteral("[32m{'loss': 2.5, 'epoch': 0.02}") + esc + QStringLiteral("[0m")
                                           << "trainer" << "loss=2.5 epoch=0.02" << "";
        QTest::newRow("trainer: JSON quoting") << QStringLiteral("{\"loss\": 2.31, \"learning_rate\": 5e-05, \"epoch\": 0.1}")
                                               << "trainer" << "loss=2.31 lr=5e-05 epoch=0.1" << "";
        // eval_loss is a validation figure, not the training loss: a TrainerLog with loss unset.
        QTest::newRow("trainer: eval only") << QStringLiteral("{'eval_loss': 2.1034, 'eval_runtime': 1.234, 'eval_samples_per_second': 81.03, 'eval_steps_per_second': 10.13, 'epoch': 1.0}")
                                            << "trainer" << "epoch=1" << "";
        QTest::newRow("trainer: eval only, strings") << QStringLiteral("{'eval_loss': '2.103', 'eval_runtime': '1.234', 'eval_samples_per_second': '81.03', 'eval_steps_per_second': '10.13', 'epoch': '1'}")
                                                     << "trainer" << "epoch=1" << "";
        // The end-of-training summary: train_loss is the run's average, and it is not a step.
        QTest::newRow("trainer: final summary") << QStringLiteral("{'train_runtime': 123.4567, 'train_samples_per_second': 25.92, 'train_steps_per_second': 3.24, 'train_loss': 2.2871, 'epoch': 1.0}")
                                                << "trainer" << "epoch=1" << "";
        QTest::newRow("dict: a config, no loss or epoch") << QStringLiteral("{'learning_rate': 5e-05, 'per_device_train_batch_size': 8}") << "none" << "" << "";
        QTest::newRow("dict: after other text") << QStringLiteral("Config: {'loss': 2.0, 'epoch': 1}") << "none" << "" << "";
        QTest::newRow("dict: a batch") << QStringLiteral("{'input_ids': [[1, 2, 3]], 'labels': [[1, 2, 3]]}") << "none" << "" << "";
        QTest::newRow("dict: loss not a number") << QStringLiteral("{'loss': 'n/a'}") << "none" << "" << "";
        QTest::newRow("dict: cut short") << QStringLiteral("{'loss': 2.3, 'epoch': 0.1") << "none" << "" << "";

        // --- TrainingArguments' repr, one field per line: logging_steps says what a dict stands for.
        QTest::newRow("args: logging_steps") << QStringLiteral("logging_steps=10,") << "args" << "logevery=10" << "";
        QTest::newRow("args: rank tag, no comma") << QStringLiteral("[rank0]: logging_steps=500") << "args" << "logevery=500" << "";
        QTest::newRow("args: a ratio is not steps") << QStringLiteral("logging_steps=0.1,") << "none" << "" << "";
        QTest::newRow("args: zero") << QStringLiteral("logging_steps=0,") << "none" << "" << "";
        QTest::newRow("args: inside prose") << QStringLiteral("we set logging_steps=10, see below") << "none" << "" << "";
        QTest::newRow("args: other field") << QStringLiteral("eval_steps=10,") << "none" << "" << "";

        // --- tqdm meters: '{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]'.
        QTest::newRow("tqdm: Trainer bar") << QStringLiteral("  1%|          | 12/1000 [00:03<04:10,  3.98it/s]")
                                           << "tqdm" << "step=12 total=1000 itps=3.98" << "";
        QTest::newRow("tqdm: s/it") << QStringLiteral(" 30%|███       | 3/10 [00:05<00:12,  1.73s/it]") << "tqdm" << "step=3 total=10 sps=1.73" << "";
        QTest::newRow("tqdm: no rate yet") << QStringLiteral("  0%|          | 0/100 [00:00<?, ?it/s]") << "tqdm" << "step=0 total=100" << "";
        QTest::newRow("tqdm: r_bar alone") << QStringLiteral("12/100 [00:03<00:22,  3.98it/s]") << "tqdm" << "step=12 total=100 itps=3.98" << "";
        QTest::newRow("tqdm: hours, desc") << QStringLiteral("Training:  50%|█████     | 5000/10000 [1:23:45<1:23:45,  1.01s/it]")
                                           << "tqdm" << "step=5000 total=10000 sps=1.01" << "Training";
        QTest::newRow("tqdm: fast") << QStringLiteral("100%|██████████| 1000/1000 [00:01<00:00, 812.34it/s]") << "tqdm" << "step=1000 total=1000 itps=812.34" << "";
        QTest::newRow("tqdm: ascii bar") << QStringLiteral("Epoch 1:  40%|####      | 4/10 [00:01<00:01,  3.50it/s]") << "tqdm" << "step=4 total=10 itps=3.5" << "Epoch 1";
        QTest::newRow("tqdm: coloured bar") << QStringLiteral("Epoch 1:  40%|") + esc + QStringLiteral("[32m████      ") + esc + QStringLiteral("[0m| 4/10 [00:01<00:01,  3.50it/s]")
                                            << "tqdm" << "step=4 total=10 itps=3.5" << "Epoch 1";
        QTest::newRow("tqdm: \\r redraws, last wins") << QStringLiteral("\r  1%|          | 1/100 [00:01<01:39,  1.00s/it]\r  2%|▏         | 2/100 [00:01<00:49,  1.98it/s]")
                                                      << "tqdm" << "step=2 total=100 itps=1.98" << "";
        QTest::newRow("tqdm: stacked bar cursor-up") << esc + QStringLiteral("[A") + esc + QStringLiteral("[A  2%|▏         | 2/100 [00:01<00:49,  1.98it/s]")
                                                     << "tqdm" << "step=2 total=100 itps=1.98" << "";
        QTest::newRow("tqdm: ncols=0") << QStringLiteral("Epoch 0:  40% 4/10 [00:01<00:01,  3.50it/s]") << "tqdm" << "step=4 total=10 itps=3.5" << "Epoch 0";
        QTest::newRow("tqdm: no total") << QStringLiteral("123it [00:05, 24.37it/s]") << "tqdm" << "step=123 itps=24.37" << "";
        QTest::newRow("tqdm: no total, desc, s/it") << QStringLiteral("Batches: 7it [00:10,  1.43s/it]") << "tqdm" << "step=7 sps=1.43" << "Batches";
        QTest::newRow("tqdm: total unknown") << QStringLiteral("Steps: 7/? [00:10<?,  1.43s/it]") << "tqdm" << "step=7 sps=1.43" << "Steps";
        QTest::newRow("tqdm: zero rate") << QStringLiteral("  0%|          | 0/100 [00:00<?,  0.00it/s]") << "tqdm" << "step=0 total=100" << "";
        // Lightning: bar_format '{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]'
        // and its Tqdm.format_num pads floats to five characters.
        QTest::newRow("lightning: train_loss") << QStringLiteral("Epoch 0:  40%|████      | 4/10 [00:01<00:01,  3.50it/s, v_num=0, train_loss=2.31]")
                                               << "tqdm" << "step=4 total=10 itps=3.5 loss=2.31" << "Epoch 0";
        QTest::newRow("lightning: _step before _epoch") << QStringLiteral("Epoch 2: 100%|██████████| 10/10 [00:02<00:00,  4.12it/s, v_num=3, train_loss_step=1.870, train_loss_epoch=1.950]")
                                                        << "tqdm" << "step=10 total=10 itps=4.12 loss=1.87" << "Epoch 2";
        QTest::newRow("lightning: loss=, exponent") << QStringLiteral("Epoch 0:  10%|█         | 1/10 [00:00<00:05,  1.50it/s, loss=2.31e-5]")
                                                    << "tqdm" << "step=1 total=10 itps=1.5 loss=2.31e-5" << "Epoch 0";
        QTest::newRow("lightning: val_loss is not loss") << QStringLiteral("Epoch 0: 100%|██████████| 10/10 [00:02<00:00,  4.12it/s, v_num=0, val_loss=1.900]")
                                                         << "tqdm" << "step=10 total=10 itps=4.12" << "Epoch 0";
        QTest::newRow("lightning: validation bar") << QStringLiteral("Validation DataLoader 0:  50%|█████     | 5/10 [00:00<00:00, 20.00it/s]")
                                                   << "tqdm" << "step=5 total=10 itps=20" << "Validation DataLoader 0";
        QTest::newRow("tqdm: checkpoint shards") << QStringLiteral("Loading checkpoint shards: 100%|██████████| 2/2 [00:01<00:00,  1.50it/s]")
                                                 << "tqdm" << "step=2 total=2 itps=1.5" << "Loading checkpoint shards";
        // Other units and unit_scale are not steps.
        QTest::newRow("not steps: datasets map") << QStringLiteral("Map: 100%|██████████| 1000/1000 [00:00<00:00, 12345.67 examples/s]") << "none" << "" << "";
        QTest::newRow("not steps: unit without space") << QStringLiteral("Tokenizing: 100%|██████████| 1000/1000 [00:00<00:00, 10.5examples/s]") << "none" << "" << "";
        QTest::newRow("not steps: custom unit s/x") << QStringLiteral("Rollout:  20%|██        | 2/10 [00:04<00:16,  2.00s/items]") << "none" << "" << "";
        QTest::newRow("not steps: unit_scale k") << QStringLiteral("Downloading:  45%|████▌     | 1.23k/2.73k [00:03<00:04, 412it/s]") << "none" << "" << "";
        QTest::newRow("not steps: unit_scale small n") << QStringLiteral(" 50%|█████     | 12.0/24.0 [00:03<00:03, 4.00it/s]") << "none" << "" << "";
        QTest::newRow("not steps: unit_scale no total") << QStringLiteral("12.0it [00:03, 4.00it/s]") << "none" << "" << "";
        QTest::newRow("not steps: bytes") << QStringLiteral("model.safetensors:  12%|█▏        | 126M/1.03G [00:02<00:15, 58.9MB/s]") << "none" << "" << "";
        QTest::newRow("not steps: prefixed rate") << QStringLiteral("  5%|▌         | 5000/100000 [00:01<00:23, 4.21kit/s]") << "none" << "" << "";
        // it/s in other text.
        QTest::newRow("prose: throughput") << QStringLiteral("Throughput: 3.98it/s over the last 100 steps") << "none" << "" << "";
        QTest::newRow("prose: count and rate") << QStringLiteral("eval: 12/100 samples done, 3.98it/s") << "none" << "" << "";
        QTest::newRow("prose: bracket no counter") << QStringLiteral("speed [00:03<00:22, 3.98it/s]") << "none" << "" << "";
        QTest::newRow("prose: log line") << QStringLiteral("INFO:root:starting training with 8 GPUs") << "none" << "" << "";
        QTest::newRow("empty") << QString() << "none" << "" << "";
        QTest::newRow("blank") << QStringLiteral("   \t ") << "none" << "" << "";
        QTest::newRow("only \\r") << QStringLiteral("\r") << "none" << "" << "";
        QTest::newRow("bar cleared by leave=False") << QStringLiteral(" 50%|█████     | 5/10 [00:00<00:00, 20.00it/s]\r                              \r") << "none" << "" << "";
    }

    void recognize()
    {
        QFETCH(QString, line);
        QFETCH(QString, kind);
        QFETCH(QString, expect);
        QFETCH(QString, description);
        const std::optional<RecognizedLine> r = recognizeLogLine(line);
        QCOMPARE(kindName(r), kind);
        if (!r)
            return;
        const QMap<QString, QString> fields = parseExpect(expect);
        const QStringList differences = QStringList {
            mismatch("loss", r->loss, fields, "loss"),
            mismatch("learningRate", r->learningRate, fields, "lr"),
            mismatch("epoch", r->epoch, fields, "epoch"),
            mismatch("gradNorm", r->gradNorm, fields, "gn"),
            mismatch("step", r->step, fields, "step"),
            mismatch("total", r->total, fields, "total"),
            mismatch("secondsPerStep", r->secondsPerStep, fields, fields.contains(QStringLiteral("itps")) ? "itps" : "sps"),
            mismatch("loggingSteps", r->loggingSteps, fields, "logevery"),
        };
        const QString failed = differences.filter(QRegularExpression(QStringLiteral("."))).join(QStringLiteral("; "));
        QVERIFY2(failed.isEmpty(), qPrintable(failed));
        QCOMPARE(r->description, description);
    }

    void outOfMemory_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<bool>("oom");

        // c10/cuda/CUDACachingAllocator.cpp, current and pre-2.1 wording, and its HIP build.
        QTest::newRow("torch.OutOfMemoryError CUDA") << QStringLiteral("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 138.46 GiB memory in use. Of the allocated memory 136.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)") << true;
        QTest::newRow("torch.cuda.OutOfMemoryError old wording") << QStringLiteral("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.72 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.") << true;
        QTest::newRow("RuntimeError CUDA out of memory (torch < 1.13)") << QStringLiteral("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.72 GiB reserved in total by PyTorch)") << true;
        QTest::newRow("torch.OutOfMemoryError HIP") << QStringLiteral("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.31 GiB. GPU 0 has a total capacity of 128.00 GiB of which 780.24 MiB is free. Of the allocated memory 57.70 GiB is allocated by PyTorch, and 75.82 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_HIP_ALLOC_CONF=expandable_segments:True to avoid fragmentation.") << true;
        QTest::newRow("HIP allocator message alone") << QStringLiteral("HIP out of memory. Tried to allocate 432.00 MiB. GPU 0 has a total capacity of 15.92 GiB of which 7.12 GiB is free.") << true;
        QTest::newRow("exception name, other message") << QStringLiteral("torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)") << true;
        QTest::newRow("torch.cuda.OutOfMemoryError terse") << QStringLiteral("torch.cuda.OutOfMemoryError: CUDA out of memory.") << true;
        QTest::newRow("rank tag, exception name") << QStringLiteral("[rank3]: torch.OutOfMemoryError: Allocation on device 3 would exceed allowed memory. (out of memory)") << true;
        QTest::newRow("coloured traceback line") << esc + QStringLiteral("[1;31mtorch.OutOfMemoryError") + esc + QStringLiteral("[0m: ") + esc + QStringLiteral("[35mAllocation on device 0 would exceed allowed memory.") + esc + QStringLiteral("[0m") << true;
        // c10/cuda/CUDAException.cpp: "CUDA error: " + cudaGetErrorString(cudaErrorMemoryAllocation).
        QTest::newRow("RuntimeError CUDA error") << QStringLiteral("RuntimeError: CUDA error: out of memory") << true;
        QTest::newRow("RuntimeError HIP error") << QStringLiteral("RuntimeError: HIP error: out of memory") << true;
        QTest::newRow("--tee prefix, CUDA error") << QStringLiteral("[default0]:RuntimeError: CUDA error: out of memory") << true;
        QTest::newRow("CUDA driver error") << QStringLiteral("RuntimeError: CUDA driver error: out of memory") << true;
        // c10/core/impl/alloc_cpu.cpp.
        QTest::newRow("CPU allocator, not enough memory") << QStringLiteral("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 37984010240 bytes.") << true;
        QTest::newRow("CPU allocator, can't allocate") << QStringLiteral("RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 2359296 bytes. Error code 12 (Cannot allocate memory)") << true;
        // mm/oom_kill.c as dmesg and journalctl show it.
        QTest::newRow("kernel OOM killer") << QStringLiteral("[123456.789012] Out of memory: Killed process 1234 (python3) total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:200000kB oom_score_adj:0") << true;
        QTest::newRow("kernel memcg OOM, journal") << QStringLiteral("Jan 01 12:00:00 host kernel: Memory cgroup out of memory: Killed process 4321 (pt_main_thread) total-vm:81234567kB, anon-rss:65432100kB, file-rss:1024kB, shmem-rss:0kB, UID:1000 pgtables:150000kB oom_score_adj:0") << true;
        QTest::newRow("kernel OOM, before 5.1, choice") << QStringLiteral("[ 1234.567890] Out of memory: Kill process 1234 (python3) score 912 or sacrifice child") << true;
        QTest::newRow("kernel OOM, before 5.1, kill") << QStringLiteral("[ 1234.567900] Killed process 1234 (python3) total-vm:123456kB, anon-rss:65432kB, file-rss:0kB, shmem-rss:0kB") << true;
        QTest::newRow("glued to a progress bar") << QStringLiteral("  5%|▌         | 5/100 [00:05<01:35,  1.00it/s]torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.") << true;

        // Conservative: only the phrases above, in their case, count.
        QTest::newRow("no: checking for conditions") << QStringLiteral("checking for out of memory conditions") << false;
        QTest::newRow("no: traceback source, string test") << QStringLiteral("    if \"CUDA out of memory\" in str(e):") << false;
        QTest::newRow("no: traceback source, except") << QStringLiteral("    except torch.cuda.OutOfMemoryError:") << false;
        QTest::newRow("no: traceback source, except as") << QStringLiteral("    except torch.OutOfMemoryError as e:") << false;
        QTest::newRow("no: name in prose") << QStringLiteral("The handler catches torch.OutOfMemoryError: it retries with a smaller batch") << false;
        QTest::newRow("no: name without message") << QStringLiteral("torch.OutOfMemoryError") << false;
        QTest::newRow("no: retry log") << QStringLiteral("the allocator retried after CUDA out of memory, batch size now 8") << false;
        QTest::newRow("no: allocator setting") << QStringLiteral("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") << false;
        QTest::newRow("no: oom_score_adj") << QStringLiteral("oom_score_adj set to 0 for pid 1234") << false;
        QTest::newRow("no: shell Killed") << QStringLiteral("Killed") << false;
        QTest::newRow("no: Killed process, no OOM context") << QStringLiteral("watchdog: Killed process 1234 (python3) after 600 s without output") << false;
        QTest::newRow("no: other CUDA error") << QStringLiteral("RuntimeError: CUDA error: an illegal memory access was encountered") << false;
        QTest::newRow("no: Trainer dict") << QStringLiteral("{'loss': 2.3, 'epoch': 0.1}") << false;
        QTest::newRow("no: empty") << QString() << false;
    }

    void outOfMemory()
    {
        QFETCH(QString, line);
        QFETCH(bool, oom);
        QCOMPARE(isOutOfMemoryLine(line), oom);
    }

    // Lines a job can print that are 100 kB long, several shaped to make a careless pattern
    // backtrack: both functions must answer well under a second (loosely, an -O0 build on a busy
    // machine) and still find what a long line does hold.
    void longLines_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("kind");
        QTest::addColumn<bool>("oom");

        const int n = 100 * 1024;
        QTest::newRow("digits") << QString(n, QLatin1Char('1')) << "none" << false;
        QTest::newRow("slashes") << repeated(QStringLiteral("1/"), n / 2) << "none" << false;
        QTest::newRow("meters never closed") << repeated(QStringLiteral("1/1 [00:00<00:00, 1.00it/s, "), n / 28) << "none" << false;
        QTest::newRow("rates") << repeated(QStringLiteral("3.98it/s "), n / 9) << "none" << false;
        QTest::newRow("unterminated escapes") << repeated(esc + QStringLiteral("[1;2;3"), n / 7) << "none" << false;
        QTest::newRow("open dict entries") << repeated(QStringLiteral("{'loss': "), n / 9) + QStringLiteral("}") << "none" << false;
        QTest::newRow("quotes") << QString(n, QLatin1Char('\'')) << "none" << false;
        QTest::newRow("brackets") << QString(n, QLatin1Char('[')) << "none" << false;
        QTest::newRow("phrase without allocation") << repeated(QStringLiteral("CUDA out of memory. "), n / 20) << "none" << false;
        QTest::newRow("Killed process, no total-vm") << QStringLiteral("Killed process 1 (") + QString(n, QLatin1Char('x')) << "none" << false;
        QTest::newRow("tensor dump then meter") << QString(n, QLatin1Char('x')) + QStringLiteral(" 12/100 [00:03<00:22,  3.98it/s]") << "tqdm" << false;
        QTest::newRow("long Trainer dict") << QStringLiteral("{'loss': 2.0, 'epoch': 1.0, 'note': '") + QString(n, QLatin1Char('x')) + QStringLiteral("'}") << "trainer" << false;
        QTest::newRow("many rank tags then OOM") << repeated(QStringLiteral("[rank0]: "), n / 9) + QStringLiteral("torch.OutOfMemoryError: out of memory") << "none" << true;
        QTest::newRow("OOM at the end") << QString(n, QLatin1Char(' ')) + QStringLiteral("RuntimeError: CUDA error: out of memory") << "none" << true;
    }

    void longLines()
    {
        QFETCH(QString, line);
        QFETCH(QString, kind);
        QFETCH(bool, oom);
        QElapsedTimer timer;
        timer.start();
        const std::optional<RecognizedLine> r = recognizeLogLine(line);
        const bool isOom = isOutOfMemoryLine(line);
        const qint64 ms = timer.elapsed();
        // Catastrophic backtracking on 100 kB takes minutes; this bound is far from any real time.
        QVERIFY2(ms < 10000, qPrintable(QStringLiteral("took %1 ms").arg(ms)));
        QCOMPARE(kindName(r), kind);
        QCOMPARE(isOom, oom);
    }
};

QTEST_GUILESS_MAIN(TestLogRecognizer)
#include "tst_log_recognizer.moc"
