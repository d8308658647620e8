// ScopedDevice (cuda_api.h): makes a device current for a launch and restores the caller's.
// sinkops._C links its CUDA runtime statically, so it cannot rely on torch's device guard.
#include <cuda_runtime.h>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"

namespace sinkops::cuda {

ScopedDevice::ScopedDevice(int device) {
  if (device < 0) return;
  const int current = current_device();
  if (current == device) return;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  previous_ = current;
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // no throw from a destructor
}

}  // namespace sinkops::cuda
