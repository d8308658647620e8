// SINKOPS_LAUNCH / SINKOPS_DYNAMIC_SMEM for the CPU emulator (see csrc/cuda/kernel_launch.cuh).
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace sinkops_emu {

template <typename Kernel>
struct Launcher {
  Kernel kernel;
  dim3 grid, block;
  size_t smem;
  template <typename... Args>
  void operator()(const Args&... args) const {
    run_grid(grid, block, smem, [&] { kernel(args...); });
  }
};
template <typename Kernel>
Launcher<Kernel> make_launcher(Kernel kernel, dim3 grid, dim3 block, size_t smem) {
  return {kernel, grid, block, smem};
}

}  // namespace sinkops_emu

#define SINKOPS_DYNAMIC_SMEM(name, align) unsigned char* name = ::sinkops_emu::dynamic_smem()
#define SINKOPS_LAUNCH(kernel, grid, block, smem, stream) \
  ::sinkops_emu::make_launcher(kernel, dim3(grid), dim3(block), static_cast<size_t>(smem))
