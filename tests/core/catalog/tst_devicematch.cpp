// Confirming the installed accelerator against the catalog entry.
#include "catalog/DeviceMatch.h"

#include <QtTest>

Q_DECLARE_METATYPE(pb::SoftwareStack)

namespace {
constexpr qint64 kMiB = 1048576;
}

class TestDeviceMatch : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void matches_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("memoryBytes");
        QTest::addColumn<QString>("cc");
        QTest::addColumn<QString>("driver");
        QTest::addColumn<QString>("runtime");
        QTest::addColumn<pb::SoftwareStack>("backend");
        QTest::addColumn<QString>("cardId");          // "" : no match
        QTest::addColumn<QStringList>("mismatches");  // toString(MismatchKind), in order
        const auto cuda = pb::SoftwareStack::Cuda;
        const auto rocm = pb::SoftwareStack::Rocm;
        // The device machine's own H200, as nvidia-smi and cudaGetDeviceProperties saw it
        // (totalGlobalMem 150109880320 bytes = 143156 MiB, 0.43 % under the 143771 MiB entry).
        QTest::newRow("H200 SXM clean") << "NVIDIA H200" << qint64(150109880320) << "9.0" << "580.159.04" << "13.0" << cuda << "h200-sxm-141gb" << QStringList {};
        // The NVL part has its own entry now: it matches that one cleanly, not the SXM one with a
        // form-factor mismatch.
        QTest::newRow("H200 NVL") << "NVIDIA H200 NVL" << qint64(143771) * kMiB << "9.0" << "580.159.04" << "12.8" << cuda << "h200-nvl-141gb" << QStringList {};
        QTest::newRow("B200") << "NVIDIA B200" << qint64(183359) * kMiB << "10.0" << "580.95.05" << "13.0" << cuda << "b200-sxm-180gb" << QStringList {};
        QTest::newRow("B200 old driver") << "NVIDIA B200" << qint64(183359) * kMiB << "10.0" << "565.57.01" << "12.8" << cuda << "b200-sxm-180gb" << QStringList {QStringLiteral("old-driver")};
        QTest::newRow("RTX PRO 6000 workstation") << "NVIDIA RTX PRO 6000 Blackwell Workstation Edition" << qint64(97887) * kMiB << "12.0" << "" << "12.8" << cuda
                                                  << "rtx-pro-6000-96gb" << QStringList {QStringLiteral("form-factor")};
        QTest::newRow("MI355X") << "AMD Instinct MI355X" << qint64(294896) * kMiB << "gfx950" << "" << "7.0.1" << rocm << "mi355x-288gb" << QStringList {};
        QTest::newRow("H100 SXM") << "NVIDIA H100 80GB HBM3" << qint64(81559) * kMiB << "9.0" << "550.54.15" << "12.4" << cuda << "h100-sxm-80gb" << QStringList {};
        QTest::newRow("H100 PCIe") << "NVIDIA H100 PCIe" << qint64(81559) * kMiB << "9.0" << "550.54.15" << "12.4" << cuda << "h100-sxm-80gb" << QStringList {QStringLiteral("form-factor")};
        QTest::newRow("A100 SXM4 80GB") << "NVIDIA A100-SXM4-80GB" << qint64(81920) * kMiB << "8.0" << "535.104.05" << "12.2" << cuda << "a100-sxm-80gb" << QStringList {};
        // 40 GiB is half the entry: the budget would promise memory the card does not have.
        QTest::newRow("A100 40GB") << "NVIDIA A100-SXM4-40GB" << qint64(40960) * kMiB << "8.0" << "535.104.05" << "12.2" << cuda << "a100-sxm-80gb" << QStringList {QStringLiteral("smaller-memory")};
        QTest::newRow("A100 PCIe 40GB") << "NVIDIA A100-PCIE-40GB" << qint64(40960) * kMiB << "8.0" << "" << "12.2" << cuda << "a100-sxm-80gb"
                                        << QStringList {QStringLiteral("form-factor"), QStringLiteral("smaller-memory")};
        QTest::newRow("old CUDA") << "NVIDIA H200" << qint64(143771) * kMiB << "9.0" << "535.129.03" << "12.1" << cuda << "h200-sxm-141gb" << QStringList {QStringLiteral("unvalidated-stack")};
        QTest::newRow("old driver") << "NVIDIA H100 80GB HBM3" << qint64(81559) * kMiB << "9.0" << "525.60.13" << "12.1" << cuda << "h100-sxm-80gb" << QStringList {QStringLiteral("old-driver")};
        QTest::newRow("cc differs") << "NVIDIA H100 80GB HBM3" << qint64(81559) * kMiB << "8.0" << "" << "12.4" << cuda << "h100-sxm-80gb" << QStringList {QStringLiteral("compute-capability")};
        QTest::newRow("MI300X ROCm 6.2") << "AMD Instinct MI300X" << qint64(196592) * kMiB << "gfx942:sramecc+:xnack-" << "6.8.5" << "6.2.41133" << rocm << "mi300x-192gb" << QStringList {};
        QTest::newRow("MI300X no ROCm version") << "AMD Instinct MI300X" << qint64(196592) * kMiB << "gfx942" << "" << "" << rocm << "mi300x-192gb" << QStringList {QStringLiteral("unvalidated-stack")};
        QTest::newRow("MI300X ROCm 5.7") << "AMD Instinct MI300X" << qint64(196592) * kMiB << "gfx942" << "" << "5.7.1" << rocm << "mi300x-192gb" << QStringList {QStringLiteral("unvalidated-stack")};
        QTest::newRow("MI300X through CUDA") << "AMD Instinct MI300X" << qint64(196592) * kMiB << "gfx942" << "" << "12.4" << cuda << "mi300x-192gb" << QStringList {QStringLiteral("backend")};
        // GH200 contains "H200" but not as a word: it is another product.
        QTest::newRow("GH200 unknown") << "NVIDIA GH200 480GB" << qint64(97871) * kMiB << "9.0" << "" << "12.4" << cuda << "" << QStringList {};
        QTest::newRow("L40S") << "NVIDIA L40S" << qint64(46068) * kMiB << "8.9" << "" << "12.4" << cuda << "l40s-48gb" << QStringList {};
        QTest::newRow("L4 unknown") << "NVIDIA L4" << qint64(23034) * kMiB << "8.9" << "" << "12.4" << cuda << "" << QStringList {};
        QTest::newRow("CPU unknown") << "AMD EPYC 7763 64-Core Processor" << qint64(0) << "" << "" << "" << cuda << "" << QStringList {};
    }
    void matches()
    {
        QFETCH(QString, name);
        QFETCH(qint64, memoryBytes);
        QFETCH(QString, cc);
        QFETCH(QString, driver);
        QFETCH(QString, runtime);
        QFETCH(pb::SoftwareStack, backend);
        QFETCH(QString, cardId);
        QFETCH(QStringList, mismatches);
        const pb::Catalog catalog = pb::builtInCatalog();
        const pb::DeviceMatch m = pb::matchDevice({name.toStdString(), memoryBytes, cc.toStdString(), driver.toStdString(), runtime.toStdString(), backend}, catalog);
        QCOMPARE(QString::fromStdString(m.cardId), cardId);
        QCOMPARE(m.matched, !cardId.isEmpty());
        QStringList kinds;
        for (const auto &mm : m.mismatches)
            kinds << QString::fromLatin1(pb::toString(mm.kind));
        QCOMPARE(kinds, mismatches);
        QCOMPARE(m.clean(), !cardId.isEmpty() && mismatches.isEmpty());
        const QString message = QString::fromStdString(m.message);
        QVERIFY2(message.contains(name), qPrintable(message));
        if (cardId.isEmpty())
            QVERIFY2(message.contains(QStringLiteral("not in the catalog")), qPrintable(message));
    }

    void mismatchMessagesSayWhatDiffers()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        const auto pcie = pb::matchDevice({"NVIDIA H100 PCIe", 81559 * kMiB, "9.0", "", "12.4", pb::SoftwareStack::Cuda}, catalog);
        QVERIFY(QString::fromStdString(pcie.mismatches.at(0).message).contains(QStringLiteral("PCIe card, not SXM")));
        const auto small = pb::matchDevice({"NVIDIA A100-SXM4-40GB", 40960 * kMiB, "8.0", "", "12.2", pb::SoftwareStack::Cuda}, catalog);
        QVERIFY(QString::fromStdString(small.mismatches.at(0).message).contains(QStringLiteral("40.0 GiB")));
        QVERIFY(QString::fromStdString(small.mismatches.at(0).message).contains(QStringLiteral("80.0 GiB")));
        // What could not be compared is said, not silently passed.
        const auto bare = pb::matchDevice({"NVIDIA H200", 0, "", "CUDA driver API 13.0", "", pb::SoftwareStack::Cuda}, catalog);
        QVERIFY(bare.clean());
        QCOMPARE(bare.unchecked.size(), size_t(4));
    }

    void memoryTolerance()
    {
        const pb::Catalog catalog = pb::builtInCatalog();
        // 2 % below 81559 MiB is 79927.8 MiB: 79928 MiB passes, 79927 MiB is smaller.
        const auto at = pb::matchDevice({"NVIDIA H100 80GB HBM3", 79928 * kMiB, "9.0", "", "12.4", pb::SoftwareStack::Cuda}, catalog);
        QVERIFY(!at.has(pb::MismatchKind::SmallerMemory));
        const auto below = pb::matchDevice({"NVIDIA H100 80GB HBM3", 79927 * kMiB, "9.0", "", "12.4", pb::SoftwareStack::Cuda}, catalog);
        QVERIFY(below.has(pb::MismatchKind::SmallerMemory));
    }

    void versions_data()
    {
        QTest::addColumn<QString>("a");
        QTest::addColumn<QString>("b");
        QTest::addColumn<int>("order");   // 9: not comparable
        QTest::newRow("equal") << "12.2" << "12.2" << 0;
        QTest::newRow("numeric not text") << "12.10" << "12.9" << 1;
        QTest::newRow("missing part is zero") << "12" << "12.0.0" << 0;
        QTest::newRow("older") << "535.104.05" << "535.129.03" << -1;
        QTest::newRow("prefix text") << "CUDA 12.2" << "12.2" << 9;
        QTest::newRow("empty") << "" << "12.2" << 9;
    }
    void versions()
    {
        QFETCH(QString, a);
        QFETCH(QString, b);
        QFETCH(int, order);
        const auto got = pb::compareVersions(a.toStdString(), b.toStdString());
        QCOMPARE(got.value_or(9), order);
    }
};

QTEST_GUILESS_MAIN(TestDeviceMatch)
#include "tst_devicematch.moc"
