// Launcher of sparse MLA decode (cuda_api.h): validation, the split-k plan, main kernel, combine.
#include <cstdlib>
#include <string>

#include "kernel_launch.cuh"
#include "sinkops/cuda_api.h"
#include "sparse_mla_decode.cuh"
#include "static_switch.cuh"
#ifdef SINKOPS_SM90
#include "sm90/sm90_api.h"
#endif

namespace sinkops::cuda {

namespace {

using namespace sparse_mla_decode;

// Merges the split partials of one (row, head); applies the sink once. grid (h_q, b*s_q), 128 threads.
__global__ void __launch_bounds__(128)
    sparse_mla_decode_combine_kernel(const __grid_constant__ SparseMlaDecodeParams p) {
  wait_for_prerequisite();  // launched as a dependent of the main kernel: its partials must be complete
  const int num_splits = p.num_splits;
  const int h = blockIdx.x, row = blockIdx.y;
  const int bi = row / p.s_q, si = row % p.s_q;
  const float* ws_o = static_cast<const float*>(p.workspace);
  const float2* ws_ml = reinterpret_cast<const float2*>(ws_o + partial_o_elems(p, num_splits));
  const int64_t part0 = int64_t(row) * num_splits * p.h_q + h;  // + split * h_q

  float m_all = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) m_all = fmaxf(m_all, ws_ml[part0 + sp * p.h_q].x);
  float sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int col = threadIdx.x * 4;
  if (m_all != -INFINITY) {
    for (int sp = 0; sp < num_splits; ++sp) {
      const float2 ml = ws_ml[part0 + sp * p.h_q];
      const float w = exp2f(ml.x - m_all);  // an empty split has max -inf: weight 0
      sum += ml.y * w;
      const float4 v = *reinterpret_cast<const float4*>(ws_o + (part0 + sp * p.h_q) * kDv + col);
      acc.x += v.x * w;
      acc.y += v.y * w;
      acc.z += v.z * w;
      acc.w += v.w * w;
    }
  }
  const sink::RowFinish f = sink::NullSink::finish(m_all, sum, sink::load_log2(p.attn_sink, h));
  auto* out = static_cast<__nv_bfloat16*>(p.out) + (int64_t(row) * p.h_q + h) * kDv + col;
  const float s = f.out_scale;
  *reinterpret_cast<uint2*>(out) = make_uint2(pack_bf16x2(acc.x * s, acc.y * s), pack_bf16x2(acc.z * s, acc.w * s));
  if (threadIdx.x == 0) p.lse[(int64_t(bi) * p.h_q + h) * p.s_q + si] = f.lse;
}

void check_pool(const KvPool& pool, const char* name, const SparseMlaDecodeParams& p) {
  const std::string n(name);
  if (pool.block_size <= 0 || pool.num_blocks < 0) throw Error("sparse_mla_decode: " + n + " has no blocks");
  if (pool.topk < 0) throw Error("sparse_mla_decode: " + n + " topk must be >= 0");
  // cp.async copies 16 B chunks of each token: token offsets are multiples of 16 (576 and 656),
  // so the cache base and the block stride must be too.
  if (reinterpret_cast<uintptr_t>(pool.cache) % 16 != 0 || pool.block_stride % 16 != 0) {
    throw Error("sparse_mla_decode: " + n + " must be 16-byte aligned (data pointer and block stride)");
  }
  const int64_t block_bytes = int64_t(pool.block_size) * kv_layout_info(p.layout).bytes_per_token;
  if (pool.num_blocks > 1 && pool.block_stride < block_bytes) {
    throw Error("sparse_mla_decode: " + n + " block stride " + std::to_string(pool.block_stride) +
                " is smaller than one block (" + std::to_string(block_bytes) + " bytes)");
  }
}

// What the per-call fields decide (the rest: sparse_mla_decode_unsupported).
void check_call(const SparseMlaDecodeParams& p) {
  if (int64_t(p.b) * p.s_q > 65535) throw Error("sparse_mla_decode: b * s_q must be <= 65535");
  if (reinterpret_cast<uintptr_t>(p.q) % 16 != 0) throw Error("sparse_mla_decode: q rows must be 16-byte aligned");
  check_pool(p.pool, "kv_cache", p);
  if (p.extra.cache != nullptr) check_pool(p.extra, "extra_kv_cache", p);
  if (p.extra.cache == nullptr && p.extra.topk > 0) throw Error("sparse_mla_decode: extra.topk > 0 without extra.cache");
}

// The kernel families of sparse MLA decode.
enum class DecodeKernel {
  kSm80,          // sparse_mla_decode.cuh: mma.sync, 64-head CTAs (A100-class GPUs, SINKOPS_CUDA_SM80=1)
  kSm90,          // sm90/sparse_mla_decode_sm90.cuh: wgmma, 64-head CTAs (heads in the MMA's M)
  kSm90FewHeads,  // sm90/sparse_mla_decode_few_heads_sm90.cuh: wgmma, h_q <= 16, heads in the MMA's N
};

#ifdef SINKOPS_SM90
// SINKOPS_DECODE_FEW_HEADS: "0" keeps the few-heads kernel off, "1" takes it for every head count
// (in 8-head blocks above 16 heads), unset: the measured default below. Read per call, so tests and benchmarks
// compare the kernels in one process.
int few_heads_setting() {
  const char* env = std::getenv("SINKOPS_DECODE_FEW_HEADS");
  return env == nullptr || env[0] == '\0' ? -1 : env[0] == '0' ? 0 : 1;
}
#endif

#ifdef SINKOPS_SM90
// Above 16 heads the few-heads kernel runs in 8-head blocks, which repeats each row's gather and
// conversion per block: it pays only where the 64-head kernel's plan leaves almost every SM idle,
// at most an eighth of them busy (batch 1 at 64 heads: 10 CTAs, 12.2 -> 9.6 us with 80 8-head
// CTAs; V3.2 batch 1 at 128 heads: 64 CTAs, 15.6 -> 17.1 us in 16-head blocks; batch 16 at 64
// heads 17.0 -> 20.8; bench/NOTES.md "Decode, few heads" v1.2, v1.3).
bool few_heads_blocks_pay(const SparseMlaDecodeParams& p, const DeviceInfo& info) {
  SparseMlaDecodeParams wide = p;
  plan_splits(wide, info.sm_count, {sm90::sparse_mla_decode_step_keys(), kHeadsPerCta, 1});
  const int64_t ctas = int64_t(p.b) * p.s_q * ((p.h_q + kHeadsPerCta - 1) / kHeadsPerCta) * wide.num_splits;
  return ctas * 8 <= info.sm_count;
}
#endif

// The one place the kernel family is chosen. On Hopper: at most 16 heads take the few-heads
// kernel (no padding to 64 heads: bench/NOTES.md "Decode, few heads"), and more heads too where
// few_heads_blocks_pay; the rest the 64-head wgmma kernel (since decode v4 also for a single (row,
// head block): batch 1 at 64 heads 12.8 vs 13.9 us on the mma.sync kernel); elsewhere the mma.sync
// kernel. The 64-head kernel takes the row max on raw logits (the scale folds into the exponent),
// so it needs sm_scale > 0; other scales run the mma.sync kernel. Shapes, the device and the scale
// only, so the plan (which follows the family's PlanShape) is the same for every call of a batch.
DecodeKernel decode_kernel(const SparseMlaDecodeParams& p, const DeviceInfo& info) {
#ifdef SINKOPS_SM90
  if (use_sm90(info)) {
    const int few = few_heads_setting();
    const bool few_fits = sm90::sparse_mla_decode_few_heads_smem_bytes(p.d_qk, p.h_q) <= info.smem_optin;
    const bool few_by_default = p.h_q <= sm90::sparse_mla_decode_few_heads_max() || few_heads_blocks_pay(p, info);
    if (few_fits && (few == 1 || (few == -1 && few_by_default))) return DecodeKernel::kSm90FewHeads;
    if (sm90::sparse_mla_decode_smem_bytes(p.d_qk) <= info.smem_optin && p.sm_scale > 0.f) return DecodeKernel::kSm90;
  }
#else
  (void)p, (void)info;
#endif
  return DecodeKernel::kSm80;
}

PlanShape plan_shape(DecodeKernel kernel, const SparseMlaDecodeParams& p) {
  switch (kernel) {
#ifdef SINKOPS_SM90
    case DecodeKernel::kSm90FewHeads:
      return {sm90::sparse_mla_decode_step_keys(), sm90::sparse_mla_decode_few_heads_cta_heads(p.h_q),
              sm90::sparse_mla_decode_few_heads_ctas_per_sm(p.d_qk, p.h_q)};
    case DecodeKernel::kSm90:
      return {sm90::sparse_mla_decode_step_keys(), kHeadsPerCta, 1};
#endif
    default:
      (void)p;
      return {kKeysPerTile, kHeadsPerCta, 1};
  }
}

// Whether the combine is launched as a programmatic dependent of the main kernel: its CTAs are
// then scheduled while the main kernel runs (the main kernels allow it at their start) and wait
// for the partials there, which hides the combine's launch latency (batch 1: 12.7 -> 12.2 us).
// Only when its grid fits on the SMs the main kernel leaves idle, at most 2 CTAs each: a larger
// one piles onto those few SMs before the main kernel's SMs free up and runs slower than a plain
// launch (batch 16 and the 8-head batch 64: +1.1 us; bench/NOTES.md, decode v6).
bool combine_overlaps(const SparseMlaDecodeParams& p, const DeviceInfo& info, const PlanShape& shape) {
  const int64_t rows = int64_t(p.b) * p.s_q;
  const int64_t main_ctas = (p.h_q + shape.heads_per_cta - 1) / shape.heads_per_cta * p.num_splits * rows;
  const int64_t busy_sms = (main_ctas + shape.ctas_per_sm - 1) / shape.ctas_per_sm;
  const int64_t combine_ctas = int64_t(p.h_q) * rows;
  return combine_ctas <= 2 * (info.sm_count - busy_sms);
}

}  // namespace

std::string sparse_mla_decode_path(const SparseMlaDecodeParams& p) {
  switch (decode_kernel(p, device_info(current_device()))) {
    case DecodeKernel::kSm90FewHeads: return "sm90-few-heads";
    case DecodeKernel::kSm90: return "sm90";
    default: return "sm80";
  }
}

std::string sparse_mla_decode_unsupported(const SparseMlaDecodeParams& p) {
  const KvLayoutInfo layout = kv_layout_info(p.layout);
  if (p.d_qk != layout.d_qk)
    return std::string("layout ") + layout.name + " needs d_qk " + std::to_string(layout.d_qk) + ", got " +
           std::to_string(p.d_qk);
  if (p.d_v != kDv) return "d_v must be 512, got " + std::to_string(p.d_v);
  if (p.h_q < 1) return "h_q must be >= 1";
  if (p.q_batch_stride % 8 != 0 || p.q_row_stride % 8 != 0 || p.q_head_stride % 8 != 0)
    return "q rows must be 16-byte aligned";
  if (p.pool.block_stride % 16 != 0 || p.extra.block_stride % 16 != 0)
    return "kv caches must be 16-byte aligned (block stride)";
  const int need = p.layout == KvCacheLayout::kV4 ? int(sizeof(SharedStorage<KvLayout<KvCacheLayout::kV4>::kDqk>))
                                                  : int(sizeof(SharedStorage<KvLayout<KvCacheLayout::kV32>::kDqk>));
  const int smem_optin = device_info(current_device()).smem_optin;
  if (need > smem_optin)
    return "needs " + std::to_string(need) + " bytes of shared memory per block, this GPU allows " +
           std::to_string(smem_optin);
  return "";
}

int64_t sparse_mla_decode_plan(SparseMlaDecodeParams& params) {
  const DeviceInfo& info = device_info(current_device());
  plan_splits(params, info.sm_count, plan_shape(decode_kernel(params, info), params));
  return workspace_bytes_for(params, params.num_splits);
}

void sparse_mla_decode_fwd(const SparseMlaDecodeParams& params, void* stream) {
  if (const std::string why = sparse_mla_decode_unsupported(params); !why.empty())
    throw Error("sparse_mla_decode (cuda): " + why);
  check_call(params);
  if (params.b == 0 || params.s_q == 0) return;
  // The family and its plan, decided once for this call. The plan must be the one
  // sparse_mla_decode_plan() gives for these shapes: it is checked, not recomputed, so a captured
  // graph and the workspace sized for it stay consistent.
  const DeviceInfo& info = device_info(current_device());
  const DecodeKernel kernel = decode_kernel(params, info);
  const PlanShape shape = plan_shape(kernel, params);
  SparseMlaDecodeParams expected = params;
  plan_splits(expected, info.sm_count, shape);
  const int64_t need = workspace_bytes_for(expected, expected.num_splits);
  if (params.num_splits != expected.num_splits || params.tiles_per_split != expected.tiles_per_split)
    throw Error("sparse_mla_decode: the split plan does not match sparse_mla_decode_plan() for these shapes");
  if (need > 0 && (params.workspace == nullptr || params.workspace_bytes < need))
    throw Error("sparse_mla_decode: workspace smaller than sparse_mla_decode_plan() asks for (" + std::to_string(need) +
                " bytes)");
  auto s = static_cast<cudaStream_t>(stream);
  // the sm90 epilogues store 16-byte chunks of the bf16 rows
  if (kernel != DecodeKernel::kSm80 && (reinterpret_cast<uintptr_t>(params.out) & 15))
    throw Error("sparse_mla_decode: out must be 16-byte aligned");
  switch (kernel) {
#ifdef SINKOPS_SM90
    case DecodeKernel::kSm90FewHeads: sm90::sparse_mla_decode_few_heads(params, s); break;
    case DecodeKernel::kSm90: sm90::sparse_mla_decode(params, s); break;
#endif
    default:
      kv_layout_switch(params.layout, [&](auto layout) { launch_decode_kernel<decltype(layout)::value>(params, s); });
  }
  if (params.num_splits > 1) {
    const dim3 grid(params.h_q, params.b * params.s_q);
    if (combine_overlaps(params, info, shape)) {
      launch_dependent(sparse_mla_decode_combine_kernel, grid, dim3(kDv / 4), s, params);
    } else {
      SINKOPS_LAUNCH(sparse_mla_decode_combine_kernel, grid, kDv / 4, 0, s)(params);
    }
    check_launch("sparse_mla_decode combine");
  }
}

}  // namespace sinkops::cuda
