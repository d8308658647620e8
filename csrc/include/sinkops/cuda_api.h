// The CUDA launchers: the whole C++ API of the CUDA backend. Torch-free; `stream` is a
// cudaStream_t passed as void* so host code that includes this needs no CUDA headers.
// Launchers run on the calling thread's current device (ScopedDevice picks another), validate
// what only they can know (supported head dim, shared memory of the arch) and throw
// sinkops::Error; they never synchronize with the host.
#pragma once
#include <cstdint>
#include <string>

#include "sinkops/error.h"
#include "sinkops/sparse_mla_backward_params.h"
#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_backward_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::cuda {

// Each op's *_unsupported(params) says why its kernels cannot run calls like these on the current
// device ("" when they can), from the STATIC fields alone and without launching: the same checks
// the launcher makes first (dtype, head dims, shared memory of this GPU). Backends ask it before
// choosing the CUDA kernels, so `auto` can pick another backend instead of failing.

// csrc/cuda/window_attention*.cu
std::string window_attention_unsupported(const WindowAttentionParams& params);
void window_attention_fwd(const WindowAttentionParams& params, void* stream);
// "sm90" or "sm80": which kernels calls with these STATIC fields run on the current device.
std::string window_attention_path(const WindowAttentionParams& params);

// csrc/cuda/window_attention_backward.cu: dq, dk, dv and the rows' sink gradients (sm_90a only).
std::string window_attention_backward_unsupported(const WindowAttentionBackwardParams& params);
void window_attention_backward(const WindowAttentionBackwardParams& params, void* stream);

// csrc/cuda/sparse_mla_backward.cu: one chunk of queries of sparse_mla_prefill's backward (dq, the
// rows' sink gradients, the key gradients into dkv_acc or det_stage; sm_90a only).
std::string sparse_mla_backward_unsupported(const SparseMlaBackwardParams& params);
void sparse_mla_backward(const SparseMlaBackwardParams& params, void* stream);

// csrc/cuda/sparse_mla_prefill*.cu
std::string sparse_mla_prefill_unsupported(const SparseMlaPrefillParams& params);
void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& params, void* stream);
// "sm90" (the Hopper 64-head warpgroup-MMA kernel), "sm90-few-heads" (the Hopper few-heads kernel,
// <= 32 heads) or "sm80" (the mma.sync kernels): which kernels calls with these STATIC fields run on
// the current device; `auto` prefers either sm90 kernel to Triton.
std::string sparse_mla_prefill_path(const SparseMlaPrefillParams& params);
// The same for sparse_mla_decode (its split plan follows the family: sparse_mla_decode_plan).
std::string sparse_mla_decode_path(const SparseMlaDecodeParams& params);

// csrc/cuda/sparse_mla_decode*.cu
// The split-k plan for these shapes on the current device, the one place it is decided: sets
// params.num_splits and params.tiles_per_split and returns the workspace bytes the plan needs
// (0 for a single split; then params.workspace may stay nullptr). Depends on shapes and the SM
// count only, so a CUDA graph may keep the plan and the workspace.
std::string sparse_mla_decode_unsupported(const SparseMlaDecodeParams& params);
int64_t sparse_mla_decode_plan(SparseMlaDecodeParams& params);
void sparse_mla_decode_fwd(const SparseMlaDecodeParams& params, void* stream);

// csrc/cuda/device.cu: makes `device` current for its lifetime (a negative device: no change),
// as flash-attention's CUDAGuard; restores the previous device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace sinkops::cuda
