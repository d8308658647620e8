// Instantiation of the sparse MLA decode kernel for the "v4" cache layout (d_qk 512).
#include "sparse_mla_decode.cuh"

namespace sinkops::cuda::sparse_mla_decode {

void launch_sparse_mla_decode_v4(const SparseMlaDecodeParams& p, const SplitPlan& plan, cudaStream_t stream) {
  launch_sparse_mla_decode_kernel<KvCacheLayout::kV4>(p, plan, stream);
}

}  // namespace sinkops::cuda::sparse_mla_decode
