// Launcher of the sm_90a sparse MLA prefill (sparse_mla_prefill_sm90.cuh). The portable entry
// point (csrc/cuda/sparse_mla_prefill.cu) has validated the params and decides when this runs.
#include <cstdlib>

#include "../kernel_launch.cuh"
#include "sm90_api.h"
#include "kv_tile_maps.cuh"  // encode_tile_map, tma_enabled
#include "sparse_mla_prefill_sm90.cuh"

namespace sinkops::cuda::sm90 {

namespace {
// SINKOPS_PREFILL_PAIR=1 runs a query's head blocks in 2-CTA clusters (prefill v1.7). Opt-in until
// its device run (written 2026-12-08 when no GPU was lent: bench/NOTES.md "Prefill v1.7"); the
// default is the unpaired kernel, whose SASS is the measured one's instruction for instruction.
bool pairs_enabled() {
  const char* env = std::getenv("SINKOPS_PREFILL_PAIR");
  return env != nullptr && *env == '1';
}

template <int kDqk>
void launch(const SparseMlaPrefillParams& p, cudaStream_t stream) {
  constexpr int smem = SparseMlaSm90Config<kDqk>::kSmemBytes, threads = SparseMlaSm90Config<kDqk>::kThreads;
  const int head_blocks = (p.h_q + 63) / 64;
  const dim3 grid(static_cast<unsigned>(p.s_q), static_cast<unsigned>(head_blocks));
  SparseMlaMaps maps{};  // q [s_q rows][h_q heads][d_qk columns], out [..][..][512], boxes of 1 x 64 x 64
  if (tma_enabled()) {  // else (SINKOPS_WA90_TMA=0, tests) cp.async loads Q and the threads store
    maps.q_ok = encode_tile_map(maps.q, true, p.q, kDqk, MapDim{p.h_q, p.q_head_stride, 64},
                                MapDim{p.s_q, p.q_row_stride, 1}, 64);
    maps.out_ok = encode_tile_map(maps.out, true, p.out, 512, MapDim{p.h_q, p.out_head_stride, 64},
                                  MapDim{p.s_q, p.out_row_stride, 1}, 64);
  }
  // A query's head blocks in pairs (clusters of (1, 2)) when they pair up: 128 heads (V4-Pro, V3.2).
  if (head_blocks % 2 == 0 && pairs_enabled()) {
    constexpr auto kernel = sparse_mla_prefill_sm90_kernel<kDqk, true>;
    reserve_dynamic_smem<kernel>(smem, "sparse_mla_prefill (sm90, pairs)");
    launch_clustered(kernel, grid, dim3(threads), smem, dim3(1, 2, 1), stream, "sparse_mla_prefill (sm90, pairs)", p,
                     maps);
    return;
  }
  constexpr auto kernel = sparse_mla_prefill_sm90_kernel<kDqk, false>;
  reserve_dynamic_smem<kernel>(smem, "sparse_mla_prefill (sm90)");
  kernel<<<grid, threads, smem, stream>>>(p, maps);
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
