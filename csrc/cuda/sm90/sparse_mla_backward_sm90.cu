// Launcher of the sm_90a sparse MLA prefill backward (sparse_mla_backward_sm90.cuh): per call one
// chunk of queries, the dq kernel then the dkv kernel on the caller's stream. The portable entry
// point (csrc/cuda/sparse_mla_backward.cu) has validated the params and decides when this runs.
#include "../kernel_launch.cuh"
#include "sm90_api.h"
#include "sparse_mla_backward_sm90.cuh"

namespace sinkops::cuda::sm90 {

namespace {
template <int kDqk, int kHeadsPad>
void launch(const SparseMlaBackwardParams& p, cudaStream_t stream) {
  using Dq = SparseMlaBwdDqConfig<kDqk>;
  using Dkv = SparseMlaBwdDkvConfig<kDqk, kHeadsPad, false>;
  using DkvDet = SparseMlaBwdDkvConfig<kDqk, kHeadsPad, true>;
  constexpr auto dq_kernel = sparse_mla_bwd_dq_sm90_kernel<kDqk>;
  constexpr auto dkv_kernel = sparse_mla_bwd_dkv_sm90_kernel<kDqk, kHeadsPad, false>;
  constexpr auto dkv_det_kernel = sparse_mla_bwd_dkv_sm90_kernel<kDqk, kHeadsPad, true>;
  reserve_dynamic_smem<dq_kernel>(Dq::kSmemBytes, "sparse_mla_prefill_backward dq (sm90)");
  // the carveout at its maximum: at 64 heads two dkv CTAs (98 KiB each) fit an SM only with it
  reserve_dynamic_smem<dkv_kernel>(Dkv::kSmemBytes, "sparse_mla_prefill_backward dkv (sm90)", true);
  reserve_dynamic_smem<dkv_det_kernel>(DkvDet::kSmemBytes, "sparse_mla_prefill_backward dkv (sm90)", true);
  const auto rows = static_cast<unsigned>(p.chunk_rows);
  dq_kernel<<<dim3(rows, static_cast<unsigned>((p.h_q + 63) / 64)), Dq::kThreads, Dq::kSmemBytes, stream>>>(p);
  check_launch("sparse_mla_prefill_backward dq (sm90)");
  const auto dkv_ctas = static_cast<unsigned>((p.topk + Dkv::kPositions - 1) / Dkv::kPositions * p.chunk_rows);
  if (p.deterministic) dkv_det_kernel<<<dkv_ctas, DkvDet::kThreads, DkvDet::kSmemBytes, stream>>>(p);
  else dkv_kernel<<<dkv_ctas, Dkv::kThreads, Dkv::kSmemBytes, stream>>>(p);
  check_launch("sparse_mla_prefill_backward dkv (sm90)");
}
}  // namespace

int sparse_mla_backward_smem_bytes(int d_qk) {
  return d_qk == 576 ? SparseMlaBwdDqConfig<576>::kSmemBytes : SparseMlaBwdDqConfig<512>::kSmemBytes;
}

void sparse_mla_backward(const SparseMlaBackwardParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const bool wide = p.h_q > 64;
  if (p.d_qk == 576) return wide ? launch<576, 128>(p, s) : launch<576, 64>(p, s);
  return wide ? launch<512, 128>(p, s) : launch<512, 64>(p, s);
}

}  // namespace sinkops::cuda::sm90
