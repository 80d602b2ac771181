/* A stand-in for librocm_smi64 with the same symbols and ABI and fixed figures, so the ROCm SMI
 * reader is tested on hosts without an AMD driver. Two devices; the calling process is a compute
 * process, and so is PID 1 (on device 0, not in the caller's tree).
 * Built twice: as ROCm 5 (Debian's 5.2 build: version 1.0, the old clock record, per-PID memory
 * only, the calling process on device 1) and with PB_FAKE_ROCM_SMI_6 (rocm_smi_lib 7.x: the clock
 * record with has_deep_sleep, per-device memory with the calling process on both devices, power
 * only through rsmi_dev_power_get, no edge temperature sensor and no busy percentage, like an
 * MI300). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int rsmi_status_t;
#define RSMI_STATUS_SUCCESS 0
#define RSMI_STATUS_INVALID_ARGS 1
#define RSMI_STATUS_NOT_SUPPORTED 2
#define RSMI_STATUS_INIT_ERROR 8
#define RSMI_STATUS_NOT_FOUND 10
#define RSMI_STATUS_INSUFFICIENT_SIZE 11

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)

typedef struct {
    uint32_t major, minor, patch;
    const char *build;
} rsmi_version_t;
typedef struct {
    uint32_t process_id, pasid;
    uint64_t vram_usage, sdma_usage;
    uint32_t cu_occupancy;
} rsmi_process_info_t;
#ifdef PB_FAKE_ROCM_SMI_6
typedef struct {
    bool has_deep_sleep;
    uint32_t num_supported, current;
    uint64_t frequency[33];
} rsmi_frequencies_t;
#else
typedef struct {
    uint32_t num_supported, current;
    uint64_t frequency[32];
} rsmi_frequencies_t;
#endif

static int initialised;

rsmi_status_t rsmi_init(uint64_t flags)
{
    (void)flags;
    ++initialised;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_shut_down(void)
{
    if (initialised == 0)
        return RSMI_STATUS_INIT_ERROR;
    --initialised;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_version_get(rsmi_version_t *version)
{
#ifdef PB_FAKE_ROCM_SMI_6
    version->major = 7;
    version->minor = 1;
#else
    version->major = 1;
    version->minor = 0;
#endif
    version->patch = 0;
    version->build = "fake";
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_num_monitor_devices(uint32_t *count)
{
    if (!initialised)
        return RSMI_STATUS_INIT_ERROR;
    *count = 2;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_dev_name_get(uint32_t device, char *name, size_t length)
{
    snprintf(name, length, "Fake AMD %u", device);
    return RSMI_STATUS_SUCCESS;
}

/* VRAM (0) differs from the other memory types, so a reader asking for the wrong one is caught. */
rsmi_status_t rsmi_dev_memory_usage_get(uint32_t device, int type, uint64_t *used)
{
    *used = type == 0 ? (3 + device) * GIB : 7 * GIB;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_dev_memory_total_get(uint32_t device, int type, uint64_t *total)
{
    *total = type == 0 ? (device == 0 ? 64 * GIB : 192 * GIB) : 500 * GIB;
    return RSMI_STATUS_SUCCESS;
}

#ifndef PB_FAKE_ROCM_SMI_6
rsmi_status_t rsmi_dev_busy_percent_get(uint32_t device, uint32_t *percent)
{
    *percent = 30 + 20 * device;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_dev_power_ave_get(uint32_t device, uint32_t sensor, uint64_t *microwatts)
{
    if (sensor != 0)
        return RSMI_STATUS_INVALID_ARGS;
    *microwatts = (200 + 100 * (uint64_t)device) * 1000000ULL;
    return RSMI_STATUS_SUCCESS;
}
#else
rsmi_status_t rsmi_dev_power_get(uint32_t device, uint64_t *microwatts, int *type)
{
    *microwatts = (200 + 100 * (uint64_t)device) * 1000000ULL;
    *type = 1; /* RSMI_CURRENT_POWER */
    return RSMI_STATUS_SUCCESS;
}
#endif

rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t device, int type, rsmi_frequencies_t *f)
{
    memset(f, 0, sizeof *f);
    f->num_supported = 3;
    f->current = 2;
    f->frequency[0] = 500000000ULL;
    f->frequency[1] = 1000000000ULL;
    /* The system clock (0) in Hz; any other clock type answers something else. */
    f->frequency[2] = type == 0 ? (1700ULL + 100ULL * device) * 1000000ULL : 900000000ULL;
#ifdef PB_FAKE_ROCM_SMI_6
    f->has_deep_sleep = true;
#endif
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_dev_temp_metric_get(uint32_t device, uint32_t sensor, int metric, int64_t *millidegrees)
{
#ifdef PB_FAKE_ROCM_SMI_6
    if (sensor != 1 || metric != 0)   /* junction only */
        return RSMI_STATUS_NOT_SUPPORTED;
#else
    if (sensor != 0 || metric != 0)   /* edge, current */
        return RSMI_STATUS_NOT_SUPPORTED;
#endif
    *millidegrees = 45500 + 1000 * (int64_t)device;
    return RSMI_STATUS_SUCCESS;
}

/* The library's answers: NULL asks for the count, a short buffer is filled and refused. */
rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *count)
{
    const uint32_t pids[2] = {1, (uint32_t)getpid()};
    if (!procs) {
        *count = 2;
        return RSMI_STATUS_SUCCESS;
    }
    const uint32_t room = *count;
    for (uint32_t k = 0; k < 2 && k < room; ++k) {
        memset(&procs[k], 0, sizeof procs[k]);
        procs[k].process_id = pids[k];
        procs[k].pasid = 100 + k;
    }
    *count = room < 2 ? room : 2;
    return room < 2 ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_compute_process_info_by_pid_get(uint32_t pid, rsmi_process_info_t *proc)
{
    memset(proc, 0, sizeof *proc);
    proc->process_id = pid;
    if (pid == 1)
        proc->vram_usage = 555 * MIB;
    else if (pid == (uint32_t)getpid())
#ifdef PB_FAKE_ROCM_SMI_6
        proc->vram_usage = 146 * MIB;  /* its total over both devices */
#else
        proc->vram_usage = 123 * MIB;
#endif
    else
        return RSMI_STATUS_NOT_FOUND;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *indices, uint32_t *count)
{
    uint32_t used[2];
    uint32_t n = 0;
    if (pid == 1) {
        used[n++] = 0;
    } else if (pid == (uint32_t)getpid()) {
#ifdef PB_FAKE_ROCM_SMI_6
        used[n++] = 0;
#endif
        used[n++] = 1;
    } else {
        return RSMI_STATUS_NOT_FOUND;
    }
    if (!indices) {
        *count = n;
        return RSMI_STATUS_SUCCESS;
    }
    const uint32_t room = *count;
    for (uint32_t k = 0; k < n && k < room; ++k)
        indices[k] = used[k];
    *count = room < n ? room : n;
    return room < n ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

#ifdef PB_FAKE_ROCM_SMI_6
rsmi_status_t rsmi_compute_process_info_by_device_get(uint32_t pid, uint32_t device, rsmi_process_info_t *proc)
{
    memset(proc, 0, sizeof *proc);
    proc->process_id = pid;
    if (pid == 1 && device == 0)
        proc->vram_usage = 555 * MIB;
    else if (pid == (uint32_t)getpid())
        proc->vram_usage = device == 0 ? 23 * MIB : 123 * MIB;
    else
        return RSMI_STATUS_NOT_FOUND;
    return RSMI_STATUS_SUCCESS;
}
#endif
