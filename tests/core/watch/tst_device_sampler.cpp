// The device readers against fake vendor libraries built from tests/data/watch (same symbols and
// ABI, fixed figures), the /proc tree, and the sampling thread.
#include "watch/DeviceSampler.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QtTest>

#include <chrono>
#include <csignal>
#include <dlfcn.h>
#include <thread>
#include <unistd.h>

using namespace pb::watch;

namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kGiB = 1024 * kMiB;

QString library(const char *path) { return QString::fromUtf8(path); }

// The fake NVML's switch for what this process reports, from the copy the backend loaded.
void setOwnNvmlMemory(const char *fake, unsigned long long bytes)
{
    void *handle = ::dlopen(fake, RTLD_NOW | RTLD_NOLOAD);
    QVERIFY2(handle, fake);
    using SetFn = void (*)(unsigned long long);
    const auto set = reinterpret_cast<SetFn>(::dlsym(handle, "pb_fake_nvml_set_own_memory"));
    QVERIFY(set);
    set(bytes);
    ::dlclose(handle);
}

} // namespace

class TestDeviceSampler : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void nvmlReadsEveryFigure()
    {
        std::string why;
        auto nvml = openNvml(library(PB_FAKE_NVML), &why);
        QVERIFY2(nvml, why.c_str());
        QCOMPARE(nvml->source(), std::string("nvml"));
        QCOMPARE(nvml->deviceCount(), 2);
        const auto readings = nvml->read({::getpid()});
        QCOMPARE(readings.size(), size_t(2));
        const DeviceReading &a = readings[0], &b = readings[1];
        QCOMPARE(a.index, 0);
        QCOMPARE(b.index, 1);
        QCOMPARE(a.name, std::string("Fake GPU 0"));
        QCOMPARE(b.name, std::string("Fake GPU 1"));
        QCOMPARE(a.source, std::string("nvml"));
        QCOMPARE(a.memoryUsedBytes, 1 * kGiB);
        QCOMPARE(b.memoryUsedBytes, 2 * kGiB);
        QCOMPARE(a.memoryTotalBytes, 80 * kGiB);
        QCOMPARE(b.memoryTotalBytes, 141 * kGiB);
        QCOMPARE(a.utilisationPercent, 10.0);
        QCOMPARE(b.utilisationPercent, 50.0);
        QCOMPARE(a.powerW, 150.0);
        QCOMPARE(b.powerW, 250.0);
        QCOMPARE(a.smClockMHz, 1500.0);
        QCOMPARE(b.smClockMHz, 1980.0);
        QCOMPARE(a.temperatureC, 40.0);
        QCOMPARE(b.temperatureC, 45.0);
        // Device 0 lists only PID 1; device 1 lists us among a hundred others (a grown buffer).
        QCOMPARE(a.processTreeBytes, int64_t(0));
        QCOMPARE(b.processTreeBytes, 123 * kMiB);
        // Another tree: the driver still answers, none of its processes are there.
        QCOMPARE(nvml->read({4194399})[1].processTreeBytes, int64_t(0));
    }

    void nvmlProcessMemoryItCannotTellIsUnknown()
    {
        auto nvml = openNvml(library(PB_FAKE_NVML));
        QVERIFY(nvml);
        setOwnNvmlMemory(PB_FAKE_NVML, ~0ULL);
        const auto readings = nvml->read({::getpid()});
        setOwnNvmlMemory(PB_FAKE_NVML, 123ULL * 1024 * 1024);
        QCOMPARE(readings.at(1).processTreeBytes, int64_t(-1));
        QCOMPARE(readings.at(1).memoryUsedBytes, 2 * kGiB);
    }

    void nvmlOfAnOldDriverLacksOnlyWhatItLacks()
    {
        std::string why;
        auto nvml = openNvml(library(PB_FAKE_NVML_OLD), &why);
        QVERIFY2(nvml, why.c_str());
        const auto readings = nvml->read({::getpid()});
        QCOMPARE(readings.size(), size_t(2));
        // No nvmlDeviceGetPowerUsage: that figure alone is unknown.
        QCOMPARE(readings[0].powerW, -1.0);
        QCOMPARE(readings[1].powerW, -1.0);
        QCOMPARE(readings[1].memoryUsedBytes, 2 * kGiB);
        QCOMPARE(readings[1].smClockMHz, 1980.0);
        // Only the plain process call, with the short record: read in that layout.
        QCOMPARE(readings[0].processTreeBytes, int64_t(0));
        QCOMPARE(readings[1].processTreeBytes, 123 * kMiB);
    }

    void missingLibrariesSayWhich()
    {
        std::string why;
        QVERIFY(!openNvml(QStringLiteral("/nonexistent/libnvidia-ml.so.1"), &why));
        QVERIFY2(why.find("/nonexistent/libnvidia-ml.so.1") != std::string::npos, why.c_str());
        why.clear();
        QVERIFY(!openRocmSmi(QStringLiteral("/nonexistent/librocm_smi64.so.6"), &why));
        QVERIFY2(why.find("/nonexistent/librocm_smi64.so.6") != std::string::npos, why.c_str());
        // A library that loads but is not the vendor's.
        why.clear();
        QVERIFY(!openNvml(library(PB_FAKE_ROCM_SMI), &why));
        QVERIFY2(why.find("nvmlInit_v2") != std::string::npos, why.c_str());
        why.clear();
        QVERIFY(!openRocmSmi(library(PB_FAKE_NVML), &why));
        QVERIFY2(why.find("rsmi_init") != std::string::npos, why.c_str());
    }

    void anyBackendIsARealOneOrSaysWhatWasTried()
    {
        std::string why;
        auto backend = openAnyDeviceBackend(&why);
        if (backend) {
            QVERIFY(backend->source() == "nvml" || backend->source() == "rocm-smi");
            QVERIFY(backend->deviceCount() > 0);
        } else {
            QVERIFY2(why.find("NVML: ") != std::string::npos && why.find("ROCm SMI: ") != std::string::npos, why.c_str());
        }
    }

    void rocmSmi5ReadsEveryFigure()
    {
        std::string why;
        auto rocm = openRocmSmi(library(PB_FAKE_ROCM_SMI), &why);
        QVERIFY2(rocm, why.c_str());
        QCOMPARE(rocm->source(), std::string("rocm-smi"));
        QCOMPARE(rocm->deviceCount(), 2);
        const auto readings = rocm->read({::getpid()});
        QCOMPARE(readings.size(), size_t(2));
        const DeviceReading &a = readings[0], &b = readings[1];
        QCOMPARE(a.name, std::string("Fake AMD 0"));
        QCOMPARE(b.name, std::string("Fake AMD 1"));
        QCOMPARE(b.source, std::string("rocm-smi"));
        QCOMPARE(a.memoryUsedBytes, 3 * kGiB);
        QCOMPARE(b.memoryUsedBytes, 4 * kGiB);
        QCOMPARE(a.memoryTotalBytes, 64 * kGiB);
        QCOMPARE(b.memoryTotalBytes, 192 * kGiB);
        QCOMPARE(a.utilisationPercent, 30.0);
        QCOMPARE(b.utilisationPercent, 50.0);
        QCOMPARE(a.powerW, 200.0);
        QCOMPARE(b.powerW, 300.0);
        QCOMPARE(a.smClockMHz, 1700.0);
        QCOMPARE(b.smClockMHz, 1800.0);
        QCOMPARE(a.temperatureC, 45.5);
        QCOMPARE(b.temperatureC, 46.5);
        // PID 1 is on device 0 but not in our tree; we are on device 1.
        QCOMPARE(a.processTreeBytes, int64_t(0));
        QCOMPARE(b.processTreeBytes, 123 * kMiB);
    }

    void rocmSmi6ReadsItsNewerRecordsAndFallbacks()
    {
        std::string why;
        auto rocm = openRocmSmi(library(PB_FAKE_ROCM_SMI_6), &why);
        QVERIFY2(rocm, why.c_str());
        const auto readings = rocm->read({::getpid()});
        QCOMPARE(readings.size(), size_t(2));
        const DeviceReading &a = readings[0], &b = readings[1];
        // No rsmi_dev_busy_percent_get: unknown. Power through rsmi_dev_power_get, temperature
        // from the junction sensor, the clock from the record with has_deep_sleep.
        QCOMPARE(a.utilisationPercent, -1.0);
        QCOMPARE(b.utilisationPercent, -1.0);
        QCOMPARE(a.powerW, 200.0);
        QCOMPARE(b.powerW, 300.0);
        QCOMPARE(a.temperatureC, 45.5);
        QCOMPARE(a.smClockMHz, 1700.0);
        QCOMPARE(b.smClockMHz, 1800.0);
        // Per device where the library can say so, not the process's total split.
        QCOMPARE(a.processTreeBytes, 23 * kMiB);
        QCOMPARE(b.processTreeBytes, 123 * kMiB);
    }

    void processTreeHoldsChildAndGrandchild()
    {
        QProcess shell;
        shell.start(QStringLiteral("sh"), {QStringLiteral("-c"), QStringLiteral("sleep 5 & echo $!; wait")});
        QVERIFY(shell.waitForStarted());
        QVERIFY(shell.waitForReadyRead(5000));
        const int64_t child = shell.processId();
        const int64_t grandchild = shell.readAllStandardOutput().trimmed().toLongLong();
        QVERIFY(grandchild > 0);

        const std::vector<int64_t> fromChild = processTree(child);
        QVERIFY(!fromChild.empty());
        QCOMPARE(fromChild.front(), child);
        QVERIFY(std::find(fromChild.begin(), fromChild.end(), grandchild) != fromChild.end());
        const std::vector<int64_t> fromUs = processTree(::getpid());
        QCOMPARE(fromUs.front(), int64_t(::getpid()));
        QVERIFY(std::find(fromUs.begin(), fromUs.end(), child) != fromUs.end());
        QVERIFY(std::find(fromUs.begin(), fromUs.end(), grandchild) != fromUs.end());
        // The grandchild's own tree is itself alone.
        QCOMPARE(processTree(grandchild), std::vector<int64_t> {grandchild});

        ::kill(static_cast<pid_t>(grandchild), SIGKILL);
        shell.kill();
        QVERIFY(shell.waitForFinished(5000));
        QVERIFY(processTree(4194399).empty());
    }

    void treeRssCountsWhatIsThere()
    {
        const int64_t own = treeRssBytes({::getpid()});
        QVERIFY(own > 1 * kMiB);
        QCOMPARE(treeRssBytes({4194399}), int64_t(-1));
        QCOMPARE(treeRssBytes({}), int64_t(-1));
        // A vanished process counts nothing; our own twice counts twice.
        const int64_t withGone = treeRssBytes({::getpid(), 4194399});
        QVERIFY(withGone > 1 * kMiB && withGone < 2 * own);
        QVERIFY(treeRssBytes({::getpid(), ::getpid()}) > own + own / 2);
    }

    void samplerWithNvmlQueuesReadingsAndPeaks()
    {
        std::string why;
        auto nvml = openNvml(library(PB_FAKE_NVML), &why);
        QVERIFY2(nvml, why.c_str());
        DeviceSampler sampler(std::move(nvml), ::getpid(), 20);
        QCOMPARE(sampler.source(), std::string("nvml"));
        sampler.start();
        // Several readings, whatever the load on the machine (no timing is asserted here).
        std::vector<SamplerReading> readings;
        QTRY_VERIFY_WITH_TIMEOUT((readings.size() >= 5 || [&] { for (auto &r : sampler.drain()) readings.push_back(r); return readings.size() >= 5; }()), 20000);
        for (size_t i = 1; i < readings.size(); ++i)
            QVERIFY(readings[i].tMs > readings[i - 1].tMs);
        for (const SamplerReading &r : readings) {
            QCOMPARE(r.devices.size(), size_t(2));
            QVERIFY(r.treeRssBytes > 0);
        }
        QCOMPARE(sampler.peakDeviceUsedBytes(), 2 * kGiB);
        QCOMPARE(sampler.peakProcessTreeDeviceBytes(), 123 * kMiB);
        QVERIFY(sampler.peakTreeRssBytes() > 0);
        sampler.stop();
        const auto rest = sampler.drain();
        QCOMPARE(sampler.samplesTaken(), int64_t(readings.size() + rest.size()));
        sampler.stop();
    }

    void samplerWithoutBackendReadsProc()
    {
        DeviceSampler sampler(nullptr, ::getpid(), 20);
        QCOMPARE(sampler.source(), std::string("proc"));
        sampler.start();
        QTRY_VERIFY_WITH_TIMEOUT(sampler.samplesTaken() >= 5, 20000);
        sampler.stop();
        const auto readings = sampler.drain();
        QVERIFY2(readings.size() >= 5, QByteArray::number(qulonglong(readings.size())).constData());
        for (size_t i = 1; i < readings.size(); ++i)
            QVERIFY(readings[i].tMs > readings[i - 1].tMs);
        for (const SamplerReading &r : readings) {
            QVERIFY(r.devices.empty());
            QVERIFY(r.treeRssBytes > 0);
        }
        QCOMPARE(sampler.peakDeviceUsedBytes(), int64_t(-1));
        QCOMPARE(sampler.peakProcessTreeDeviceBytes(), int64_t(-1));
        QVERIFY(sampler.peakTreeRssBytes() > 0);
        QCOMPARE(sampler.samplesTaken(), int64_t(readings.size()));
    }

    void stopDoesNotWaitOutTheInterval()
    {
        DeviceSampler sampler(nullptr, ::getpid(), 5000);
        sampler.start();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        QElapsedTimer stopping;
        stopping.start();
        sampler.stop();
        // Woken, not waiting out the 5 s interval (a bound far from both: no timing is measured).
        QVERIFY2(stopping.elapsed() < 2500, QByteArray::number(stopping.elapsed()).constData());
        // The first reading comes at once, not after the first interval.
        QCOMPARE(sampler.samplesTaken(), int64_t(1));
        DeviceSampler neverStarted(nullptr, ::getpid(), 20);
        neverStarted.stop();
        QVERIFY(neverStarted.drain().empty());
    }

    void samplerOfAGoneRootKnowsNothing()
    {
        DeviceSampler sampler(nullptr, 4194399, 10);
        sampler.start();
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
        sampler.stop();
        const auto readings = sampler.drain();
        QVERIFY(!readings.empty());
        for (const SamplerReading &r : readings)
            QCOMPARE(r.treeRssBytes, int64_t(-1));
        QCOMPARE(sampler.peakTreeRssBytes(), int64_t(-1));
    }
};

QTEST_GUILESS_MAIN(TestDeviceSampler)
#include "tst_device_sampler.moc"
