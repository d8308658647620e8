// Instantiation: sm_90a wide-window attention, padded head dim 80, bf16 / fp16 x key0 / null sinks.
#include "window_attention_sm90_wide.cuh"

namespace sinkops::cuda::sm90 {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90_WIDE(80)
}  // namespace sinkops::cuda::sm90
