// Launcher of the sm_90a sparse MLA prefill (sparse_mla_prefill_sm90.cuh, _persistent.cuh). The portable entry
// point (csrc/cuda/sparse_mla_prefill.cu) has validated the params and decides when this runs.
#include <algorithm>

#include "../kernel_launch.cuh"
#include "sm90_api.h"
#include "sparse_mla_prefill_sm90_persistent.cuh"

namespace sinkops::cuda::sm90 {

namespace {
// The kernel this build launches (only that one is instantiated).
template <int kDqk>
constexpr auto prefill_kernel() {
  if constexpr (kPrefillPersistent) return sparse_mla_prefill_sm90_persistent_kernel<kDqk>;
  else return sparse_mla_prefill_sm90_kernel<kDqk>;
}

template <int kDqk>
void launch(const SparseMlaPrefillParams& p, cudaStream_t stream) {
  constexpr auto kernel = prefill_kernel<kDqk>();
  constexpr int smem = SparseMlaSm90Config<kDqk>::kSmemBytes;
  reserve_dynamic_smem<kernel>(smem, "sparse_mla_prefill (sm90)");
  const int64_t head_blocks = (p.h_q + 63) / 64;
  // Persistent: one CTA per SM (its shared memory allows no second) walks the (row, head block) list.
  const dim3 grid = kPrefillPersistent
                        ? dim3(static_cast<unsigned>(std::min<int64_t>(p.s_q * head_blocks,
                                                                       device_info(current_device()).sm_count)))
                        : dim3(static_cast<unsigned>(p.s_q), static_cast<unsigned>(head_blocks));
  kernel<<<grid, SparseMlaSm90Config<kDqk>::kThreads, smem, stream>>>(p);
  check_launch("sparse_mla_prefill (sm90)");
}
}  // namespace

int sparse_mla_prefill_smem_bytes(int d_qk) {
  return d_qk == 576 ? SparseMlaSm90Config<576>::kSmemBytes : SparseMlaSm90Config<512>::kSmemBytes;
}

void sparse_mla_prefill(const SparseMlaPrefillParams& p, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (p.d_qk == 576) return launch<576>(p, s);
  return launch<512>(p, s);
}

}  // namespace sinkops::cuda::sm90
