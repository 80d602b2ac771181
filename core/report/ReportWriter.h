#pragma once
// The PDF report of one run, for `pilotbench-cli report` and the GUI's Export action. Sections, in
// order: verdict summary; run definition; environment and revisions; memory budget predicted vs
// measured; memory and step-time charts; step-time statistics and data stalls; validation and
// checkpoint timings; restoration proof; scaling step; comparison and term decision; assumptions.
// Vector throughout (text through QPainter, charts as lines), text selectable, pages "N of M".
// Needs a QGuiApplication (QPdfWriter paints with fonts); the CLI starts one for `report` only.
#include "catalog/Catalog.h"

#include <QString>

#include <cstdint>

class QIODevice;

namespace pb {

class HistoryStore;
struct ReportData;

namespace report {

// Renders the run `runId` of the history at `databasePath` into `pdfPath` (replaced atomically;
// a failed write leaves any previous file). Returns the number of pages. Throws
// InvalidInputError("--run", ...) for an unknown run, InvalidInputError("--out", ...) when the file
// cannot be written, and InvalidInputError naming the path for an unusable database.
int writeRunReport(const QString &databasePath, int64_t runId, const QString &pdfPath, const Catalog &catalog);
int writeRunReport(const HistoryStore &store, int64_t runId, const QString &pdfPath, const Catalog &catalog);

// Paints the report of `data` as a PDF into `device` (open for writing); returns the page count.
int renderReport(const ReportData &data, QIODevice &device);

} // namespace report
} // namespace pb
