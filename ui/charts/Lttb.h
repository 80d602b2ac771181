#pragma once
// Largest-Triangle-Three-Buckets downsampling (Steinarsson 2013): keeps the visual shape of a long
// series (its peaks and dips) with a fixed number of points, so a chart of a 1,000,000-step run
// redraws as fast as one of a thousand.
#include <QList>
#include <QPointF>

#include <cstddef>

namespace pb::ui {

// Picks at most `threshold` points of (x[i], y[i]), i < count; x must be non-decreasing. The first
// and last points are always kept. threshold < 3 or count <= threshold: every point, unchanged.
QList<QPointF> lttb(const double *x, const double *y, size_t count, size_t threshold);

} // namespace pb::ui
