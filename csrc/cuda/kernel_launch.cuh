// How kernels name their dynamic shared memory and how the host launches them. The two macros
// come from the CPU emulator under SINKOPS_CUDA_EMU (the g++ build of tools/cuda_emu), so the
// kernels' C++ runs unchanged on the CPU; the host helpers below work in both builds.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "sinkops/error.h"

#ifdef SINKOPS_CUDA_EMU
#include "sinkops_cuda_emu/launch.h"
#else
// The launch's dynamic shared memory as `unsigned char name[]`, aligned to `align` bytes.
#define SINKOPS_DYNAMIC_SMEM(name, align) extern __shared__ __align__(align) unsigned char name[]
// SINKOPS_LAUNCH(kernel, grid, block, smem, stream)(args...) == kernel<<<grid, block, smem, stream>>>(args...)
#define SINKOPS_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif

namespace sinkops::cuda {

constexpr int kMaxDevices = 64;

// Programmatic dependent launch (sm_90+): a kernel launched with launch_dependent() may start
// while the kernel before it on the stream still runs, once every CTA of that one has called
// allow_dependents() (or exited); it must call wait_for_prerequisite() before reading what the
// earlier kernel wrote. This hides the second kernel's launch latency (a CUDA graph keeps the
// edge). Both device calls are no-ops below sm_90 and in the CPU emulator.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prerequisite() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

inline void check_cuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Error(what + ": " + cudaGetErrorString(err));
}
// After a launch: a bad configuration is reported here, on the host, before anything runs.
inline void check_launch(const std::string& what) { check_cuda(cudaGetLastError(), what + " launch"); }

inline int current_device() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (device < 0 || device >= kMaxDevices) throw Error("device index " + std::to_string(device) + " out of range");
  return device;
}

// Facts about a device that launches need, read once per device (each query costs host time).
struct DeviceInfo {
  int sm_count = 0;
  int smem_optin = 0;  // bytes of dynamic shared memory one block may opt in to
  int cc_major = 0, cc_minor = 0;  // compute capability: sm_90a code runs only on 9.0
};
inline const DeviceInfo& device_info(int device) {
  static std::atomic<const DeviceInfo*> cache[kMaxDevices];
  const DeviceInfo* info = cache[device].load(std::memory_order_acquire);
  if (info != nullptr) return *info;
  auto* fresh = new DeviceInfo;  // lives for the process (one per device)
  check_cuda(cudaDeviceGetAttribute(&fresh->sm_count, cudaDevAttrMultiProcessorCount, device), "SM count query");
  check_cuda(cudaDeviceGetAttribute(&fresh->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "shared memory query");
  check_cuda(cudaDeviceGetAttribute(&fresh->cc_major, cudaDevAttrComputeCapabilityMajor, device), "CC query");
  check_cuda(cudaDeviceGetAttribute(&fresh->cc_minor, cudaDevAttrComputeCapabilityMinor, device), "CC query");
  const DeviceInfo* expected = nullptr;
  if (cache[device].compare_exchange_strong(expected, fresh)) return *fresh;
  delete fresh;  // another thread got there first
  return *expected;
}

// Launches kernel<<<grid, block, 0, stream>>>(args...) as a programmatic dependent of the
// kernel before it on the stream when the device has compute capability 9.0 or higher (plain
// launch otherwise, and in the CPU emulator). The kernel must call wait_for_prerequisite().
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
#ifdef SINKOPS_CUDA_EMU
  SINKOPS_LAUNCH(kernel, grid, block, 0, stream)(std::forward<Args>(args)...);
#else
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = device_info(current_device()).cc_major >= 9 ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), "dependent launch");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of `cluster`
// CTAs (sm_90+; each grid dimension a multiple of the cluster's). The kernels that pair head blocks
// (sm90/sparse_mla_prefill_sm90.cu, sm90/sparse_mla_decode_sm90.cuh) launch through it.
#ifndef SINKOPS_CUDA_EMU
template <class... Params, class... Args>
void launch_clustered(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, dim3 cluster, cudaStream_t stream,
                      const char* what, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster.x;
  attr[0].val.clusterDim.y = cluster.y;
  attr[0].val.clusterDim.z = cluster.z;
  config.attrs = attr;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), std::string(what) + " launch");
}
#endif

// Whether the sm_90a kernels may run on `info`'s device: built in (SINKOPS_SM90), a 9.0 device,
// and not turned off with SINKOPS_CUDA_SM80=1 (read on every call, so a benchmark can compare
// both paths in one process; getenv costs ~0.1 us).
inline bool use_sm90(const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  if (info.cc_major != 9 || info.cc_minor != 0) return false;
  const char* off = std::getenv("SINKOPS_CUDA_SM80");
  return off == nullptr || off[0] == '\0' || off[0] == '0';
#else
  (void)info;
  return false;
#endif
}

// Why the Hopper-only kernels (the backwards) cannot run on `info`'s device, or "" when they can.
inline std::string sm90_only_unavailable(const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  if (use_sm90(info)) return "";
  return "the CUDA backward kernels are sm_90a (Hopper) only; this GPU is sm_" + std::to_string(info.cc_major) +
         std::to_string(info.cc_minor) + " (or SINKOPS_CUDA_SM80=1 is set)";
#else
  (void)info;
  return "the CUDA backward kernels are sm_90a (Hopper) only, and this build has none (90a not among "
         "SINKOPS_CUDA_ARCHS, or no CuTe headers)";
#endif
}

// Lets kKernel use `bytes` of dynamic shared memory on the current device. The limit is a property
// of the function on each device, so it is raised once rather than on every launch. max_carveout:
// also ask for the SM's largest shared-memory carveout, for kernels that want several CTAs of
// that size per SM (left to the driver, it chose 132 KB for 51 KB CTAs: 2 per SM, not 4).
template <auto kKernel>
void reserve_dynamic_smem(int bytes, const char* what, bool max_carveout = false) {
  static std::atomic<int> reserved[kMaxDevices];
  if (bytes <= 48 * 1024) return;
  const int device = current_device();
  if (reserved[device].load(std::memory_order_relaxed) >= bytes) return;
  check_cuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             std::string(what) + ": cannot reserve " + std::to_string(bytes) + " bytes of shared memory");
  if (max_carveout)
    check_cuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared),
               std::string(what) + ": cannot set the shared memory carveout");
  int seen = reserved[device].load(std::memory_order_relaxed);
  while (seen < bytes && !reserved[device].compare_exchange_weak(seen, bytes)) {
  }
}

}  // namespace sinkops::cuda
