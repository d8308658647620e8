// Names of the free-function kernels defined in csrc/sycl/kernels/ (extern "C", so unmangled).
#pragma once
#include <string>
#include <vector>

namespace sinkops::sycl_backend {

inline constexpr const char* kWindowAttentionBf16 = "sinkops_window_attention_fwd_bf16";
inline constexpr const char* kWindowAttentionFp16 = "sinkops_window_attention_fwd_fp16";
inline constexpr const char* kWindowAttentionFp32 = "sinkops_window_attention_fwd_fp32";
inline constexpr const char* kSparseMlaPrefill = "sinkops_sparse_mla_prefill_fwd";
inline constexpr const char* kSparseMlaDecodeV4 = "sinkops_sparse_mla_decode_fwd_v4";
inline constexpr const char* kSparseMlaDecodeV32 = "sinkops_sparse_mla_decode_fwd_v32";

inline std::vector<std::string> kernel_name_list() {
  return {kWindowAttentionBf16, kWindowAttentionFp16, kWindowAttentionFp32, kSparseMlaPrefill,
          kSparseMlaDecodeV4,   kSparseMlaDecodeV32};
}

}  // namespace sinkops::sycl_backend
