// Entry point of the sm_90a sparse MLA decode (sparse_mla_decode_sm90.cuh). The portable launcher
// (csrc/cuda/sparse_mla_decode.cu) has validated the params, planned the splits and decides when
// this runs.
#include "sm90_api.h"
#include "sparse_mla_decode_sm90.cuh"

namespace sinkops::cuda::sm90 {

int sparse_mla_decode_smem_bytes(int d_qk) {
  return d_qk == 576 ? DecodeSm90Config<576>::kSmemBytes : DecodeSm90Config<512>::kSmemBytes;
}

int sparse_mla_decode_step_keys() { return kDecodeBlockKeys; }

void sparse_mla_decode(const SparseMlaDecodeParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.layout == KvCacheLayout::kV32) return launch_decode_sm90<KvCacheLayout::kV32>(p, s);
  return launch_decode_sm90<KvCacheLayout::kV4>(p, s);
}

}  // namespace sinkops::cuda::sm90
