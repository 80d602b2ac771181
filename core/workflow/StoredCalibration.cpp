#include "workflow/StoredCalibration.h"

#include "catalog/DeviceMatch.h"
#include "history/HistoryEvidence.h"
#include "history/HistoryStore.h"

#include <QFileInfo>

namespace pb {
namespace {

// The catalog card a device name stands for, or "" when the catalog knows none.
std::string catalogCardFor(const std::string &deviceName, const std::string &backend, const Catalog &catalog)
{
    DetectedDevice device;
    device.name = deviceName;
    device.backend = backend == "rocm" ? SoftwareStack::Rocm : SoftwareStack::Cuda;
    const DeviceMatch match = matchDevice(device, catalog);
    return match.matched ? match.cardId : std::string();
}

} // namespace

std::vector<CalibrationResidual> storedResiduals(const QString &database)
{
    if (!QFileInfo::exists(database))
        return {};
    HistoryStore store(database, HistoryStore::Access::ReadOnlyWhereNeeded);
    std::vector<CalibrationResidual> out;
    for (const CalibrationRecord &r : calibrationResiduals(store))
        out.push_back({r.backend.toStdString(), r.torchVersion.toStdString(), r.device.toStdString(), r.predictedPeakBytes,
                       r.measuredPeakBytes, r.configHash, r.frameworkBytes});
    return out;
}

std::vector<CalibrationResidual> residualsForCard(const std::vector<CalibrationResidual> &all, const CardCapacity &card)
{
    // Both names go through the catalog's own patterns: "NVIDIA H200" (what a device reports) and
    // "NVIDIA H200 141GB" (the estimator's card) meet at the catalog's H200 entry.
    static const Catalog catalog = builtInCatalog();
    const std::string cardId = catalogCardFor(card.name, card.backend, catalog);
    std::vector<CalibrationResidual> out;
    if (cardId.empty())
        return out;
    for (const auto &r : all)
        if (r.backend == card.backend && catalogCardFor(r.device, r.backend, catalog) == cardId)
            out.push_back(r);
    return out;
}

} // namespace pb
