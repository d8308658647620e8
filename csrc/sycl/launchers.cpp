// Host side of the SYCL backend: picks the queue, checks what only the launcher knows (head-dim
// limits of the kernels, host-pointer access on the CPU device), sizes the grid and submits.
#include <sycl/sycl.hpp>

#include <algorithm>

#include "kernel_bundle_cache.h"
#include "kernel_names.h"
#include "sinkops/kv_cache_layout.h"
#include "sycl_api.h"

namespace sinkops::sycl_backend {
namespace {

// Must match kernels/common.hpp and the tile limits of kernels/*.hpp.
constexpr int kSubGroup = 16;
constexpr int kSubGroupsPerWorkGroup = 16;
constexpr int kWorkGroupSize = kSubGroup * kSubGroupsPerWorkGroup;
constexpr int kWindowMaxHeadDim = 256;
constexpr int kMlaMaxQkDim = 576;
constexpr int kMlaMaxVDim = 512;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The module's own queue for CPU tensors: an in-order queue on the SYCL CPU device. Kernels read
// and write the torch tensors' host memory in place, which needs system-allocation USM
// (aspect::usm_system_allocations, reported by Intel's OpenCL CPU device); without it we refuse
// rather than copy, so a missing capability is a clear error, not a silent slow path.
sycl::queue& cpu_queue() {
  static sycl::queue* q = [] {
    sycl::device dev;
    try {
      dev = sycl::device(sycl::cpu_selector_v);
    } catch (const sycl::exception& e) {
      throw Error(std::string("no SYCL CPU device (set OCL_ICD_FILENAMES=<prefix>/lib/libintelocl.so): ") + e.what());
    }
    if (!dev.has(sycl::aspect::usm_system_allocations))
      throw Error("the SYCL CPU device cannot access host memory (no usm_system_allocations); CPU tensors are unsupported");
    return new sycl::queue(dev, sycl::property::queue::in_order());  // leaked on purpose: outlives static dtors
  }();
  return *q;
}

struct QueueRef {
  sycl::queue& queue;
  bool owned;  // our CPU queue: wait before returning, torch CPU ops are synchronous
};

QueueRef resolve(void* queue) {
  if (queue == nullptr) return {cpu_queue(), true};
  return {*static_cast<sycl::queue*>(queue), false};
}

// The params struct goes to the kernel by value (the kernels include the same header), followed
// by the few ints of work-group geometry the launcher chose.
template <typename... Args>
void launch(QueueRef q, const char* kernel_name, int64_t work_groups, const Args&... args) {
  if (work_groups <= 0) return;
  sycl::kernel kernel = get_kernel(q.queue, kernel_name);
  try {
    sycl::event ev = q.queue.submit([&](sycl::handler& h) {
      h.set_args(args...);
      h.parallel_for(sycl::nd_range<1>(static_cast<size_t>(work_groups) * kWorkGroupSize, kWorkGroupSize), kernel);
    });
    if (q.owned) ev.wait_and_throw();
  } catch (const sycl::exception& e) {
    throw Error(std::string("SYCL launch of ") + kernel_name + " failed: " + e.what());
  }
}

const char* window_kernel_name(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16: return kWindowAttentionBf16;
    case DType::kFloat16: return kWindowAttentionFp16;
    case DType::kFloat32: return kWindowAttentionFp32;
  }
  throw Error("window_attention: unknown dtype");
}

}  // namespace

void window_attention_fwd(const WindowAttentionParams& p, void* queue) {
  if (p.d > kWindowMaxHeadDim || p.d_v > kWindowMaxHeadDim)
    throw Error("SYCL window_attention supports head dims <= 256, got d=" + std::to_string(p.d) +
                " d_v=" + std::to_string(p.d_v));
  if (p.h_k <= 0 || p.h_q % p.h_k != 0) throw Error("window_attention: h_q must be a multiple of h_k");
  if (p.total_q == 0 || p.batch == 0 || p.max_seqlen_q <= 0) return;
  // Work-group = 16 sub-groups = (query rows) x (query heads of one kv head): narrow GQA groups
  // take more rows per tile so every sub-group has a (row, head) pair.
  const int group = p.h_q / p.h_k;
  const int head_chunk = std::min(group, kSubGroupsPerWorkGroup);
  const int q_tile = kSubGroupsPerWorkGroup / head_chunk;
  const int num_head_chunks = static_cast<int>(ceil_div(group, head_chunk));
  const int num_q_tiles = static_cast<int>(ceil_div(p.max_seqlen_q, q_tile));
  const int64_t groups = static_cast<int64_t>(p.batch) * num_q_tiles * p.h_k * num_head_chunks;
  launch(resolve(queue), window_kernel_name(p.dtype), groups, p, q_tile, head_chunk, num_q_tiles, num_head_chunks);
}

void sparse_mla_prefill_fwd(const SparseMlaPrefillParams& p, void* queue) {
  if (p.d_qk > kMlaMaxQkDim || p.d_v > kMlaMaxVDim || p.d_v > p.d_qk)
    throw Error("SYCL sparse_mla_prefill supports d_qk <= 576 and d_v <= min(512, d_qk), got d_qk=" +
                std::to_string(p.d_qk) + " d_v=" + std::to_string(p.d_v));
  const int num_head_chunks = static_cast<int>(ceil_div(p.h_q, kSubGroupsPerWorkGroup));
  launch(resolve(queue), kSparseMlaPrefill, p.s_q * num_head_chunks, p, num_head_chunks);
}

void sparse_mla_decode_fwd(const SparseMlaDecodeParams& p, void* queue) {
  const KvLayoutInfo layout = kv_layout_info(p.layout);
  if (p.d_qk != layout.d_qk || p.d_v != 512)
    throw Error(std::string("SYCL sparse_mla_decode: layout ") + layout.name + " needs d_qk=" +
                std::to_string(layout.d_qk) + " and d_v=512");
  if (p.extra.topk > 0 && p.extra.cache == nullptr) throw Error("SYCL sparse_mla_decode: extra.topk without extra.cache");
  const int num_head_chunks = static_cast<int>(ceil_div(p.h_q, kSubGroupsPerWorkGroup));
  launch(resolve(queue), p.layout == KvCacheLayout::kV4 ? kSparseMlaDecodeV4 : kSparseMlaDecodeV32,
         static_cast<int64_t>(p.b) * p.s_q * num_head_chunks, p, num_head_chunks);
}

std::vector<std::string> kernel_names() { return kernel_name_list(); }

bool has_kernel(const std::string& name, void* queue) {
  return get_bundle(resolve(queue).queue).ext_oneapi_has_kernel(name);
}

std::string device_name(void* queue) {
  return resolve(queue).queue.get_device().get_info<sycl::info::device::name>();
}

std::string cache_dir() { return bundle_cache_dir(); }

}  // namespace sinkops::sycl_backend
