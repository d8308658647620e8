// Instantiation: sm_90a window attention backward (dq and dk/dv kernels), padded head dim 128,
// bf16 / fp16 x key0 / null sinks.
#include "window_attention_bwd_sm90.cuh"

namespace sinkops::cuda::sm90 {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION_BWD_SM90(128)
}  // namespace sinkops::cuda::sm90
