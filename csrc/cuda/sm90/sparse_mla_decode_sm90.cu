// Entry points of the sm_90a sparse MLA decode kernels (sparse_mla_decode_sm90.cuh: 64-head CTAs;
// sparse_mla_decode_few_heads_sm90.cuh: at most 32 heads). The portable launcher
// (csrc/cuda/sparse_mla_decode.cu) has validated the params, planned the splits and decides when
// this runs.
#include "sm90_api.h"
#include "sparse_mla_decode_few_heads_sm90.cuh"
#include "sparse_mla_decode_sm90.cuh"

namespace sinkops::cuda::sm90 {

int sparse_mla_decode_smem_bytes(int d_qk) {
  return d_qk == 576 ? DecodeSm90Config<576>::kSmemBytes : DecodeSm90Config<512>::kSmemBytes;
}

int sparse_mla_decode_step_keys() {
  static_assert(kDecodeBlockKeys == kFewHeadsBlockKeys, "one plan tile for both sm90 kernels");
  return kDecodeBlockKeys;
}

void sparse_mla_decode(const SparseMlaDecodeParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.layout == KvCacheLayout::kV32) return launch_decode_sm90<KvCacheLayout::kV32>(p, s);
  return launch_decode_sm90<KvCacheLayout::kV4>(p, s);
}

int sparse_mla_decode_few_heads_max() { return kFewHeadsMax; }

// The few-heads kernel's configuration for (d_qk, h_q): f(FewHeadsDecodeConfig<L, kN>{}).
template <class F>
static auto with_few_heads_config(int d_qk, int h_q, F&& f) {
  auto by_heads = [&](auto layout) {
    constexpr KvCacheLayout L = decltype(layout)::value;
    return few_heads_cta_heads(h_q) == 8 ? f(FewHeadsDecodeConfig<L, 8>{}) : f(FewHeadsDecodeConfig<L, 16>{});
  };
  return d_qk == 576 ? by_heads(std::integral_constant<KvCacheLayout, KvCacheLayout::kV32>{})
                     : by_heads(std::integral_constant<KvCacheLayout, KvCacheLayout::kV4>{});
}

int sparse_mla_decode_few_heads_cta_heads(int h_q) {
  return with_few_heads_config(576, h_q, [](auto c) { return decltype(c)::kHeads; });
}

int sparse_mla_decode_few_heads_smem_bytes(int d_qk, int h_q) {
  return with_few_heads_config(d_qk, h_q, [](auto c) { return decltype(c)::kSmemBytes; });
}

int sparse_mla_decode_few_heads_ctas_per_sm(int d_qk, int h_q) {
  return with_few_heads_config(d_qk, h_q, [](auto c) { return decltype(c)::kCtasPerSm; });
}

void sparse_mla_decode_few_heads(const SparseMlaDecodeParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.layout == KvCacheLayout::kV32) return launch_decode_few_heads_sm90<KvCacheLayout::kV32>(p, s);
  return launch_decode_few_heads_sm90<KvCacheLayout::kV4>(p, s);
}

}  // namespace sinkops::cuda::sm90
