// Instantiation: window attention forward, padded head dim 80, bf16 and fp16.
#include "window_attention_launch.cuh"

namespace sinkops::cuda::window_attention {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION(80)
}  // namespace sinkops::cuda::window_attention
