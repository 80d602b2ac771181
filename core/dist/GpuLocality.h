#pragma once
// Which physical GPU each CUDA device of this process is (cuda:0, cuda:1, ... as CUDA numbers them
// after CUDA_VISIBLE_DEVICES), and the CPUs local to it, read from sysfs by its PCI address: the
// CPUs a rank on cuda:N should run on. No torch here.
#include "dist/GpuInventory.h"

#include <optional>

namespace pb {

// One CUDA device ordinal.
struct VisibleGpu {
    std::string entry;  // what names it: the CUDA_VISIBLE_DEVICES entry, or the index when unset
    int gpu = -1;       // index into the inventory; -1 when CUDA's numbering is not known here
};

// CUDA_VISIBLE_DEVICES read as CUDA reads it (the rules torch.cuda._parse_visible_devices and
// _transform_uuid_to_ordinals mirror): unset, every GPU; otherwise a comma list of indices, or of
// GPU-/MIG- UUIDs (a unique prefix is enough), that ends at the first entry naming no GPU ("-1", a
// word, an index past the last GPU, an unknown or ambiguous UUID; so "" names none), and a device
// named twice hides them all. Indices count in `gpus`' PCI order, which is CUDA's only when
// `indicesInPciOrder`; otherwise they give ordinals whose GPU is unknown (-1).
std::vector<VisibleGpu> visibleGpus(const std::optional<std::string> &cudaVisibleDevices, const std::vector<PhysicalGpu> &gpus,
                                    bool indicesInPciOrder);

// Whether CUDA numbers `gpus` in PCI order: CUDA_DEVICE_ORDER=PCI_BUS_ID says so; the default
// (FASTEST_FIRST) puts the fastest first, which keeps PCI order only among GPUs of one model. With
// MIG instances CUDA numbers the instances, not the GPUs.
bool cudaCountsInPciOrder(const std::optional<std::string> &cudaDeviceOrder, const std::vector<PhysicalGpu> &gpus);

struct GpuLocality {
    int ordinal = 0;           // cuda:<ordinal> in this process
    std::string uuid;
    std::string pciBusId;      // "" when not known
    int numaNode = -1;         // sysfs numa_node; -1: none, or not known
    std::string localCpus;     // sysfs local_cpulist, canonical ("0-47,96-143"); "" when not known
    std::string bindCpus;      // the local CPUs this process may use: a rank on this GPU binds to them
    std::string note;          // why bindCpus is empty
};

struct GpuLocalityReport {
    std::vector<GpuLocality> gpus;  // one per CUDA ordinal, in ordinal order
    std::string source;             // where the GPUs were listed from ("nvml", "/proc/driver/nvidia/gpus")
    std::string note;               // what failed on the way, or why no GPU is listed
};

// Everything gpuLocality() reads, so tests can give it a fake host.
struct GpuLocalitySources {
    GpuInventorySources inventory;
    QString sysfsRoot = QStringLiteral("/sys");       // holds bus/pci/devices/<address>/local_cpulist
    std::optional<std::string> cudaVisibleDevices;    // nullopt: unset
    std::optional<std::string> cudaDeviceOrder;       // nullopt: unset
    std::optional<std::vector<int>> allowedCpus;      // nullopt: what sched_getaffinity allows now
};

// The real host, with this process's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
GpuLocalitySources systemGpuLocalitySources();

GpuLocalityReport gpuLocality(const GpuLocalitySources &sources);

} // namespace pb
