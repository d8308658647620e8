// Instantiation: sm_90a sparse MLA decode over the "v4" FP8 cache layout.
#include "sparse_mla_decode_sm90.cuh"

namespace sinkops::cuda::sm90 {
template void launch_decode_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
}  // namespace sinkops::cuda::sm90
