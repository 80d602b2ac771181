// CPU lists as Linux and nvidia-smi write them, the per-rank slices, the GPU-local CPUs read from
// `nvidia-smi topo -m`, and binding the calling thread.
#include "dist/CpuBinding.h"
#include "util/Errors.h"

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

    void gpuAffinityFromTopology()
    {
        // The layout of nvidia-smi topo -m on a two-socket host, underlined header included.
        const std::string topo = "\x1b[4m\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
                                 "GPU0\t X \tNV18\tSYS\t0-47,96-143\t0\t\tN/A\n"
                                 "GPU1\tNV18\t X \tSYS\t48-95,144-191\t1\t\tN/A\n"
                                 "NIC0\tSYS\tSYS\t X \t\t\t\t\n"
                                 "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe\n";
        const auto affinity = gpuCpuAffinity(topo);
        QCOMPARE(affinity.size(), size_t(2));
        QCOMPARE(affinity.at(0), std::string("0-47,96-143"));
        QCOMPARE(affinity.at(1), std::string("48-95,144-191"));

        const std::string unknown = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tN/A\tN/A\n";
        QVERIFY(gpuCpuAffinity(unknown).empty());
        QVERIFY(gpuCpuAffinity("").empty());
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
