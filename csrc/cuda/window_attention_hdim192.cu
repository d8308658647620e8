// Instantiation: window attention forward, padded head dim 192, bf16 / fp16 x key0 / null sinks.
#include "window_attention_kernel.cuh"

namespace sinkops::cuda::window_attention {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION(192)
}  // namespace sinkops::cuda::window_attention
