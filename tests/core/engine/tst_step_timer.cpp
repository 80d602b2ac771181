// engine/StepTimer on the host clock (CI has no GPU; on CUDA the same calls record events): marks
// are numbered from 0 after each reset, the time between two marks is what passed between them, and
// a mark never made is refused by number.
#include "engine/StepTimer.h"

#include <QtTest>

#include <thread>

using namespace pb;

class TestStepTimer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void timesBetweenMarks()
    {
        StepTimer timer(torch::Device(torch::kCPU));
        timer.reset();
        const size_t a = timer.mark();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        const size_t b = timer.mark();
        const size_t c = timer.mark();
        QCOMPARE(a, size_t(0));
        QCOMPARE(b, size_t(1));
        QCOMPARE(c, size_t(2));
        QVERIFY2(timer.elapsedMs(a, b) >= 29.0, qPrintable(QString::number(timer.elapsedMs(a, b))));
        QVERIFY(timer.elapsedMs(b, c) < timer.elapsedMs(a, b));
        QVERIFY(timer.elapsedMs(a, c) >= timer.elapsedMs(a, b));
    }

    void resetRenumbersAndRefusesOldMarks()
    {
        StepTimer timer(torch::Device(torch::kCPU));
        timer.mark();
        timer.mark();
        timer.reset();
        QCOMPARE(timer.mark(), size_t(0));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, timer.elapsedMs(0, 1));
    }
};

QTEST_GUILESS_MAIN(TestStepTimer)
#include "tst_step_timer.moc"
