#include "report/ReportWriter.h"

#include "history/HistoryStore.h"
#include "report/ReportCanvas.h"
#include "report/ReportData.h"
#include "report/ReportSections.h"
#include "util/Errors.h"
#include "util/FileRules.h"

#include <QBuffer>
#include <QPainter>
#include <QPdfWriter>

#include <spdlog/spdlog.h>

namespace pb::report {
namespace {

int paintOnce(const ReportData &data, QIODevice &device, int totalPages)
{
    QPdfWriter writer(&device);
    writer.setPageSize(QPageSize(QPageSize::A4));
    writer.setPageMargins(QMarginsF(0, 0, 0, 0));
    writer.setResolution(72); // painter units are PDF points
    writer.setTitle(QStringLiteral("PilotBench report, run %1").arg(data.run.id));
    writer.setCreator(QStringLiteral("PilotBench"));
    QPainter painter;
    if (!painter.begin(&writer))
        throw PilotBenchError(ExitCode::Failure, "cannot start painting the PDF report");
    painter.setRenderHint(QPainter::Antialiasing);
    const QString footer = QStringLiteral("PilotBench report - run %1 - config %2").arg(data.run.id).arg(QString::fromStdString(data.run.configHash.substr(0, 12)));
    ReportCanvas canvas(writer, painter, footer, totalPages);
    paintReport(canvas, data);
    canvas.finish();
    painter.end();
    return canvas.pages();
}

} // namespace

int renderReport(const ReportData &data, QIODevice &device)
{
    // The layout is deterministic: a first pass counts the pages so every footer can say "of M".
    QBuffer scratch;
    scratch.open(QIODevice::WriteOnly);
    const int pages = paintOnce(data, scratch, 0);
    const int written = paintOnce(data, device, pages);
    if (written != pages)
        spdlog::warn("report: layout passes disagree ({} vs {} pages)", pages, written);
    return written;
}

int writeRunReport(const HistoryStore &store, int64_t runId, const QString &pdfPath, const Catalog &catalog)
{
    checkOutputPath(pdfPath, databasePaths(store.path()), "--out");
    const ReportData data = loadReportData(store, runId, catalog);
    QBuffer pdf;
    pdf.open(QIODevice::WriteOnly);
    const int pages = renderReport(data, pdf);
    writeFileAtomically(pdfPath, pdf.data());
    spdlog::info("report of run {} written to {} ({} pages)", runId, pdfPath.toStdString(), pages);
    return pages;
}

int writeRunReport(const QString &databasePath, int64_t runId, const QString &pdfPath, const Catalog &catalog)
{
    const HistoryStore store(databasePath, HistoryStore::Access::ReadOnlyWhereNeeded);
    return writeRunReport(store, runId, pdfPath, catalog);
}

} // namespace pb::report
