// The SYCL backend's C++ API (csrc/sycl/). Torch-free and SYCL-header-free: `queue` is a
// sycl::queue* passed as void*, or nullptr for the module's own queue on the SYCL CPU device
// (used for CPU tensors; that path waits for the kernel, since torch CPU ops are synchronous).
#pragma once
#include <string>
#include <vector>

#include "sinkops/error.h"
#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::sycl_backend {

void window_attention_fwd(const WindowAttentionParams& params, void* queue);
void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& params, void* queue);
void sparse_mla_decode_fwd(const SparseMlaDecodeParams& params, void* queue);

// Kernels the embedded source must define; has_kernel builds (or loads) the bundle for the queue's
// device first, so it answers "is the kernel really in the built bundle" (the runtime compiler can
// drop a kernel silently).
std::vector<std::string> kernel_names();
bool has_kernel(const std::string& name, void* queue);
std::string device_name(void* queue);
std::string cache_dir();  // "" when the on-disk bundle cache is off

}  // namespace sinkops::sycl_backend
