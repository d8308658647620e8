// sinkops._sycl: the SYCL backend's Python module. Sees neither torch nor SYCL headers: Python
// keeps one params struct per call signature (sinkops/_native.py fills its STATIC fields), passes
// the CALL fields per launch as a tuple and a sycl::queue* as an integer (0 = the module's own
// queue on the SYCL CPU device, for CPU tensors).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sinkops/bind_params.h"
#include "sycl_api.h"

namespace py = pybind11;
namespace sb = sinkops::sycl_backend;
using sinkops::bind::with_call_fields;

PYBIND11_MODULE(_sycl, m) {
  m.doc() = "sinkops SYCL core (torch-free; kernels compiled at run time from embedded source)";
  sinkops::bind::bind_params(m);
  py::register_local_exception<sinkops::Error>(m, "Error", PyExc_RuntimeError);

  auto q = [](uintptr_t queue) { return reinterpret_cast<void*>(queue); };
  m.def("window_attention_fwd", [q](const sinkops::WindowAttentionParams& tmpl, const py::tuple& call, uintptr_t queue) {
    const auto p = with_call_fields(tmpl, call);
    py::gil_scoped_release nogil;
    sb::window_attention_fwd(p, q(queue));
  }, py::arg("params"), py::arg("call"), py::arg("queue") = 0);
  m.def("sparse_mla_prefill_fwd", [q](const sinkops::SparseMlaPrefillParams& tmpl, const py::tuple& call, uintptr_t queue) {
    const auto p = with_call_fields(tmpl, call);
    py::gil_scoped_release nogil;
    sb::sparse_mla_prefill_fwd(p, q(queue));
  }, py::arg("params"), py::arg("call"), py::arg("queue") = 0);
  m.def("sparse_mla_decode_fwd", [q](const sinkops::SparseMlaDecodeParams& tmpl, const py::tuple& call, uintptr_t queue) {
    const auto p = with_call_fields(tmpl, call);
    py::gil_scoped_release nogil;
    sb::sparse_mla_decode_fwd(p, q(queue));
  }, py::arg("params"), py::arg("call"), py::arg("queue") = 0);
  m.def("kernel_names", &sb::kernel_names, "kernels the embedded source must define");
  m.def("has_kernel", [q](const std::string& name, uintptr_t queue) {
    py::gil_scoped_release nogil;  // may run the runtime compiler
    return sb::has_kernel(name, q(queue));
  }, py::arg("name"), py::arg("queue") = 0, "builds/loads the bundle for the queue's device, then checks");
  m.def("device_name", [q](uintptr_t queue) { return sb::device_name(q(queue)); }, py::arg("queue") = 0);
  m.def("cache_dir", &sb::cache_dir, "on-disk SYCLBIN cache directory ('' = in-process only)");
}
