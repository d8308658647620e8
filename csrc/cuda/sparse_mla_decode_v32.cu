// Instantiation of the sparse MLA decode kernel for the "v32" cache layout.
#include "sparse_mla_decode.cuh"

namespace sinkops::cuda::sparse_mla_decode {
template void launch_decode_kernel<KvCacheLayout::kV32>(const SparseMlaDecodeParams&, cudaStream_t);
}  // namespace sinkops::cuda::sparse_mla_decode
