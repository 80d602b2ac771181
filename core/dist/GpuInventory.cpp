#include "dist/GpuInventory.h"

#include "watch/BackendLibrary.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

namespace pb {
namespace {

// The few NVML declarations used here, with nvml.h's ABI (NVML API 10-13; the sampler's own set is
// in watch/NvmlBackend.cpp).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st *;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned int kTextBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE
// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v2 and _v3 fill it.
struct nvmlPciInfo_t {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];  // "00000000:3B:00.0"
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "NVML ABI");

using InitFn = nvmlReturn_t (*)();
using ErrorStringFn = const char *(*)(nvmlReturn_t);
using CountFn = nvmlReturn_t (*)(unsigned int *);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t *);
using PciFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t *);
using TextFn = nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned int);
using MigCountFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int *);
using MigHandleFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlDevice_t *);

// PCI order: canonical ids have fixed-width fields after a domain of at least four digits, so a
// longer domain is a larger one and equal lengths compare as text.
bool pciBefore(const PhysicalGpu &a, const PhysicalGpu &b)
{
    const auto domainDigits = [](const std::string &id) { return id.find(':'); };
    if (domainDigits(a.pciBusId) != domainDigits(b.pciBusId))
        return domainDigits(a.pciBusId) < domainDigits(b.pciBusId);
    return a.pciBusId < b.pciBusId;
}

std::string textOf(const char *buffer, size_t size) { return std::string(buffer, ::strnlen(buffer, size)); }

} // namespace

std::string canonicalPciBusId(const std::string &text)
{
    static const QRegularExpression address(QStringLiteral("^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\\.([0-7])$"));
    const auto match = address.match(QString::fromStdString(text).trimmed());
    if (!match.hasMatch())
        return {};
    const unsigned int domain = match.hasCaptured(1) ? match.captured(1).toUInt(nullptr, 16) : 0;
    char id[32];
    std::snprintf(id, sizeof id, "%04x:%02x:%02x.%x", domain, match.captured(2).toUInt(nullptr, 16), match.captured(3).toUInt(nullptr, 16),
                  match.captured(4).toUInt(nullptr, 16));
    return id;
}

GpuInventory gpusFromNvml(const QString &library)
{
    GpuInventory inventory;
    watch::BackendLibrary nvml;
    if (!nvml.open(library, &inventory.why))
        return inventory;
    const auto init = nvml.symbol<InitFn>("nvmlInit_v2");
    const auto shutdown = nvml.symbol<InitFn>("nvmlShutdown");
    const auto count = nvml.symbol<CountFn>("nvmlDeviceGetCount_v2");
    const auto handle = nvml.symbol<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
    auto pci = nvml.symbol<PciFn>("nvmlDeviceGetPciInfo_v3");
    if (!pci)
        pci = nvml.symbol<PciFn>("nvmlDeviceGetPciInfo_v2");
    if (!init || !shutdown || !count || !handle || !pci) {
        inventory.why = library.toStdString() + ": lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetPciInfo_v3/_v2";
        return inventory;
    }
    const auto uuid = nvml.symbol<TextFn>("nvmlDeviceGetUUID");
    const auto name = nvml.symbol<TextFn>("nvmlDeviceGetName");
    const auto migCount = nvml.symbol<MigCountFn>("nvmlDeviceGetMaxMigDeviceCount");
    const auto migHandle = nvml.symbol<MigHandleFn>("nvmlDeviceGetMigDeviceHandleByIndex");
    const auto errorString = nvml.symbol<ErrorStringFn>("nvmlErrorString");
    const auto failure = [&](const char *call, nvmlReturn_t status) {
        return library.toStdString() + ": " + call + " failed (" + (errorString ? errorString(status) : "NVML error " + std::to_string(status)) + ")";
    };
    if (const nvmlReturn_t status = init(); status != NVML_SUCCESS) {
        inventory.why = failure("nvmlInit_v2", status);
        return inventory;
    }
    unsigned int devices = 0;
    if (const nvmlReturn_t status = count(&devices); status != NVML_SUCCESS)
        inventory.why = failure("nvmlDeviceGetCount_v2", status);
    for (unsigned int i = 0; inventory.why.empty() && i < devices; ++i) {
        nvmlDevice_t device = nullptr;
        nvmlPciInfo_t info {};
        if (const nvmlReturn_t status = handle(i, &device); status != NVML_SUCCESS) {
            inventory.why = failure("nvmlDeviceGetHandleByIndex_v2", status);
            break;
        }
        if (const nvmlReturn_t status = pci(device, &info); status != NVML_SUCCESS) {
            inventory.why = failure("nvmlDeviceGetPciInfo", status);
            break;
        }
        PhysicalGpu gpu;
        gpu.pciBusId = canonicalPciBusId(textOf(info.busId, sizeof info.busId));
        if (gpu.pciBusId.empty()) {
            inventory.why = library.toStdString() + ": GPU " + std::to_string(i) + " has no PCI address ('" + textOf(info.busId, sizeof info.busId) + "')";
            break;
        }
        char text[kTextBytes] = {};
        if (uuid && uuid(device, text, sizeof text) == NVML_SUCCESS)
            gpu.uuid = textOf(text, sizeof text);
        if (name && name(device, text, sizeof text) == NVML_SUCCESS)
            gpu.model = textOf(text, sizeof text);
        // MIG instances, so CUDA_VISIBLE_DEVICES=MIG-... finds its GPU; empty slots answer NOT_FOUND.
        unsigned int slots = 0;
        if (uuid && migCount && migHandle && migCount(device, &slots) == NVML_SUCCESS) {
            for (unsigned int slot = 0; slot < slots; ++slot) {
                nvmlDevice_t instance = nullptr;
                if (migHandle(device, slot, &instance) == NVML_SUCCESS && uuid(instance, text, sizeof text) == NVML_SUCCESS)
                    gpu.migUuids.push_back(textOf(text, sizeof text));
            }
        }
        inventory.gpus.push_back(std::move(gpu));
    }
    shutdown();
    // A list with a GPU missing would shift every position after it: all or nothing.
    if (!inventory.why.empty()) {
        inventory.gpus.clear();
        return inventory;
    }
    std::stable_sort(inventory.gpus.begin(), inventory.gpus.end(), pciBefore);
    inventory.source = "nvml";
    return inventory;
}

GpuInventory gpusFromDriverInfo(const QString &driverInfoDir, const QString &deviceNodeDir)
{
    GpuInventory inventory;
    const QDir folder(driverInfoDir);
    if (!folder.exists()) {
        inventory.why = driverInfoDir.toStdString() + " does not exist (no NVIDIA driver loaded)";
        return inventory;
    }
    for (const QString &entry : folder.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        QFile file(folder.filePath(entry + QStringLiteral("/information")));
        if (!file.open(QIODevice::ReadOnly))
            continue;
        // "Key: <tabs> value" lines; values may hold colons themselves (the bus location does).
        std::map<QString, QString> fields;
        for (const QByteArray &line : file.readAll().split('\n')) {
            const auto colon = line.indexOf(':');
            if (colon > 0)
                fields[QString::fromUtf8(line.left(colon)).trimmed()] = QString::fromUtf8(line.mid(colon + 1)).trimmed();
        }
        if (fields[QStringLiteral("GPU Excluded")] == QLatin1String("Yes"))
            continue;
        const QString minor = fields[QStringLiteral("Device Minor")];
        if (!deviceNodeDir.isEmpty() && !minor.isEmpty() && !QFileInfo::exists(QDir(deviceNodeDir).filePath(QStringLiteral("nvidia") + minor))) {
            inventory.why += (inventory.why.empty() ? "" : "; ") + entry.toStdString() + " left out: no " + deviceNodeDir.toStdString() + "/nvidia" + minor.toStdString();
            continue;
        }
        PhysicalGpu gpu;
        const QString location = fields[QStringLiteral("Bus Location")];
        gpu.pciBusId = canonicalPciBusId((location.isEmpty() ? entry : location).toStdString());
        const QString uuid = fields[QStringLiteral("GPU UUID")];
        if (uuid.startsWith(QLatin1String("GPU-")))  // an uninitialised GPU may show question marks
            gpu.uuid = uuid.toStdString();
        gpu.model = fields[QStringLiteral("Model")].toStdString();
        if (!gpu.pciBusId.empty())
            inventory.gpus.push_back(std::move(gpu));
    }
    std::stable_sort(inventory.gpus.begin(), inventory.gpus.end(), pciBefore);
    inventory.source = driverInfoDir.toStdString();
    return inventory;
}

GpuInventory listGpus(const GpuInventorySources &sources)
{
    std::string nvmlWhy;
    if (!sources.nvmlLibrary.isEmpty()) {
        GpuInventory nvml = gpusFromNvml(sources.nvmlLibrary);
        if (!nvml.source.empty())
            return nvml;
        nvmlWhy = nvml.why;
    }
    GpuInventory driver = gpusFromDriverInfo(sources.driverInfoDir, sources.deviceNodeDir);
    if (!nvmlWhy.empty())
        driver.why = nvmlWhy + (driver.why.empty() ? "" : "; " + driver.why);
    return driver;
}

} // namespace pb
