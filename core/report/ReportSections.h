#pragma once
// The report's sections, painted in order onto a ReportCanvas. Split in two files: the run itself
// (ReportSections.cpp) and the evidence and decision that follow it (ReportDecision.cpp).
#include <QString>
#include <QStringList>

#include <string>

#include <cstdint>

namespace pb {
struct ReportData;
namespace report {

class ReportCanvas;

// Section titles, in order (the tests look for each in the PDF's text).
const QStringList &reportSectionTitles();

void paintReport(ReportCanvas &canvas, const ReportData &data);

// Sections of ReportDecision.cpp.
void paintRestoration(ReportCanvas &canvas, const ReportData &data);
void paintScaling(ReportCanvas &canvas, const ReportData &data);
void paintComparison(ReportCanvas &canvas, const ReportData &data);
void paintAssumptions(ReportCanvas &canvas, const ReportData &data);

// Shared formatting (byte sizes: pb::formatBytes, util/Units.h): "12.3 M" parameters;
// milliseconds with 2 decimals.
QString formatCount(double count);
QString formatMs(double ms);
QString formatMoney(double value, const std::string &currency);

} // namespace report
} // namespace pb
