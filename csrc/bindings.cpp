// sinkops._C: the CUDA backend's Python module. The only TU of the CUDA build that sees
// Python headers; it never sees torch. Python fills a params struct from tensors
// (sinkops/_native.py) and passes the current stream as an integer.
#include <pybind11/pybind11.h>

#include "sinkops/bind_params.h"
#include "sinkops/cuda_api.h"

namespace py = pybind11;

// tools/build_cuda_emu.py builds the same bindings over the CPU-emulated kernels under another name.
#ifndef SINKOPS_MODULE_NAME
#define SINKOPS_MODULE_NAME _C
#endif

PYBIND11_MODULE(SINKOPS_MODULE_NAME, m) {
  m.doc() = "sinkops CUDA core (torch-free)";
  sinkops::bind_params(m);
  py::register_exception<sinkops::Error>(m, "Error", PyExc_RuntimeError);

  // The GIL is released: launches are asynchronous and never block on the device.
  m.def("window_attention_fwd",
        [](const sinkops::WindowAttentionParams& p, uintptr_t stream) {
          py::gil_scoped_release nogil;
          sinkops::cuda::window_attention_fwd(p, reinterpret_cast<void*>(stream));
        });
  m.def("sparse_mla_prefill_fwd",
        [](const sinkops::SparseMlaPrefillParams& p, uintptr_t stream) {
          py::gil_scoped_release nogil;
          sinkops::cuda::sparse_mla_prefill_fwd(p, reinterpret_cast<void*>(stream));
        });
  m.def("sparse_mla_decode_workspace_bytes",
        [](const sinkops::SparseMlaDecodeParams& p, int num_sms) {
          return sinkops::cuda::sparse_mla_decode_workspace_bytes(p, num_sms);
        });
  m.def("sparse_mla_decode_fwd",
        [](const sinkops::SparseMlaDecodeParams& p, uintptr_t stream) {
          py::gil_scoped_release nogil;
          sinkops::cuda::sparse_mla_decode_fwd(p, reinterpret_cast<void*>(stream));
        });
}
