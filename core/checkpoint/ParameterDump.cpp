#include "checkpoint/ParameterDump.h"

#include "util/Errors.h"

#include <QFile>

#include <cmath>
#include <cstring>
#include <vector>

namespace pb {

ParameterDistance parameterDistance(const QString &a, const QString &b)
{
    QFile fa(a), fb(b);
    for (QFile *f : {&fa, &fb})
        if (!f->open(QIODevice::ReadOnly))
            throw PilotBenchError(ExitCode::Failure, f->fileName().toStdString() + ": cannot read the parameter dump: " + f->errorString().toStdString());
    if (fa.size() != fb.size() || fa.size() % static_cast<qint64>(sizeof(float)) != 0)
        throw PilotBenchError(ExitCode::Failure, b.toStdString() + ": a parameter dump of " + std::to_string(fb.size()) + " bytes cannot be set beside "
                                                     + a.toStdString() + " (" + std::to_string(fa.size()) + " bytes)");
    constexpr qint64 kChunkValues = qint64(8) << 20;
    std::vector<float> va(static_cast<size_t>(kChunkValues)), vb(static_cast<size_t>(kChunkValues));
    ParameterDistance d;
    double diffSquares = 0, normSquares = 0;
    for (qint64 left = fa.size() / static_cast<qint64>(sizeof(float)); left > 0;) {
        const qint64 n = std::min(left, kChunkValues);
        const qint64 bytes = n * static_cast<qint64>(sizeof(float));
        if (fa.read(reinterpret_cast<char *>(va.data()), bytes) != bytes || fb.read(reinterpret_cast<char *>(vb.data()), bytes) != bytes)
            throw PilotBenchError(ExitCode::Failure, a.toStdString() + " / " + b.toStdString() + ": a parameter dump ended early");
        for (qint64 i = 0; i < n; ++i) {
            const double x = va[static_cast<size_t>(i)], y = vb[static_cast<size_t>(i)];
            const double diff = std::abs(x - y);
            diffSquares += diff * diff;
            normSquares += x * x;
            d.maxAbs = std::max(d.maxAbs, diff);
            if (std::memcmp(&va[static_cast<size_t>(i)], &vb[static_cast<size_t>(i)], sizeof(float)) != 0)
                ++d.differing;
        }
        d.values += n;
        left -= n;
    }
    d.relative = normSquares > 0 ? std::sqrt(diffSquares / normSquares) : (diffSquares > 0 ? INFINITY : 0.0);
    return d;
}

} // namespace pb
