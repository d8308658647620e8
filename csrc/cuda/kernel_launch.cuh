// How a kernel names its dynamic shared memory and how the host launches it. Two macros, so
// that with SINKOPS_CUDA_EMU (the g++ build of tools/cuda_emu) both come from the CPU emulator
// and the kernels' C++ runs unchanged on the CPU.
#pragma once
#ifdef SINKOPS_CUDA_EMU
#include "sinkops_cuda_emu/launch.h"
#else
// The launch's dynamic shared memory as `unsigned char name[]`, aligned to `align` bytes.
#define SINKOPS_DYNAMIC_SMEM(name, align) extern __shared__ __align__(align) unsigned char name[]
// SINKOPS_LAUNCH(kernel, grid, block, smem, stream)(args...) == kernel<<<grid, block, smem, stream>>>(args...)
#define SINKOPS_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif
