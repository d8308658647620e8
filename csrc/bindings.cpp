// sinkops._C: the CUDA backend's Python module. The only TU of the CUDA build that sees
// Python headers; it never sees torch. Python keeps one params struct per call signature
// (its STATIC fields, filled once by sinkops/_native.py) and passes per launch the CALL fields
// as a tuple, the stream as an integer and the device index.
#include <pybind11/pybind11.h>

#include "sinkops/bind_params.h"
#include "sinkops/cuda_api.h"

namespace py = pybind11;
namespace cu = sinkops::cuda;
using sinkops::bind::with_call_fields;

// <op>_unsupported(template, device) and the launch, named `launch` (<op>_fwd for the forward ops).
template <class P, std::string (*kUnsupported)(const P&), void (*kFwd)(const P&, void*)>
void bind_op(py::module_& m, const std::string& op, const std::string& launch) {
  m.def((op + "_unsupported").c_str(), [](const P& tmpl, int device) {
    cu::ScopedDevice on(device);
    return kUnsupported(tmpl);
  });
  // Launches release the GIL: they are asynchronous and never block on the device.
  m.def(launch.c_str(), [](const P& tmpl, const py::tuple& call, uintptr_t stream, int device) {
    const P p = with_call_fields(tmpl, call);
    py::gil_scoped_release nogil;
    cu::ScopedDevice on(device);
    kFwd(p, reinterpret_cast<void*>(stream));
  });
}

// tools/build_cuda_emu.py builds the same bindings over the CPU-emulated kernels under another name.
#ifndef SINKOPS_MODULE_NAME
#define SINKOPS_MODULE_NAME _C
#endif

PYBIND11_MODULE(SINKOPS_MODULE_NAME, m) {
  m.doc() = "sinkops CUDA core (torch-free)";
  sinkops::bind::bind_params(m);
  py::register_local_exception<sinkops::Error>(m, "Error", PyExc_RuntimeError);

  // Per op: <op>_unsupported(template, device) -> "" when the CUDA kernels can run calls with this
  // template's signature on `device`, else why; <op>_fwd(template, call_fields, stream, device)
  // (the backwards: window_attention_bwd, sparse_mla_prefill_bwd).
  bind_op<sinkops::WindowAttentionParams, cu::window_attention_unsupported, cu::window_attention_fwd>(
      m, "window_attention", "window_attention_fwd");
  bind_op<sinkops::WindowAttentionBackwardParams, cu::window_attention_backward_unsupported,
          cu::window_attention_backward>(m, "window_attention_backward", "window_attention_bwd");
  bind_op<sinkops::SparseMlaPrefillParams, cu::sparse_mla_prefill_unsupported, cu::sparse_mla_prefill_fwd>(
      m, "sparse_mla_prefill", "sparse_mla_prefill_fwd");
  bind_op<sinkops::SparseMlaBackwardParams, cu::sparse_mla_backward_unsupported, cu::sparse_mla_backward>(
      m, "sparse_mla_prefill_backward", "sparse_mla_prefill_bwd");
  bind_op<sinkops::SparseMlaDecodeParams, cu::sparse_mla_decode_unsupported, cu::sparse_mla_decode_fwd>(
      m, "sparse_mla_decode", "sparse_mla_decode_fwd");
  // <op>_path(template, device): "sm90" or "sm80", the kernel family calls of this signature take.
  m.def("window_attention_path", [](const sinkops::WindowAttentionParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::window_attention_path(tmpl);
  });
  m.def("sparse_mla_prefill_path", [](const sinkops::SparseMlaPrefillParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::sparse_mla_prefill_path(tmpl);
  });
  m.def("sparse_mla_decode_path", [](const sinkops::SparseMlaDecodeParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::sparse_mla_decode_path(tmpl);
  });
  // -> (num_splits, tiles_per_split, workspace bytes) for batch b on `device`.
  m.def("sparse_mla_decode_plan", [](const sinkops::SparseMlaDecodeParams& tmpl, int b, int device) {
    sinkops::SparseMlaDecodeParams p = tmpl;
    p.b = b;
    cu::ScopedDevice on(device);
    const int64_t workspace = cu::sparse_mla_decode_plan(p);
    return py::make_tuple(p.num_splits, p.tiles_per_split, workspace);
  });
}
