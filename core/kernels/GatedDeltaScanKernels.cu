#include "kernels/GatedDeltaScan.cuh"
#include "kernels/KernelSupport.cuh"

namespace pb::kernels {

bool gatedDeltaScan(DeltaScanArgs args, void *stream)
{
    int device = 0, optin = 0, multiprocessors = 0;
    check(cudaGetDevice(&device), "gated delta scan: device");
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "gated delta scan: shared memory");
    check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "gated delta scan: multiprocessors");
    args.tile = deltaScanTile(args, optin, multiprocessors);
    if (args.tile == 0)
        return false;
    if (args.heads == 0 || args.dv == 0)
        return true;
    const size_t bytes = static_cast<size_t>(deltaScanSharedFloats(args, args.tile)) * sizeof(float);
    check(cudaFuncSetAttribute(gatedDeltaScanKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), "gated delta scan: shared memory");
    const dim3 grid(static_cast<unsigned>(args.heads), static_cast<unsigned>((args.dv + args.tile - 1) / args.tile));
    PB_LAUNCH(grid, kScanThreads, bytes, static_cast<cudaStream_t>(stream), gatedDeltaScanKernel)(args);
    check(cudaGetLastError(), "gated delta scan");
    return true;
}

} // namespace pb::kernels
