// Instantiation: window attention forward, padded head dim 128, bf16 / fp16 x key0 / null sinks.
#include "window_attention_kernel.cuh"

namespace sinkops::cuda::window_attention {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION(128)
}  // namespace sinkops::cuda::window_attention
