// The sm_90a kernels' entry points, called by the portable launchers in csrc/cuda/ when the
// build has them (SINKOPS_SM90, set by tools/build_cuda.py) and the device is a Hopper GPU.
// The caller has validated the params (the same checks as the sm80 path).
#pragma once
#include <string>

#include "sinkops/sparse_mla_backward_params.h"
#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_backward_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::cuda::sm90 {

// csrc/cuda/sm90/sparse_mla_prefill_sm90.cu: any h_q (64-head tiles), d_qk 512 or 576, d_v 512;
// out 16-byte aligned (rows are stored in 16-byte chunks).
int sparse_mla_prefill_smem_bytes(int d_qk);
void sparse_mla_prefill(const SparseMlaPrefillParams& params, void* stream);
// csrc/cuda/sm90/sparse_mla_prefill_few_heads_sm90.cu: the few-heads prefill (heads in the MMA's N:
// a CTA holds 8, 16 or 32 heads of a query; 2-3 CTAs per SM); any h_q (the default takes it up to
// few_heads_max()), d_qk 512 or 576; out rows 16-byte aligned.
int sparse_mla_prefill_few_heads_max();
int sparse_mla_prefill_few_heads_smem_bytes(int d_qk, int h_q);
void sparse_mla_prefill_few_heads(const SparseMlaPrefillParams& params, void* stream);

// csrc/cuda/sm90/sparse_mla_backward_sm90.cu: one chunk of queries of the prefill's backward (the dq
// kernel, then the dkv kernel); h_q <= 128, d_qk 512 or 576, sm_scale > 0, 16-byte rows.
int sparse_mla_backward_smem_bytes(int d_qk);
void sparse_mla_backward(const SparseMlaBackwardParams& params, void* stream);

// csrc/cuda/sm90/sparse_mla_decode_sm90.cu: any h_q (64-head tiles), both layouts, both pools;
// out 16-byte aligned. Its split plan counts steps of sparse_mla_decode_step_keys() keys.
int sparse_mla_decode_smem_bytes(int d_qk);
int sparse_mla_decode_step_keys();
void sparse_mla_decode(const SparseMlaDecodeParams& params, void* stream);
// csrc/cuda/sm90/sparse_mla_decode_sm90.cu too: the few-heads kernel (heads in the MMA's N: a CTA
// holds cta_heads(h_q) = 8 or 16 heads of a row, 2-3 CTAs per SM; any h_q, the default takes it up
// to few_heads_max()), both layouts, both pools; out 16-byte aligned; the same step keys.
int sparse_mla_decode_few_heads_max();
int sparse_mla_decode_few_heads_cta_heads(int h_q);
int sparse_mla_decode_few_heads_smem_bytes(int d_qk, int h_q);
int sparse_mla_decode_few_heads_ctas_per_sm(int d_qk, int h_q);
void sparse_mla_decode_few_heads(const SparseMlaDecodeParams& params, void* stream);

// csrc/cuda/sm90/window_attention_sm90.cu: d, d_v multiples of 8 up to 128, 16-byte aligned rows.
// `takes` answers from the STATIC fields (one answer per call signature), `aligned` from the
// pointers of this call; both must hold.
bool window_attention_sm90_takes(const WindowAttentionParams& params, int smem_optin);
bool window_attention_sm90_aligned(const WindowAttentionParams& params);
void window_attention(const WindowAttentionParams& params, void* stream);
// The backward (the CUDA backend's only backward kernels): "" when calls with these STATIC fields
// can run (d, d_v multiples of 8 up to 128, a power-of-two group, 16-byte row strides), else why;
// `aligned` from this call's pointers; window_attention_backward launches the dq, then the dk/dv kernel.
std::string window_attention_backward_unsupported(const WindowAttentionBackwardParams& params, int smem_optin);
bool window_attention_backward_aligned(const WindowAttentionBackwardParams& params);
void window_attention_backward(const WindowAttentionBackwardParams& params, void* stream);

}  // namespace sinkops::cuda::sm90
