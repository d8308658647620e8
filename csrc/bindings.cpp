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

// tools/build_cuda_emu.py builds the same bindings over the CPU-emulated kernels under another name.
#ifndef SINKOPS_MODULE_NAME
#define SINKOPS_MODULE_NAME _C
#endif

PYBIND11_MODULE(SINKOPS_MODULE_NAME, m) {
  m.doc() = "sinkops CUDA core (torch-free)";
  sinkops::bind::bind_params(m);
  py::register_local_exception<sinkops::Error>(m, "Error", PyExc_RuntimeError);

  // "" when the CUDA kernels can run calls with this template's signature on `device`, else why.
  m.def("window_attention_unsupported", [](const sinkops::WindowAttentionParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::window_attention_unsupported(tmpl);
  });
  m.def("sparse_mla_prefill_unsupported", [](const sinkops::SparseMlaPrefillParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::sparse_mla_prefill_unsupported(tmpl);
  });
  m.def("sparse_mla_decode_unsupported", [](const sinkops::SparseMlaDecodeParams& tmpl, int device) {
    cu::ScopedDevice on(device);
    return cu::sparse_mla_decode_unsupported(tmpl);
  });

  // Launches release the GIL: they are asynchronous and never block on the device.
  m.def("window_attention_fwd",
        [](const sinkops::WindowAttentionParams& tmpl, const py::tuple& call, uintptr_t stream, int device) {
          const auto p = with_call_fields(tmpl, call);
          py::gil_scoped_release nogil;
          cu::ScopedDevice on(device);
          cu::window_attention_fwd(p, reinterpret_cast<void*>(stream));
        });
  m.def("sparse_mla_prefill_fwd",
        [](const sinkops::SparseMlaPrefillParams& tmpl, const py::tuple& call, uintptr_t stream, int device) {
          const auto p = with_call_fields(tmpl, call);
          py::gil_scoped_release nogil;
          cu::ScopedDevice on(device);
          cu::sparse_mla_prefill_fwd(p, reinterpret_cast<void*>(stream));
        });
  // -> (num_splits, tiles_per_split, workspace bytes) for batch b on `device`.
  m.def("sparse_mla_decode_plan", [](const sinkops::SparseMlaDecodeParams& tmpl, int b, int device) {
    sinkops::SparseMlaDecodeParams p = tmpl;
    p.b = b;
    cu::ScopedDevice on(device);
    const int64_t workspace = cu::sparse_mla_decode_plan(p);
    return py::make_tuple(p.num_splits, p.tiles_per_split, workspace);
  });
  m.def("sparse_mla_decode_fwd",
        [](const sinkops::SparseMlaDecodeParams& tmpl, const py::tuple& call, uintptr_t stream, int device) {
          const auto p = with_call_fields(tmpl, call);
          py::gil_scoped_release nogil;
          cu::ScopedDevice on(device);
          cu::sparse_mla_decode_fwd(p, reinterpret_cast<void*>(stream));
        });
}
