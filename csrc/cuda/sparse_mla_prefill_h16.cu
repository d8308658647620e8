// Instantiation: sparse MLA prefill, 16-head tiles (see sparse_mla_prefill_kernel.cuh).
#include "sparse_mla_prefill_launch.cuh"

namespace sinkops::cuda::mla {
void launch_prefill_h16(const SparseMlaPrefillParams& p, cudaStream_t stream, int smem_optin) {
  launch_prefill_tiles<1>(p, stream, smem_optin);
}
}  // namespace sinkops::cuda::mla
