/* A stand-in for libnvidia-ml.so.1 with the same symbols and ABI and fixed figures, so the NVML
 * reader is tested on hosts without an NVIDIA driver. Two devices; device 1 lists the calling
 * process among a hundred others (more than a first buffer holds), device 0 only PID 1.
 * Built twice: as is (a current driver), and with PB_FAKE_NVML_OLD (an old one: only the plain
 * process call with the short record, no power reading). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define OTHERS 100
/* Above the kernel's largest PID (2^22), so never a real process in the caller's tree. */
#define FIRST_OTHER_PID 4194400u

struct nvmlDevice_st {
    unsigned int index;
};
static struct nvmlDevice_st devices[2] = {{0}, {1}};
static int initialised;
static unsigned long long ownMemory = 123 * MIB;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

/* The test's switch: what the calling process reports on device 1 (~0ULL: "not available"). */
void pb_fake_nvml_set_own_memory(unsigned long long bytes) { ownMemory = bytes; }

nvmlReturn_t nvmlInit_v2(void)
{
    ++initialised;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    if (initialised == 0)
        return NVML_ERROR_UNINITIALIZED;
    --initialised;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) { return result == NVML_SUCCESS ? "Success" : "Fake error"; }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    *count = 2;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct nvmlDevice_st **device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(struct nvmlDevice_st *device, char *name, unsigned int length)
{
    snprintf(name, length, "Fake GPU %u", device->index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(struct nvmlDevice_st *device, nvmlMemory_t *memory)
{
    memory->total = device->index == 0 ? 80 * GIB : 141 * GIB;
    memory->used = (device->index + 1) * GIB;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(struct nvmlDevice_st *device, nvmlUtilization_t *rates)
{
    rates->gpu = 10 + 40 * device->index;
    rates->memory = 5;
    return NVML_SUCCESS;
}

#ifndef PB_FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetPowerUsage(struct nvmlDevice_st *device, unsigned int *milliwatts)
{
    *milliwatts = 150000 + 100000 * device->index;
    return NVML_SUCCESS;
}
#endif

/* A different answer per clock, so a reader asking for the wrong one is caught. */
nvmlReturn_t nvmlDeviceGetClockInfo(struct nvmlDevice_st *device, int type, unsigned int *mhz)
{
    switch (type) {
    case 0: *mhz = 999; return NVML_SUCCESS;                              /* graphics */
    case 1: *mhz = 1500 + 480 * device->index; return NVML_SUCCESS;       /* SM */
    case 2: *mhz = 2619; return NVML_SUCCESS;                             /* memory */
    default: return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlDeviceGetTemperature(struct nvmlDevice_st *device, int sensor, unsigned int *celsius)
{
    if (sensor != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *celsius = 40 + 5 * device->index;
    return NVML_SUCCESS;
}

/* The process list in either record layout; the answer NVML gives to a short buffer. */
static nvmlReturn_t processes(struct nvmlDevice_st *device, unsigned int *count, void *infos, int layout)
{
    unsigned int pids[OTHERS + 2];
    unsigned long long bytes[OTHERS + 2];
    unsigned int n = 0;
    if (device->index == 0) {
        pids[n] = 1;
        bytes[n++] = 999 * MIB;
    } else {
        for (unsigned int k = 0; k < OTHERS; ++k) {
            pids[n] = FIRST_OTHER_PID + k;
            bytes[n++] = MIB;
        }
        pids[n] = (unsigned int)getpid();
        bytes[n++] = ownMemory;
    }
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    for (unsigned int k = 0; k < n; ++k) {
        if (layout == 1) {
            nvmlProcessInfo_v1_t *info = (nvmlProcessInfo_v1_t *)infos + k;
            info->pid = pids[k];
            info->usedGpuMemory = bytes[k];
        } else {
            nvmlProcessInfo_v2_t *info = (nvmlProcessInfo_v2_t *)infos + k;
            info->pid = pids[k];
            info->usedGpuMemory = bytes[k];
            info->gpuInstanceId = 0xFFFFFFFFu;
            info->computeInstanceId = 0xFFFFFFFFu;
        }
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(struct nvmlDevice_st *device, unsigned int *count, void *infos)
{
    return processes(device, count, infos, 1);
}

#ifndef PB_FAKE_NVML_OLD
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(struct nvmlDevice_st *device, unsigned int *count, void *infos)
{
    return processes(device, count, infos, 2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(struct nvmlDevice_st *device, unsigned int *count, void *infos)
{
    return processes(device, count, infos, 2);
}
#endif
