// Entry points of the sm_90a few-heads sparse MLA prefill (sparse_mla_prefill_few_heads_sm90.cuh).
// The portable launcher (csrc/cuda/sparse_mla_prefill.cu) has validated the params and decides
// when this runs.
#include "sm90_api.h"
#include "sparse_mla_prefill_few_heads_sm90.cuh"

namespace sinkops::cuda::sm90 {

int sparse_mla_prefill_few_heads_max() { return kFewHeadsMax; }

int sparse_mla_prefill_few_heads_smem_bytes(int d_qk, int h_q) {
  const bool n8 = few_heads_cta_heads(h_q) == 8;
  if (d_qk == 576) return n8 ? FewHeadsPrefillConfig<576, 8>::kSmemBytes : FewHeadsPrefillConfig<576, 16>::kSmemBytes;
  return n8 ? FewHeadsPrefillConfig<512, 8>::kSmemBytes : FewHeadsPrefillConfig<512, 16>::kSmemBytes;
}

void sparse_mla_prefill_few_heads(const SparseMlaPrefillParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.d_qk == 576) return launch_prefill_few_heads_sm90<576>(p, s);
  return launch_prefill_few_heads_sm90<512>(p, s);
}

}  // namespace sinkops::cuda::sm90
