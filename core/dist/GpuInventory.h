#pragma once
// The NVIDIA GPUs this process can open, each with its PCI address and UUIDs, in PCI bus order:
// the order CUDA numbers them in under CUDA_DEVICE_ORDER=PCI_BUS_ID (and NVML and nvidia-smi in
// practice). Read from NVML, loaded with dlopen like the watch backends; where NVML cannot be
// loaded, from the driver's own /proc/driver/nvidia/gpus/*/information. Never from nvidia-smi's
// text. No torch here.
#include <QString>

#include <string>
#include <vector>

namespace pb {

struct PhysicalGpu {
    std::string pciBusId;               // as sysfs names it: "0000:3b:00.0"
    std::string uuid;                   // "GPU-8932f937-..."; "" where the driver does not say
    std::string model;                  // "NVIDIA H200"
    std::vector<std::string> migUuids;  // "MIG-..." of its MIG instances (known through NVML only)
};

struct GpuInventory {
    std::vector<PhysicalGpu> gpus;
    std::string source;                 // "nvml" or the driver folder read; "" when neither answered
    std::string why;                    // what failed on the way (NVML's loader message, ...)
};

// Where the inventory is read from; tests point these at fakes.
struct GpuInventorySources {
    QString nvmlLibrary = QStringLiteral("libnvidia-ml.so.1");  // "": skip NVML
    QString driverInfoDir = QStringLiteral("/proc/driver/nvidia/gpus");
    // A GPU whose /dev/nvidia<minor> is missing here is one this process cannot open (a container
    // given other GPUs may still see every GPU's /proc entry). "": no such check.
    QString deviceNodeDir = QStringLiteral("/dev");
};

// NVML, else the driver folder.
GpuInventory listGpus(const GpuInventorySources &sources = {});
GpuInventory gpusFromNvml(const QString &library);
GpuInventory gpusFromDriverInfo(const QString &driverInfoDir, const QString &deviceNodeDir);

// "00000000:3B:00.0" (NVML) or "0000:3b:00.0" -> "0000:3b:00.0", sysfs's spelling; "" when
// `text` is not a PCI address.
std::string canonicalPciBusId(const std::string &text);

} // namespace pb
