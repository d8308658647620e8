// The one place where runtime flags become template arguments (flash-attention's
// static_switch.h): dtype, sink mode, KV-cache layout and head dim. Each switch calls
// `body(tag)` with a tag type whose members name the compile-time choice, e.g.
//   dtype_switch(p.dtype, "window_attention", [&](auto t) { using T = typename decltype(t)::type; ... });
// Only the variants listed here are instantiated, so compile time follows what is dispatched.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "sink_policy.cuh"
#include "sinkops/error.h"
#include "sinkops/types.h"

namespace sinkops::cuda {

template <typename T>
struct TypeTag {
  using type = T;
};

// bf16 / fp16 (fp32 has no CUDA kernel: the Triton and torch backends take it).
template <typename F>
void dtype_switch(DType dtype, const char* op, F&& body) {
  switch (dtype) {
    case DType::kBFloat16: return body(TypeTag<__nv_bfloat16>{});
    case DType::kFloat16: return body(TypeTag<__half>{});
    default: throw Error(std::string(op) + " (cuda): dtype must be bfloat16 or float16");
  }
}

// key0 -> Key0Sink; null and none -> NullSink (none = a -inf sink, sink_policy.cuh).
template <typename F>
void sink_switch(SinkMode mode, F&& body) {
  if (mode == SinkMode::kKey0) return body(TypeTag<sink::Key0Sink>{});
  return body(TypeTag<sink::NullSink>{});
}

template <typename F>
void kv_layout_switch(KvCacheLayout layout, F&& body) {
  if (layout == KvCacheLayout::kV4) return body(std::integral_constant<KvCacheLayout, KvCacheLayout::kV4>{});
  return body(std::integral_constant<KvCacheLayout, KvCacheLayout::kV32>{});
}

// The smallest of kDims (ascending) that holds `d`: body(std::integral_constant<int, D>).
template <int... kDims>
struct HeadDims {};

template <int kFirst, int... kRest, typename F>
void head_dim_switch(HeadDims<kFirst, kRest...>, int d, const char* op, F&& body) {
  if (d <= kFirst) return body(std::integral_constant<int, kFirst>{});
  if constexpr (sizeof...(kRest) > 0) {
    static_assert(((kFirst < kRest) && ...), "head dims must be listed in ascending order");
    return head_dim_switch(HeadDims<kRest...>{}, d, op, body);
  } else {
    throw Error(std::string(op) + ": head dim " + std::to_string(d) + " is larger than any compiled kernel (" +
                std::to_string(kFirst) + ")");
  }
}

}  // namespace sinkops::cuda
