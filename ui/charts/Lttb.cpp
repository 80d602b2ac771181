#include "charts/Lttb.h"

#include <cmath>

namespace pb::ui {

QList<QPointF> lttb(const double *x, const double *y, size_t count, size_t threshold)
{
    QList<QPointF> out;
    if (count == 0)
        return out;
    if (threshold < 3 || count <= threshold) {
        out.reserve(static_cast<qsizetype>(count));
        for (size_t i = 0; i < count; ++i)
            out.append(QPointF(x[i], y[i]));
        return out;
    }
    out.reserve(static_cast<qsizetype>(threshold));
    // The interior points split into threshold - 2 buckets; from each bucket the point that makes
    // the largest triangle with the previously chosen point and the next bucket's mean is kept.
    const double bucketSize = static_cast<double>(count - 2) / static_cast<double>(threshold - 2);
    size_t chosen = 0;
    out.append(QPointF(x[0], y[0]));
    for (size_t b = 0; b < threshold - 2; ++b) {
        const size_t start = static_cast<size_t>(std::floor(static_cast<double>(b) * bucketSize)) + 1;
        const size_t end = static_cast<size_t>(std::floor(static_cast<double>(b + 1) * bucketSize)) + 1;
        const size_t nextStart = end;
        size_t nextEnd = static_cast<size_t>(std::floor(static_cast<double>(b + 2) * bucketSize)) + 1;
        if (nextEnd > count)
            nextEnd = count;
        double meanX = 0, meanY = 0;
        for (size_t i = nextStart; i < nextEnd; ++i) {
            meanX += x[i];
            meanY += y[i];
        }
        const double n = static_cast<double>(nextEnd - nextStart);
        meanX /= n;
        meanY /= n;
        const double ax = x[chosen], ay = y[chosen];
        double bestArea = -1;
        size_t best = start;
        for (size_t i = start; i < end; ++i) {
            const double area = std::abs((ax - meanX) * (y[i] - ay) - (ax - x[i]) * (meanY - ay));
            if (area > bestArea) {
                bestArea = area;
                best = i;
            }
        }
        out.append(QPointF(x[best], y[best]));
        chosen = best;
    }
    out.append(QPointF(x[count - 1], y[count - 1]));
    return out;
}

} // namespace pb::ui
