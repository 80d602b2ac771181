#pragma once
// The scale command's end-to-end tests (tst_cli_scale.cpp: the command itself; tst_cli_scale_memory.cpp:
// the strategies' parameters and per-rank memory against DDP and the estimate): running it, reading
// its JSON lines and the parameters its ranks dump.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// Inline, so a test file that uses only some of them builds without unused-function warnings.
namespace {

struct Result {
    int code = -1;
    QString out;
    QString err;
};

inline QStringList base(const QTemporaryDir &dir)
{
    return {QStringLiteral("--log-level"), QStringLiteral("warn"), QStringLiteral("scale"), QStringLiteral("--config"), QStringLiteral("preset:tiny"),
            QStringLiteral("--db"), dir.filePath(QStringLiteral("history.db"))};
}

inline Result cli(const QStringList &args, int timeoutMs = 180000)
{
    QProcess p;
    p.start(QStringLiteral(PB_CLI_PATH), args);
    Result r;
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        r.err = QStringLiteral("<timed out>");
        return r;
    }
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

inline QJsonObject eventOf(const QString &jsonl, const QString &name)
{
    for (const auto &line : jsonl.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        const QJsonObject o = QJsonDocument::fromJson(line.toUtf8()).object();
        if (o.value(QStringLiteral("event")).toString() == name)
            return o;
    }
    return {};
}

inline std::vector<float> readFloats(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray bytes = f.readAll();
    std::vector<float> values(static_cast<size_t>(bytes.size()) / sizeof(float));
    std::memcpy(values.data(), bytes.constData(), values.size() * sizeof(float));
    return values;
}

// The final parameters the two ranks of `strategy` dumped under dir/strategy against DDP's under
// dir/ddp (`--dump-dir`): the ranks identical (each owner broadcast its update, or the same shards
// gathered), both within 1e-5 of DDP. `parameters` gets their count.
inline void verifyRanksMatchDdp(const QTemporaryDir &dir, const QString &strategy, size_t &parameters)
{
    const auto ddp = readFloats(dir.filePath(QStringLiteral("ddp/rank0.f32")));
    const auto rank0 = readFloats(dir.filePath(strategy + QStringLiteral("/rank0.f32")));
    const auto rank1 = readFloats(dir.filePath(strategy + QStringLiteral("/rank1.f32")));
    parameters = ddp.size();
    QVERIFY(!ddp.empty());
    QCOMPARE(rank0.size(), ddp.size());
    QCOMPARE(rank1.size(), ddp.size());
    double maxDiff = 0;
    for (size_t i = 0; i < ddp.size(); ++i) {
        maxDiff = std::max(maxDiff, static_cast<double>(std::abs(rank0[i] - ddp[i])));
        QCOMPARE(rank1[i], rank0[i]);
    }
    QVERIFY2(maxDiff <= 1e-5, qPrintable(QStringLiteral("%1 differs from ddp by %2").arg(strategy).arg(maxDiff)));
}

// `config import-hf` of a parity fixture's config.json alone (copied into `dir`, so its weights
// stay out) with `sets` (PATH=VALUE each), written to dir/out; the config's path.
inline QString importParityConfig(const QTemporaryDir &dir, const QString &family, const QStringList &sets, const QString &out)
{
    if (!QDir().mkpath(dir.filePath(family)) ||
        !QFile::copy(QStringLiteral(PB_TEST_DATA_DIR "/hf-parity/") + family + QStringLiteral("/config.json"), dir.filePath(family + QStringLiteral("/config.json"))))
        return {};
    QStringList args {QStringLiteral("config"), QStringLiteral("import-hf"), dir.filePath(family)};
    for (const QString &set : sets)
        args << QStringLiteral("--set") << set;
    const Result imported = cli(args + QStringList {QStringLiteral("--out"), dir.filePath(out)});
    return imported.code == 0 ? dir.filePath(out) : QString();
}

// The larger of the ranks' measured peaks in a scale summary.
inline double largestRankPeak(const QJsonObject &summary)
{
    double measured = 0;
    for (const auto &peak : summary.value(QStringLiteral("per_rank_peak_allocated_bytes")).toArray())
        measured = std::max(measured, peak.toDouble());
    return measured;
}

} // namespace
