// pybind11 bindings of the params structs, shared by the CUDA module (sinkops._C) and the
// SYCL module (sinkops._sycl). Included only by binding TUs. module_local() keeps the two
// modules' registrations apart when both are loaded.
#pragma once
#include <pybind11/pybind11.h>

#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops {

namespace py = pybind11;

// Pointers travel from Python as integers (tensor.data_ptr()).
#define SINKOPS_PTR_FIELD(cls, Struct, field)                                              \
  cls.def_property(                                                                         \
      #field, [](const Struct& s) { return reinterpret_cast<uintptr_t>(s.field); },         \
      [](Struct& s, uintptr_t v) { s.field = reinterpret_cast<decltype(s.field)>(v); })
#define SINKOPS_FIELD(cls, Struct, field) cls.def_readwrite(#field, &Struct::field)

inline void bind_params(py::module_& m) {
  py::enum_<DType>(m, "DType", py::module_local())
      .value("float16", DType::kFloat16)
      .value("bfloat16", DType::kBFloat16)
      .value("float32", DType::kFloat32);
  py::enum_<SinkMode>(m, "SinkMode", py::module_local())
      .value("none", SinkMode::kNone)
      .value("key0", SinkMode::kKey0)
      .value("null", SinkMode::kNull);
  py::enum_<KvCacheLayout>(m, "KvCacheLayout", py::module_local())
      .value("v4", KvCacheLayout::kV4)
      .value("v32", KvCacheLayout::kV32);

  {
    using S = WindowAttentionParams;
    py::class_<S> c(m, "WindowAttentionParams", py::module_local());
    c.def(py::init<>());
    SINKOPS_FIELD(c, S, dtype);
    SINKOPS_PTR_FIELD(c, S, q);
    SINKOPS_PTR_FIELD(c, S, k);
    SINKOPS_PTR_FIELD(c, S, v);
    SINKOPS_PTR_FIELD(c, S, out);
    SINKOPS_PTR_FIELD(c, S, lse);
    SINKOPS_PTR_FIELD(c, S, cu_seqlens_q);
    SINKOPS_PTR_FIELD(c, S, cu_seqlens_k);
    SINKOPS_PTR_FIELD(c, S, sinks);
    SINKOPS_FIELD(c, S, q_row_stride);
    SINKOPS_FIELD(c, S, q_head_stride);
    SINKOPS_FIELD(c, S, k_row_stride);
    SINKOPS_FIELD(c, S, k_head_stride);
    SINKOPS_FIELD(c, S, v_row_stride);
    SINKOPS_FIELD(c, S, v_head_stride);
    SINKOPS_FIELD(c, S, out_row_stride);
    SINKOPS_FIELD(c, S, out_head_stride);
    SINKOPS_FIELD(c, S, lse_head_stride);
    SINKOPS_FIELD(c, S, total_q);
    SINKOPS_FIELD(c, S, total_k);
    SINKOPS_FIELD(c, S, batch);
    SINKOPS_FIELD(c, S, h_q);
    SINKOPS_FIELD(c, S, h_k);
    SINKOPS_FIELD(c, S, d);
    SINKOPS_FIELD(c, S, d_v);
    SINKOPS_FIELD(c, S, max_seqlen_q);
    SINKOPS_FIELD(c, S, max_seqlen_k);
    SINKOPS_FIELD(c, S, window_left);
    SINKOPS_FIELD(c, S, window_right);
    SINKOPS_FIELD(c, S, scale);
    SINKOPS_FIELD(c, S, sink_mode);
  }
  {
    using S = SparseMlaPrefillParams;
    py::class_<S> c(m, "SparseMlaPrefillParams", py::module_local());
    c.def(py::init<>());
    SINKOPS_PTR_FIELD(c, S, q);
    SINKOPS_PTR_FIELD(c, S, kv);
    SINKOPS_PTR_FIELD(c, S, indices);
    SINKOPS_PTR_FIELD(c, S, topk_length);
    SINKOPS_PTR_FIELD(c, S, attn_sink);
    SINKOPS_PTR_FIELD(c, S, out);
    SINKOPS_PTR_FIELD(c, S, max_logits);
    SINKOPS_PTR_FIELD(c, S, lse);
    SINKOPS_FIELD(c, S, q_row_stride);
    SINKOPS_FIELD(c, S, q_head_stride);
    SINKOPS_FIELD(c, S, kv_row_stride);
    SINKOPS_FIELD(c, S, indices_row_stride);
    SINKOPS_FIELD(c, S, out_row_stride);
    SINKOPS_FIELD(c, S, out_head_stride);
    SINKOPS_FIELD(c, S, s_q);
    SINKOPS_FIELD(c, S, s_kv);
    SINKOPS_FIELD(c, S, h_q);
    SINKOPS_FIELD(c, S, d_qk);
    SINKOPS_FIELD(c, S, d_v);
    SINKOPS_FIELD(c, S, topk);
    SINKOPS_FIELD(c, S, sm_scale);
  }
  {
    using S = KvPool;
    py::class_<S> c(m, "KvPool", py::module_local());
    c.def(py::init<>());
    SINKOPS_PTR_FIELD(c, S, cache);
    SINKOPS_FIELD(c, S, block_stride);
    SINKOPS_FIELD(c, S, num_blocks);
    SINKOPS_FIELD(c, S, block_size);
    SINKOPS_PTR_FIELD(c, S, indices);
    SINKOPS_FIELD(c, S, indices_batch_stride);
    SINKOPS_FIELD(c, S, indices_row_stride);
    SINKOPS_PTR_FIELD(c, S, topk_length);
    SINKOPS_FIELD(c, S, topk);
  }
  {
    using S = SparseMlaDecodeParams;
    py::class_<S> c(m, "SparseMlaDecodeParams", py::module_local());
    c.def(py::init<>());
    SINKOPS_FIELD(c, S, layout);
    SINKOPS_PTR_FIELD(c, S, q);
    SINKOPS_FIELD(c, S, q_batch_stride);
    SINKOPS_FIELD(c, S, q_row_stride);
    SINKOPS_FIELD(c, S, q_head_stride);
    SINKOPS_FIELD(c, S, pool);
    SINKOPS_FIELD(c, S, extra);
    SINKOPS_PTR_FIELD(c, S, attn_sink);
    SINKOPS_PTR_FIELD(c, S, out);
    SINKOPS_PTR_FIELD(c, S, lse);
    SINKOPS_FIELD(c, S, b);
    SINKOPS_FIELD(c, S, s_q);
    SINKOPS_FIELD(c, S, h_q);
    SINKOPS_FIELD(c, S, d_qk);
    SINKOPS_FIELD(c, S, d_v);
    SINKOPS_FIELD(c, S, sm_scale);
    SINKOPS_PTR_FIELD(c, S, workspace);
    SINKOPS_FIELD(c, S, workspace_bytes);
  }
}

#undef SINKOPS_PTR_FIELD
#undef SINKOPS_FIELD

}  // namespace sinkops
