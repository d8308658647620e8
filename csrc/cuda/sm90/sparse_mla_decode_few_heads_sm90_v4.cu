// The few-heads decode kernels of the v4 layout (8 and 16 heads), a unit of their own so the
// layouts compile in parallel.
#include "sparse_mla_decode_few_heads_sm90.cuh"

namespace sinkops::cuda::sm90 {
template void launch_decode_few_heads_sm90<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
}  // namespace sinkops::cuda::sm90
