// Instantiation of the sparse MLA decode kernel for the "v32" cache layout (d_qk 576).
#include "sparse_mla_decode.cuh"

namespace sinkops::cuda::sparse_mla_decode {

void launch_sparse_mla_decode_v32(const SparseMlaDecodeParams& p, const SplitPlan& plan, cudaStream_t stream) {
  launch_sparse_mla_decode_kernel<KvCacheLayout::kV32>(p, plan, stream);
}

}  // namespace sinkops::cuda::sparse_mla_decode
