// The CUDA launchers: the whole C++ API of the CUDA backend. Torch-free; `stream` is a
// cudaStream_t passed as void* so host code that includes this needs no CUDA headers.
// Each launcher validates what only it can know (supported head dim, arch) and throws
// sinkops::Error; it never synchronizes with the host.
#pragma once
#include <cstdint>

#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::cuda {

// csrc/cuda/window_attention*.cu
void window_attention_fwd(const WindowAttentionParams& params, void* stream);

// csrc/cuda/sparse_mla_prefill*.cu
void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& params, void* stream);

// csrc/cuda/sparse_mla_decode*.cu
// Bytes of scratch the decode needs for these shapes (split-k partials); depends on shapes only.
int64_t sparse_mla_decode_workspace_bytes(const SparseMlaDecodeParams& params, int num_sms);
void sparse_mla_decode_fwd(const SparseMlaDecodeParams& params, void* stream);

}  // namespace sinkops::cuda
