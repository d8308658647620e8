// Instantiation: sm_90a window attention, padded head dim 128, bf16 / fp16 x key0 / null sinks.
#include "window_attention_sm90.cuh"

namespace sinkops::cuda::sm90 {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90(128, true)
}  // namespace sinkops::cuda::sm90
