// Weak fallbacks for the CUDA launchers. A build that compiles only some csrc/cuda/*.cu files
// (SINKOPS_CUDA_ONLY) still links and imports; the strong definitions in the compiled .cu
// objects win at link time. Calling a stub raises a clear error instead of crashing.
#include <string>

#include "sinkops/cuda_api.h"

namespace sinkops::cuda {

[[noreturn]] static void not_built(const char* op) {
  throw Error(std::string(op) + ": this op's CUDA kernels were not compiled into this build");
}

__attribute__((weak)) std::string window_attention_unsupported(const WindowAttentionParams&) {
  return "window_attention: this op's CUDA kernels were not compiled into this build";
}
__attribute__((weak)) std::string sparse_mla_prefill_unsupported(const SparseMlaPrefillParams&) {
  return "sparse_mla_prefill: this op's CUDA kernels were not compiled into this build";
}
__attribute__((weak)) std::string sparse_mla_decode_unsupported(const SparseMlaDecodeParams&) {
  return "sparse_mla_decode: this op's CUDA kernels were not compiled into this build";
}
__attribute__((weak)) std::string window_attention_backward_unsupported(const WindowAttentionBackwardParams&) {
  return "window_attention_backward: this op's CUDA kernels were not compiled into this build";
}
__attribute__((weak)) std::string sparse_mla_backward_unsupported(const SparseMlaBackwardParams&) {
  return "sparse_mla_prefill_backward: this op's CUDA kernels were not compiled into this build";
}
__attribute__((weak)) std::string window_attention_path(const WindowAttentionParams&) { return "sm80"; }
__attribute__((weak)) std::string sparse_mla_prefill_path(const SparseMlaPrefillParams&) { return "sm80"; }
__attribute__((weak)) std::string sparse_mla_decode_path(const SparseMlaDecodeParams&) { return "sm80"; }
__attribute__((weak)) void window_attention_fwd(const WindowAttentionParams&, void*) {
  not_built("window_attention");
}
__attribute__((weak)) void window_attention_backward(const WindowAttentionBackwardParams&, void*) {
  not_built("window_attention_backward");
}
__attribute__((weak)) void sparse_mla_backward(const SparseMlaBackwardParams&, void*) {
  not_built("sparse_mla_prefill_backward");
}
__attribute__((weak)) void sparse_mla_prefill_fwd(const SparseMlaPrefillParams&, void*) {
  not_built("sparse_mla_prefill");
}
__attribute__((weak)) int64_t sparse_mla_decode_plan(SparseMlaDecodeParams&) { not_built("sparse_mla_decode"); }
__attribute__((weak)) void sparse_mla_decode_fwd(const SparseMlaDecodeParams&, void*) {
  not_built("sparse_mla_decode");
}

}  // namespace sinkops::cuda
