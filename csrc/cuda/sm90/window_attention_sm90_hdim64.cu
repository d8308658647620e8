// Instantiation: sm_90a window attention, padded head dim 64, bf16 / fp16 x key0 / null sinks,
// the streaming kernel and its one-step-per-CTA twin.
#include "window_attention_sm90.cuh"

namespace sinkops::cuda::sm90 {
SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90(64, true)
SINKOPS_INSTANTIATE_WINDOW_ATTENTION_SM90(64, false)
}  // namespace sinkops::cuda::sm90
