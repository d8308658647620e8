// Instantiation of the sparse MLA decode kernel for the "v4" cache layout.
#include "sparse_mla_decode.cuh"

namespace sinkops::cuda::sparse_mla_decode {
template void launch_decode_kernel<KvCacheLayout::kV4>(const SparseMlaDecodeParams&, cudaStream_t);
}  // namespace sinkops::cuda::sparse_mla_decode
