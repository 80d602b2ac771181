#include "dist/GpuLocality.h"

#include "dist/CpuBinding.h"
#include "util/Errors.h"

#include <QDir>
#include <QFile>
#include <QStringList>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>

namespace pb {
namespace {

// An entry of an index list read like strtoul: leading blanks, an optional sign, then digits,
// anything after them ignored ("1gpu" is 1). -1 for no digits or a negative number; a number too
// long for int64 is past every GPU anyway.
int64_t leadingIndex(const std::string &entry)
{
    size_t i = 0;
    while (i < entry.size() && std::isspace(static_cast<unsigned char>(entry[i])))
        ++i;
    const bool negative = i < entry.size() && entry[i] == '-';
    if (i < entry.size() && (entry[i] == '-' || entry[i] == '+'))
        ++i;
    int64_t value = 0;
    size_t digits = 0;
    for (; i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i])); ++i, ++digits)
        value = std::min<int64_t>(value * 10 + (entry[i] - '0'), int64_t(1) << 40);
    if (digits == 0 || (negative && value != 0))
        return -1;
    return value;
}

// The one GPU (and the UUID it matched) whose UUID starts with `entry`; a MIG entry finds the GPU
// holding that instance, the older "MIG-GPU-<uuid>/<gi>/<ci>" form its GPU by the UUID inside.
// {-1, ""} when no GPU or more than one matches.
std::pair<int, std::string> gpuByUuid(const std::string &entry, const std::vector<PhysicalGpu> &gpus)
{
    const bool legacyMig = entry.rfind("MIG-GPU-", 0) == 0;
    const bool mig = !legacyMig && entry.rfind("MIG-", 0) == 0;
    const std::string candidate = legacyMig ? entry.substr(4, entry.find('/') - 4) : entry;  // npos - 4: to the end
    std::pair<int, std::string> found {-1, ""};
    for (size_t i = 0; i < gpus.size(); ++i) {
        const std::vector<std::string> uuids = mig ? gpus[i].migUuids : std::vector<std::string> {gpus[i].uuid};
        for (const auto &uuid : uuids) {
            if (uuid.empty() || uuid.rfind(candidate, 0) != 0)
                continue;
            if (found.first >= 0)
                return {-1, ""};
            found = {static_cast<int>(i), legacyMig ? entry : uuid};
        }
    }
    return found;
}

QString readTrimmed(const QString &path, bool *present)
{
    QFile file(path);
    *present = file.open(QIODevice::ReadOnly);
    return *present ? QString::fromUtf8(file.readAll()).trimmed() : QString();
}

} // namespace

std::vector<VisibleGpu> visibleGpus(const std::optional<std::string> &cudaVisibleDevices, const std::vector<PhysicalGpu> &gpus, bool indicesInPciOrder)
{
    std::vector<VisibleGpu> visible;
    if (!cudaVisibleDevices) {
        for (size_t i = 0; i < gpus.size(); ++i)
            visible.push_back({std::to_string(i), indicesInPciOrder ? static_cast<int>(i) : -1});
        return visible;
    }
    // Two passes, as PyTorch's mirror of CUDA has them: the entries up to the first that is not one
    // (a repeat empties the list), then the devices they name up to the first that names none (a
    // device named twice empties it too).
    const std::string &text = *cudaVisibleDevices;
    const QStringList parts = QString::fromStdString(text).split(QLatin1Char(','));
    const std::string uuidPrefix = text.rfind("GPU-", 0) == 0 ? "GPU-" : text.rfind("MIG-", 0) == 0 ? "MIG-" : "";
    std::vector<std::string> entries;
    std::vector<int64_t> indices;
    for (const QString &part : parts) {
        const std::string entry = part.toStdString();
        if (!uuidPrefix.empty()) {
            if (entry.rfind(uuidPrefix, 0) != 0)
                break;
            if (std::find(entries.begin(), entries.end(), entry) != entries.end())
                return {};
        } else {
            const int64_t index = leadingIndex(entry);
            if (index < 0)
                break;
            if (std::find(indices.begin(), indices.end(), index) != indices.end())
                return {};
            indices.push_back(index);
        }
        entries.push_back(entry);
    }
    std::set<std::string> named;
    for (size_t k = 0; k < entries.size(); ++k) {
        VisibleGpu device;
        device.entry = entries[k];
        std::string identity;
        if (!uuidPrefix.empty()) {
            const auto [gpu, uuid] = gpuByUuid(entries[k], gpus);
            if (gpu < 0)
                break;
            device.gpu = gpu;
            identity = uuid;
        } else {
            if (indices[k] >= static_cast<int64_t>(gpus.size()))
                break;
            device.gpu = indicesInPciOrder ? static_cast<int>(indices[k]) : -1;
            identity = std::to_string(indices[k]);
        }
        if (!named.insert(identity).second)
            return {};
        visible.push_back(device);
    }
    return visible;
}

bool cudaCountsInPciOrder(const std::optional<std::string> &cudaDeviceOrder, const std::vector<PhysicalGpu> &gpus)
{
    if (std::any_of(gpus.begin(), gpus.end(), [](const PhysicalGpu &g) { return !g.migUuids.empty(); }))
        return false;
    if (cudaDeviceOrder && *cudaDeviceOrder == "PCI_BUS_ID")
        return true;
    // Among identical GPUs, the fastest-first order is PCI order (what nvidia-smi's indices and
    // CUDA's agree on). A model the driver did not name counts as different.
    return std::all_of(gpus.begin(), gpus.end(), [&](const PhysicalGpu &g) { return !g.model.empty() && g.model == gpus.front().model; });
}

GpuLocalitySources systemGpuLocalitySources()
{
    GpuLocalitySources sources;
    if (qEnvironmentVariableIsSet("CUDA_VISIBLE_DEVICES"))
        sources.cudaVisibleDevices = qEnvironmentVariable("CUDA_VISIBLE_DEVICES").toStdString();
    if (qEnvironmentVariableIsSet("CUDA_DEVICE_ORDER"))
        sources.cudaDeviceOrder = qEnvironmentVariable("CUDA_DEVICE_ORDER").toStdString();
    return sources;
}

GpuLocalityReport gpuLocality(const GpuLocalitySources &sources)
{
    GpuLocalityReport report;
    const GpuInventory inventory = listGpus(sources.inventory);
    report.source = inventory.source;
    report.note = inventory.why;
    if (inventory.gpus.empty() && report.note.empty())
        report.note = "the driver lists no NVIDIA GPU";
    const auto visible = visibleGpus(sources.cudaVisibleDevices, inventory.gpus, cudaCountsInPciOrder(sources.cudaDeviceOrder, inventory.gpus));
    std::vector<int> allowed = sources.allowedCpus ? *sources.allowedCpus : allowedCpus();
    std::sort(allowed.begin(), allowed.end());
    for (size_t ordinal = 0; ordinal < visible.size(); ++ordinal) {
        GpuLocality g;
        g.ordinal = static_cast<int>(ordinal);
        if (visible[ordinal].gpu < 0) {
            g.note = "CUDA numbers these GPUs fastest first (CUDA_DEVICE_ORDER is not PCI_BUS_ID) and they differ, or have MIG instances: "
                     "which GPU is cuda:" + std::to_string(ordinal) + " is not known here";
            report.gpus.push_back(std::move(g));
            continue;
        }
        const PhysicalGpu &gpu = inventory.gpus[static_cast<size_t>(visible[ordinal].gpu)];
        g.uuid = gpu.uuid;
        g.pciBusId = gpu.pciBusId;
        const QDir device(QDir(sources.sysfsRoot).filePath(QStringLiteral("bus/pci/devices/") + QString::fromStdString(gpu.pciBusId)));
        bool present = false;
        bool isNumber = false;
        const int node = readTrimmed(device.filePath(QStringLiteral("numa_node")), &present).toInt(&isNumber);
        g.numaNode = present && isNumber ? node : -1;
        const QString cpulistPath = device.filePath(QStringLiteral("local_cpulist"));
        const QString cpulist = readTrimmed(cpulistPath, &present);
        std::vector<int> local;
        try {
            if (present && !cpulist.isEmpty())
                local = parseCpuList(cpulist.toStdString(), cpulistPath.toStdString());
        } catch (const InvalidInputError &e) {
            g.note = e.what();
        }
        if (local.empty()) {
            if (g.note.empty())
                g.note = cpulistPath.toStdString() + (present ? " is empty" : " cannot be read") + ": the CPUs local to this GPU are not known";
            report.gpus.push_back(std::move(g));
            continue;
        }
        g.localCpus = formatCpuList(local);
        std::vector<int> usable;
        std::set_intersection(local.begin(), local.end(), allowed.begin(), allowed.end(), std::back_inserter(usable));
        g.bindCpus = formatCpuList(usable);
        if (usable.empty())
            g.note = "none of its local CPUs (" + g.localCpus + ") is allowed to this process (" + formatCpuList(allowed) + ")";
        report.gpus.push_back(std::move(g));
    }
    return report;
}

} // namespace pb
