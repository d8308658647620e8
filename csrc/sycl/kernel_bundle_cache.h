// Builds the executable kernel bundle from the embedded SYCL source once per (context, device) and
// persists it on disk as SYCLBIN (kernel_bundle::ext_oneapi_get_content), keyed by a hash of the
// source, build options, device, driver and runtime version. A later process loads the SYCLBIN
// instead of running the runtime compiler (~seconds per build on the CPU device).
#pragma once
#include <sycl/sycl.hpp>

#include <string>

namespace sinkops::sycl_backend {

sycl::kernel get_kernel(const sycl::queue& queue, const std::string& name);
sycl::kernel_bundle<sycl::bundle_state::executable> get_bundle(const sycl::queue& queue);
// $SINKOPS_SYCL_CACHE, else $XDG_CACHE_HOME/sinkops/sycl, else ~/.cache/sinkops/sycl;
// SINKOPS_SYCL_CACHE=0 (or an unusable directory) keeps the cache in-process only.
std::string bundle_cache_dir();

}  // namespace sinkops::sycl_backend
