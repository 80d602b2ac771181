// CPU lists as Linux writes them, the per-rank slices, binding the calling thread, and which CPUs
// are local to the GPU each CUDA ordinal is (CUDA_VISIBLE_DEVICES, the driver's GPU list, sysfs).
#include "dist/CpuBinding.h"
#include "dist/GpuLocality.h"
#include "util/Errors.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace pb;

class TestCpuBinding : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void roundTrip_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("canonical");
        QTest::addColumn<int>("count");
        QTest::newRow("one") << QStringLiteral("3") << QStringLiteral("3") << 1;
        QTest::newRow("range and single") << QStringLiteral("0-3,8") << QStringLiteral("0-3,8") << 5;
        QTest::newRow("unsorted, overlapping") << QStringLiteral("8, 2-3,0-2") << QStringLiteral("0-3,8") << 5;
        QTest::newRow("two numa nodes") << QStringLiteral("0-47,96-143") << QStringLiteral("0-47,96-143") << 96;
        QTest::newRow("sysfs local_cpulist") << QStringLiteral("0-3,8-11\n") << QStringLiteral("0-3,8-11") << 8;
    }

    void roundTrip()
    {
        QFETCH(QString, text);
        QFETCH(QString, canonical);
        QFETCH(int, count);
        const auto cpus = parseCpuList(text.toStdString(), "--cpus");
        QCOMPARE(int(cpus.size()), count);
        QCOMPARE(QString::fromStdString(formatCpuList(cpus)), canonical);
    }

    void refusals_data()
    {
        QTest::addColumn<QString>("text");
        QTest::newRow("empty") << QString();
        QTest::newRow("reversed range") << QStringLiteral("3-1");
        QTest::newRow("word") << QStringLiteral("all");
        QTest::newRow("negative") << QStringLiteral("-1");
        QTest::newRow("trailing comma") << QStringLiteral("1,");
        QTest::newRow("beyond cpu_set") << QStringLiteral("0-100000");
    }

    void refusals()
    {
        QFETCH(QString, text);
        QVERIFY_THROWS_EXCEPTION(InvalidInputError, parseCpuList(text.toStdString(), "--cpus"));
    }

    void slices()
    {
        const std::vector<int> cpus {0, 1, 2, 3, 4, 5, 8};
        const auto two = splitCpus(cpus, 2, 3);
        QCOMPARE(two.size(), size_t(2));
        QCOMPARE(two[0], (std::vector<int> {0, 1, 2}));
        QCOMPARE(two[1], (std::vector<int> {3, 4, 5}));
        QVERIFY(splitCpus(cpus, 2, 4).empty()); // 8 wanted, 7 there
        QVERIFY(splitCpus(cpus, 0, 1).empty());
    }

    void pciAddresses_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("canonical");
        QTest::newRow("nvml") << QStringLiteral("00000000:3B:00.0") << QStringLiteral("0000:3b:00.0");
        QTest::newRow("sysfs") << QStringLiteral("0000:86:00.0") << QStringLiteral("0000:86:00.0");
        QTest::newRow("no domain") << QStringLiteral("3b:00.1") << QStringLiteral("0000:3b:00.1");
        QTest::newRow("wide domain") << QStringLiteral("00010000:01:00.0") << QStringLiteral("10000:01:00.0");
        QTest::newRow("not one") << QStringLiteral("N/A") << QString();
        QTest::newRow("function past 7") << QStringLiteral("0000:3b:00.8") << QString();
    }

    void pciAddresses()
    {
        QFETCH(QString, text);
        QFETCH(QString, canonical);
        QCOMPARE(QString::fromStdString(canonicalPciBusId(text.toStdString())), canonical);
    }

    // CUDA_VISIBLE_DEVICES against three GPUs in PCI order: which GPU each CUDA ordinal is.
    void visibleDevices_data()
    {
        QTest::addColumn<QString>("variable");  // "<unset>": not set
        QTest::addColumn<QList<int>>("expected");
        QTest::newRow("unset") << QStringLiteral("<unset>") << QList<int> {0, 1, 2};
        QTest::newRow("reordered") << QStringLiteral("2,0") << QList<int> {2, 0};
        QTest::newRow("blanks, trailing text") << QStringLiteral(" 1 ,2gpu") << QList<int> {1, 2};
        QTest::newRow("empty") << QString() << QList<int> {};
        QTest::newRow("-1 hides all") << QStringLiteral("-1") << QList<int> {};
        QTest::newRow("stops at an invalid index") << QStringLiteral("1,7,0") << QList<int> {1};
        QTest::newRow("stops at a word") << QStringLiteral("0,none,1") << QList<int> {0};
        QTest::newRow("repeat hides all") << QStringLiteral("0,1,0") << QList<int> {};
        QTest::newRow("uuids") << QStringLiteral("GPU-bbbb2222-0000,GPU-aaaa1111-0000") << QList<int> {1, 0};
        QTest::newRow("uuid prefix") << QStringLiteral("GPU-cc") << QList<int> {2};
        QTest::newRow("ambiguous prefix stops") << QStringLiteral("GPU-bb,GPU-") << QList<int> {1};
        QTest::newRow("unknown uuid stops") << QStringLiteral("GPU-aa,GPU-ffff,GPU-cc") << QList<int> {0};
        QTest::newRow("index after uuids stops") << QStringLiteral("GPU-cc,0") << QList<int> {2};
        QTest::newRow("same gpu twice by prefix") << QStringLiteral("GPU-aa,GPU-aaaa1111") << QList<int> {};
        QTest::newRow("mig instance") << QStringLiteral("MIG-7777") << QList<int> {1};
        QTest::newRow("legacy mig form") << QStringLiteral("MIG-GPU-cccc3333-0000/1/0") << QList<int> {2};
    }

    void visibleDevices()
    {
        QFETCH(QString, variable);
        QFETCH(QList<int>, expected);
        std::vector<PhysicalGpu> gpus(3);
        gpus[0].uuid = "GPU-aaaa1111-0000";
        gpus[1].uuid = "GPU-bbbb2222-0000";
        gpus[1].migUuids = {"MIG-7777-0000", "MIG-8888-0000"};
        gpus[2].uuid = "GPU-cccc3333-0000";
        const std::optional<std::string> value = variable == QLatin1String("<unset>") ? std::nullopt : std::optional<std::string>(variable.toStdString());
        QList<int> found;
        for (const auto &device : visibleGpus(value, gpus, true))
            found << device.gpu;
        QCOMPARE(found, expected);
    }

    void cudaOrderOfIndices()
    {
        std::vector<PhysicalGpu> gpus(2);
        gpus[0].model = gpus[1].model = "NVIDIA H200";
        QVERIFY(cudaCountsInPciOrder(std::nullopt, gpus));
        gpus[1].model = "NVIDIA L40S";
        // Fastest first: the two are in some order of CUDA's choosing, so indices say nothing...
        QVERIFY(!cudaCountsInPciOrder(std::nullopt, gpus));
        QVERIFY(!cudaCountsInPciOrder(std::string("FASTEST_FIRST"), gpus));
        QVERIFY(cudaCountsInPciOrder(std::string("PCI_BUS_ID"), gpus));
        const auto unknown = visibleGpus(std::string("1"), gpus, false);
        QCOMPARE(unknown.size(), size_t(1));
        QCOMPARE(unknown.front().gpu, -1);
        gpus[0].uuid = "GPU-aaaa";
        gpus[1].uuid = "GPU-bbbb";
        // ... while a UUID names its GPU whatever the order.
        QCOMPARE(visibleGpus(std::string("GPU-bbbb"), gpus, false).front().gpu, 1);
    }

    // A host with three GPUs as the driver's /proc files, /dev and sysfs show them, built in a
    // temporary folder: the CPUs each CUDA ordinal's GPU is local to.
    void localCpusOfEachOrdinal()
    {
        QTemporaryDir host;
        QVERIFY(host.isValid());
        const QDir root(host.path());
        const auto write = [&](const QString &path, const QByteArray &text) {
            QVERIFY(root.mkpath(QFileInfo(root.filePath(path)).path()));
            QFile file(root.filePath(path));
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(text);
        };
        const struct {
            const char *bus, *uuid, *cpus, *node;
            int minor;
        } gpus[] = {{"0000:86:00.0", "GPU-cccc3333-0000", nullptr, "-1", 2},  // listed first, last in PCI order; no local_cpulist
                    {"0000:18:00.0", "GPU-aaaa1111-0000", "0-3,8-11\n", "0\n", 0},
                    {"0000:3b:00.0", "GPU-bbbb2222-0000", "4-7,12-15\n", "1\n", 1}};
        for (const auto &g : gpus) {
            write(QStringLiteral("proc/driver/nvidia/gpus/%1/information").arg(QLatin1String(g.bus)),
                  QByteArray("Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t ") + g.uuid + "\nBus Type: \t PCIe\nBus Location: \t " + g.bus +
                      "\nDevice Minor: \t " + QByteArray::number(g.minor) + "\nGPU Excluded:\t No\n");
            write(QStringLiteral("dev/nvidia%1").arg(g.minor), {});
            write(QStringLiteral("sys/bus/pci/devices/%1/numa_node").arg(QLatin1String(g.bus)), g.node);
            if (g.cpus)
                write(QStringLiteral("sys/bus/pci/devices/%1/local_cpulist").arg(QLatin1String(g.bus)), g.cpus);
        }
        GpuLocalitySources sources;
        sources.inventory.nvmlLibrary.clear();  // only the fake files, whatever this host has
        sources.inventory.driverInfoDir = root.filePath(QStringLiteral("proc/driver/nvidia/gpus"));
        sources.inventory.deviceNodeDir = root.filePath(QStringLiteral("dev"));
        sources.sysfsRoot = root.filePath(QStringLiteral("sys"));
        sources.allowedCpus = parseCpuList("0-15", "test");
        const auto cpusOf = [&](const std::optional<std::string> &visible) {
            sources.cudaVisibleDevices = visible;
            QStringList cpus;
            for (const auto &g : gpuLocality(sources).gpus)
                cpus << QString::fromStdString(g.pciBusId + "=" + g.bindCpus);
            return cpus.join(QLatin1Char(' '));
        };

        const auto all = gpuLocality(sources);
        QCOMPARE(all.source, sources.inventory.driverInfoDir.toStdString());
        QCOMPARE(all.gpus.size(), size_t(3));
        QCOMPARE(all.gpus[0].uuid, std::string("GPU-aaaa1111-0000"));
        QCOMPARE(all.gpus[0].localCpus, std::string("0-3,8-11"));
        QCOMPARE(all.gpus[0].numaNode, 0);
        QCOMPARE(all.gpus[1].numaNode, 1);
        QCOMPARE(all.gpus[2].numaNode, -1);
        QVERIFY(all.gpus[2].localCpus.empty());
        QVERIFY2(all.gpus[2].note.find("local_cpulist") != std::string::npos, all.gpus[2].note.c_str());
        QCOMPARE(cpusOf(std::nullopt), QStringLiteral("0000:18:00.0=0-3,8-11 0000:3b:00.0=4-7,12-15 0000:86:00.0="));
        QCOMPARE(cpusOf(std::string("2,0")), QStringLiteral("0000:86:00.0= 0000:18:00.0=0-3,8-11"));
        QCOMPARE(cpusOf(std::string("GPU-bbbb2222-0000,GPU-aaaa1111-0000")), QStringLiteral("0000:3b:00.0=4-7,12-15 0000:18:00.0=0-3,8-11"));
        QCOMPARE(cpusOf(std::string("")), QString());

        // Bound only to what this process may use: a cpuset of 0-5 leaves GPU 1 two CPUs...
        sources.allowedCpus = parseCpuList("0-5", "test");
        QCOMPARE(cpusOf(std::nullopt), QStringLiteral("0000:18:00.0=0-3 0000:3b:00.0=4-5 0000:86:00.0="));
        // ... and 0-3 none, which the GPU's note says.
        sources.allowedCpus = parseCpuList("0-3", "test");
        sources.cudaVisibleDevices = std::string("1");
        const auto outside = gpuLocality(sources);
        QCOMPARE(outside.gpus.size(), size_t(1));
        QVERIFY(outside.gpus[0].bindCpus.empty());
        QVERIFY2(outside.gpus[0].note.find("4-7,12-15") != std::string::npos, outside.gpus[0].note.c_str());
        sources.allowedCpus = parseCpuList("0-15", "test");

        // A GPU this process cannot open (no device node: a container given the others) is not
        // one of CUDA's, so ordinal 1 is the next one.
        QVERIFY(QFile::remove(root.filePath(QStringLiteral("dev/nvidia1"))));
        QCOMPARE(cpusOf(std::nullopt), QStringLiteral("0000:18:00.0=0-3,8-11 0000:86:00.0="));
        QVERIFY(QFile::copy(root.filePath(QStringLiteral("dev/nvidia0")), root.filePath(QStringLiteral("dev/nvidia1"))));

        // Mixed models: CUDA's default order is fastest first, so an index names an unknown GPU.
        write(QStringLiteral("proc/driver/nvidia/gpus/0000:86:00.0/information"),
              "Model: \t\t NVIDIA L40S\nGPU UUID: \t GPU-cccc3333-0000\nBus Location: \t 0000:86:00.0\nDevice Minor: \t 2\n");
        QCOMPARE(cpusOf(std::string("0")), QStringLiteral("="));
        sources.cudaDeviceOrder = std::string("PCI_BUS_ID");
        QCOMPARE(cpusOf(std::string("0")), QStringLiteral("0000:18:00.0=0-3,8-11"));
        sources.cudaDeviceOrder.reset();
        QCOMPARE(cpusOf(std::string("GPU-bbbb2222-0000")), QStringLiteral("0000:3b:00.0=4-7,12-15"));

        // No driver at all: no GPU, and a note saying why.
        sources.inventory.driverInfoDir = root.filePath(QStringLiteral("absent"));
        const auto none = gpuLocality(sources);
        QVERIFY(none.gpus.empty());
        QVERIFY2(none.note.find("absent") != std::string::npos, none.note.c_str());
    }

    void bindCallingThread()
    {
        const auto before = allowedCpus();
        QVERIFY(!before.empty());
        bindToCpus({before.back()});
        QCOMPARE(allowedCpus(), (std::vector<int> {before.back()}));
        bindToCpus(before);
        QCOMPARE(allowedCpus(), before);
        QVERIFY_THROWS_EXCEPTION(PilotBenchError, bindToCpus({}));
    }
};

QTEST_GUILESS_MAIN(TestCpuBinding)
#include "tst_cpu_binding.moc"
