// Entry points of the sm_90a few-heads sparse MLA prefill (sparse_mla_prefill_few_heads_sm90.cuh).
// The portable launcher (csrc/cuda/sparse_mla_prefill.cu) has validated the params and decides
// when this runs.
#include "sm90_api.h"
#include "sparse_mla_prefill_few_heads_sm90.cuh"

namespace sinkops::cuda::sm90 {

int sparse_mla_prefill_few_heads_max() { return kFewHeadsPrefillMax; }

int sparse_mla_prefill_few_heads_smem_bytes(int d_qk, int h_q) {
  auto bytes = [&](auto dqk) {
    constexpr int kDqk = decltype(dqk)::value;
    switch (few_heads_prefill_cta_heads(h_q)) {
      case 8: return FewHeadsPrefillConfig<kDqk, 8>::kSmemBytes;
      case 16: return FewHeadsPrefillConfig<kDqk, 16>::kSmemBytes;
      default: return FewHeadsPrefillConfig<kDqk, 32>::kSmemBytes;
    }
  };
  return d_qk == 576 ? bytes(Int<576>{}) : bytes(Int<512>{});
}

void sparse_mla_prefill_few_heads(const SparseMlaPrefillParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.d_qk == 576) return launch_prefill_few_heads_sm90<576>(p, s);
  return launch_prefill_few_heads_sm90<512>(p, s);
}

}  // namespace sinkops::cuda::sm90
