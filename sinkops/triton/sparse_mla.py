"""Triton sparse MLA with a null-logit sink: prefill (bf16 KV) and paged FP8 decode (v4 / v32 caches).

One program serves a block of query heads of one query row, so every gathered latent KV row is read
once for the whole head block (the KV head is shared: Hk == 1). It walks the row's top-k indices in
blocks of BLOCK_K with an online softmax and applies the sink in the final normalisation, fused:
    out = sum_j e^{x_j} v_j / (sum_j e^{x_j} + e^{sink}),  lse = log sum_j e^{x_j} (sink excluded).

The QK dot is split into the 512 "main" channels (also the value channels) and, when Dqk == 576,
a 64-channel RoPE tail, so nothing is padded to 1024. The three KV formats share one loop
(`_attend_pool`); only the row loader (`_load_kv_rows`) differs:
  KV_BF16 - prefill: bf16 rows [Skv, Dqk], index = row.
  KV_V32  - 656 B/token: 512 x e4m3 | 4 x fp32 scale (per 128) | 64 x bf16 RoPE.
  KV_V4   - block = block_size x 576 B (448 x e4m3 | 64 x bf16 RoPE), then block_size x 8 B of e8m0
            scales (one per 64 of the 448 values); block stride padded (read through stride(0)).
Decode splits the top-k over several programs when rows x head blocks cannot fill the GPU and
merges the partials in a combine kernel that applies the sink once.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

KV_BF16, KV_V32, KV_V4 = 0, 1, 2
D_MAIN = 512  # value channels (and the QK channels that are not the V3.2 RoPE tail)
D_ROPE = 64
_D_MAIN = tl.constexpr(D_MAIN)  # kernels may only read constexpr globals
_D_ROPE = tl.constexpr(D_ROPE)
V32_BYTES_PER_TOKEN = 656
V4_BYTES_PER_TOKEN = 576  # data bytes; the 8 scale bytes live after the block's tokens


def _interpreting() -> bool:
    # Under the CPU interpreter three things differ (see bench/NOTES.md): bf16 tl.dot (we upcast),
    # fp32 -> bf16 casts (we round on the bits), loops to a runtime bound (we use a constexpr bound).
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _dot(a, b, INTERP: tl.constexpr):
    if INTERP:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _to_bf16(x, INTERP: tl.constexpr):
    """fp32 -> bf16 with round-to-nearest-even. The interpreter's own cast truncates, which doubles
    the output error; there we round on the bits first so the cast is exact (finite x only)."""
    if INTERP:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        x = bits.to(tl.float32, bitcast=True)
    return x.to(tl.bfloat16)


@triton.jit
def _load_kv_rows(kv_ptr, slot, valid, block_size, stride_block, stride_token,
                  KV_FORMAT: tl.constexpr, HAS_ROPE: tl.constexpr):
    """Gathers BLOCK_K KV rows -> (main [BLOCK_K, 512] bf16, rope [BLOCK_K, 64] bf16 or None).
    Invalid rows read row 0 (clamped address) under a mask and come back as zeros."""
    d = tl.arange(0, _D_MAIN)
    r = tl.arange(0, _D_ROPE)
    slot = tl.where(valid, slot, 0).to(tl.int64)  # 64-bit: slot * stride can pass 2^31
    if KV_FORMAT == 0:  # KV_BF16: stride_block is the row stride in elements
        row = kv_ptr + slot * stride_block
        main = tl.load(row[:, None] + d[None, :], mask=valid[:, None], other=0.0)
        rope = main  # unused without a RoPE tail (and reading it would run past a 512-wide row)
        if HAS_ROPE:
            rope = tl.load(row[:, None] + _D_MAIN + r[None, :], mask=valid[:, None], other=0.0)
    else:
        block = slot // block_size
        offset = slot - block * block_size
        block_base = kv_ptr + block * stride_block
        token = block_base + offset * stride_token  # uint8 pointers: strides are in bytes
        if KV_FORMAT == 1:  # KV_V32
            fp8 = tl.load(token[:, None] + d[None, :], mask=valid[:, None], other=0)
            scale_ptr = (token + _D_MAIN).to(tl.pointer_type(tl.float32))
            scale = tl.load(scale_ptr[:, None] + (d // 128)[None, :], mask=valid[:, None], other=0.0)
            main = (fp8.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale).to(tl.bfloat16)
            rope_ptr = (token + _D_MAIN + 16).to(tl.pointer_type(tl.bfloat16))
            rope = tl.load(rope_ptr[:, None] + r[None, :], mask=valid[:, None], other=0.0)
        else:  # KV_V4: main = 448 dequantised channels then the 64 RoPE channels
            is_nope = d < 448
            fp8 = tl.load(token[:, None] + d[None, :], mask=valid[:, None] & is_nope[None, :], other=0)
            e8m0_ptr = block_base + block_size * stride_token + offset * 8
            e8m0 = tl.load(e8m0_ptr[:, None] + (d // 64)[None, :],
                           mask=valid[:, None] & is_nope[None, :], other=127)
            # 2^(byte-127) built from the exponent bits (exact, unlike an ex2 approximation);
            # byte 0 would be the subnormal 2^-127, which the bit trick cannot express.
            scale = (e8m0.to(tl.int32) << 23).to(tl.float32, bitcast=True)
            scale = tl.where(e8m0 == 0, 5.877471754111438e-39, scale)
            nope = fp8.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale
            rope_ptr = (token + 448).to(tl.pointer_type(tl.bfloat16))
            rope_col = tl.where(is_nope, 0, d - 448)
            rope512 = tl.load(rope_ptr[:, None] + rope_col[None, :],
                              mask=valid[:, None] & (~is_nope)[None, :], other=0.0)
            main = tl.where(is_nope[None, :], nope, rope512.to(tl.float32)).to(tl.bfloat16)
            rope = main  # unused (HAS_ROPE is False for v4)
    return main, rope


@triton.jit
def _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_row_ptr, lo, n, num_slots, block_size,
                 stride_block, stride_token, sm_scale,
                 KV_FORMAT: tl.constexpr, HAS_ROPE: tl.constexpr, BLOCK_K: tl.constexpr,
                 INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr):
    """Online softmax over indices [lo, n) of one row; returns the updated (m, l, acc)."""
    # The Triton 3.6 interpreter (with numpy >= 2.4) cannot loop to a runtime bound; there we walk
    # a compile-time count under the mask (a fully masked block leaves m, l, acc bitwise unchanged).
    for start in range(0, TOPK_STATIC if INTERP else n - lo, BLOCK_K):
        k_offs = lo + start + tl.arange(0, BLOCK_K)
        in_range = k_offs < n
        slot = tl.load(idx_row_ptr + k_offs, mask=in_range, other=-1)
        valid = in_range & (slot >= 0) & (slot < num_slots)
        main, rope = _load_kv_rows(kv_ptr, slot, valid, block_size, stride_block, stride_token,
                                   KV_FORMAT, HAS_ROPE)
        qk = _dot(q_main, tl.trans(main), INTERP)
        if HAS_ROPE:
            qk += _dot(q_rope, tl.trans(rope), INTERP)
        qk = tl.where(valid[None, :], qk * sm_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, 1))
        # A row with no valid key yet has m_new == -inf: shift by 0 so that no -inf - -inf NaN appears.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_shift)
        p = tl.exp(qk - m_shift[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(_to_bf16(p, INTERP), main, INTERP)
        m = m_new
    return m, l, acc


@triton.jit
def _finalize(m, l, acc, sink_ptr, heads, head_mask, HAS_SINK: tl.constexpr):
    """-> (out [BLOCK_H, 512] f32, lse, max_logits); empty rows give 0, +inf, -inf."""
    empty = l == 0.0
    m_shift = tl.where(empty, 0.0, m)
    denom = l
    if HAS_SINK:
        sink = tl.load(sink_ptr + heads, mask=head_mask, other=float("-inf"))
        # sink = -inf adds exactly 0 (bitwise no-op); sink = +inf makes denom inf and the row 0.
        denom = l + tl.exp(sink - m_shift)
    denom = tl.where(empty, 1.0, denom)
    out = tl.where(empty[:, None], 0.0, acc / denom[:, None])
    lse = tl.where(empty, float("inf"), m_shift + tl.log(tl.where(empty, 1.0, l)))
    return out, lse, m


@triton.jit
def sparse_mla_prefill_kernel(
    q_ptr, kv_ptr, idx_ptr, sink_ptr, topk_len_ptr, out_ptr, max_logits_ptr, lse_ptr,
    Hq, Skv, topk, sm_scale,
    stride_q_s, stride_q_h, stride_kv_s, stride_idx_s,
    stride_o_s, stride_o_h, stride_ml_s, stride_ml_h, stride_lse_s, stride_lse_h,
    HAS_SINK: tl.constexpr, HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr,
):
    s = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    q_row = q_ptr + s * stride_q_s + heads[:, None].to(tl.int64) * stride_q_h
    q_main = tl.load(q_row + d[None, :], mask=head_mask[:, None], other=0.0)
    q_rope = q_main
    if HAS_ROPE:
        q_rope = tl.load(q_row + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], mask=head_mask[:, None], other=0.0)
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.load(topk_len_ptr + s), topk)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_ptr + s * stride_idx_s, 0, n, Skv, 1,
                             stride_kv_s, 0, sm_scale, 0, HAS_ROPE, BLOCK_K, INTERP, TOPK_STATIC)
    out, lse, max_logits = _finalize(m, l, acc, sink_ptr, heads, head_mask, HAS_SINK)
    o_ptr = out_ptr + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
    tl.store(o_ptr, _to_bf16(out, INTERP), mask=head_mask[:, None])  # out is bf16 (contract)
    tl.store(max_logits_ptr + s * stride_ml_s + heads * stride_ml_h, max_logits, mask=head_mask)
    tl.store(lse_ptr + s * stride_lse_s + heads * stride_lse_h, lse, mask=head_mask)


@triton.jit
def sparse_mla_decode_kernel(
    q_ptr, kv_ptr, idx_ptr, topk_len_ptr, x_kv_ptr, x_idx_ptr, x_topk_len_ptr,
    sink_ptr, out_ptr, lse_ptr, part_acc_ptr, part_ml_ptr,
    Sq, Hq, topk, x_topk, chunk, x_chunk, sm_scale,
    num_slots, block_size, stride_block, stride_token,
    x_num_slots, x_block_size, x_stride_block, x_stride_token,
    stride_q_b, stride_q_s, stride_q_h, stride_idx_b, stride_idx_s, stride_xidx_b, stride_xidx_s,
    stride_o_b, stride_o_s, stride_o_h, stride_lse_b, stride_lse_h, stride_lse_s,
    KV_FORMAT: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_SINK: tl.constexpr,
    HAS_TOPK_LEN: tl.constexpr, HAS_EXTRA: tl.constexpr, HAS_X_TOPK_LEN: tl.constexpr,
    NUM_SPLITS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr,
    TOPK_STATIC: tl.constexpr, X_TOPK_STATIC: tl.constexpr,
):
    """Program (row, head block, split): split k attends indices [k*chunk, (k+1)*chunk) of the main
    pool and [k*x_chunk, (k+1)*x_chunk) of the extra pool. With one split it writes the final row;
    otherwise unnormalised partials (m, l, acc) that sparse_mla_decode_combine_kernel merges."""
    row = tl.program_id(0)
    split = tl.program_id(2)
    b = (row // Sq).to(tl.int64)
    s = (row % Sq).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    q_row = q_ptr + b * stride_q_b + s * stride_q_s + heads[:, None].to(tl.int64) * stride_q_h
    q_main = tl.load(q_row + d[None, :], mask=head_mask[:, None], other=0.0)
    q_rope = q_main
    if HAS_ROPE:
        q_rope = tl.load(q_row + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], mask=head_mask[:, None], other=0.0)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.load(topk_len_ptr + b), topk)
    lo = split * chunk
    m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_ptr + b * stride_idx_b + s * stride_idx_s,
                             lo, tl.minimum(n, lo + chunk), num_slots, block_size, stride_block, stride_token,
                             sm_scale, KV_FORMAT, HAS_ROPE, BLOCK_K, INTERP, TOPK_STATIC)
    if HAS_EXTRA:  # the second pool joins the same softmax
        xn = x_topk
        if HAS_X_TOPK_LEN:
            xn = tl.minimum(tl.load(x_topk_len_ptr + b), x_topk)
        x_lo = split * x_chunk
        m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, x_kv_ptr,
                                 x_idx_ptr + b * stride_xidx_b + s * stride_xidx_s, x_lo,
                                 tl.minimum(xn, x_lo + x_chunk), x_num_slots, x_block_size, x_stride_block,
                                 x_stride_token, sm_scale, KV_FORMAT, HAS_ROPE, BLOCK_K, INTERP, X_TOPK_STATIC)
    if NUM_SPLITS == 1:
        out, lse, _ = _finalize(m, l, acc, sink_ptr, heads, head_mask, HAS_SINK)
        o_ptr = out_ptr + b * stride_o_b + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
        tl.store(o_ptr, _to_bf16(out, INTERP), mask=head_mask[:, None])  # out is bf16 (contract)
        tl.store(lse_ptr + b * stride_lse_b + heads * stride_lse_h + s * stride_lse_s, lse, mask=head_mask)
    else:
        # Partials: acc [splits, rows, Hq, 512] f32 and (m, l) [splits, rows, 2, Hq] f32, dense.
        part = (split.to(tl.int64) * tl.num_programs(0) + row) * Hq
        tl.store(part_acc_ptr + (part + heads[:, None]) * _D_MAIN + d[None, :], acc, mask=head_mask[:, None])
        tl.store(part_ml_ptr + part * 2 + heads, m, mask=head_mask)
        tl.store(part_ml_ptr + part * 2 + Hq + heads, l, mask=head_mask)


@triton.jit
def sparse_mla_decode_combine_kernel(
    part_acc_ptr, part_ml_ptr, sink_ptr, out_ptr, lse_ptr, num_rows, Sq, Hq,
    stride_o_b, stride_o_s, stride_o_h, stride_lse_b, stride_lse_h, stride_lse_s,
    HAS_SINK: tl.constexpr, NUM_SPLITS: tl.constexpr, BLOCK_H: tl.constexpr, INTERP: tl.constexpr,
):
    """Merges the splits of one (row, head block) exactly and applies the sink once."""
    row = tl.program_id(0)
    b = (row // Sq).to(tl.int64)
    s = (row % Sq).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    for k in tl.static_range(NUM_SPLITS):
        part = (k * num_rows + row).to(tl.int64) * Hq
        m = tl.maximum(m, tl.load(part_ml_ptr + part * 2 + heads, mask=head_mask, other=float("-inf")))
    m_shift = tl.where(m == float("-inf"), 0.0, m)  # empty row: every split is empty, weights 0
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    for k in tl.static_range(NUM_SPLITS):
        part = (k * num_rows + row).to(tl.int64) * Hq
        m_k = tl.load(part_ml_ptr + part * 2 + heads, mask=head_mask, other=float("-inf"))
        l_k = tl.load(part_ml_ptr + part * 2 + Hq + heads, mask=head_mask, other=0.0)
        acc_k = tl.load(part_acc_ptr + (part + heads[:, None]) * _D_MAIN + d[None, :], mask=head_mask[:, None],
                        other=0.0)
        w = tl.exp(m_k - m_shift)
        l += l_k * w
        acc += acc_k * w[:, None]
    out, lse, _ = _finalize(m, l, acc, sink_ptr, heads, head_mask, HAS_SINK)
    o_ptr = out_ptr + b * stride_o_b + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
    tl.store(o_ptr, _to_bf16(out, INTERP), mask=head_mask[:, None])
    tl.store(lse_ptr + b * stride_lse_b + heads * stride_lse_h + s * stride_lse_s, lse, mask=head_mask)


def _head_block(num_heads: int) -> int:
    # tl.dot needs M >= 16: fewer heads are padded (masked); 128 heads run as 2 programs of 64.
    return 16 if num_heads <= 16 else (32 if num_heads <= 32 else 64)


def prefill_config(num_heads: int) -> dict:
    """Tile choice for prefill, in one place (H200 sweep, bench/NOTES.md): 64-wide top-k blocks
    with 2 pipeline stages; 8 warps for the 64-head tile, 4 below."""
    block_h = _head_block(num_heads)
    return dict(BLOCK_H=block_h, BLOCK_K=64, num_warps=8 if block_h >= 64 else 4, num_stages=2)


def decode_config(num_heads: int) -> dict:
    """Tile choice for decode (the FP8 dequantisation in the loop adds register pressure, and one
    stage beat two in the H200 sweep)."""
    block_h = _head_block(num_heads)
    return dict(BLOCK_H=block_h, BLOCK_K=64 if block_h >= 64 else 32, num_warps=8 if block_h >= 32 else 4,
                num_stages=1)


def sparse_mla_prefill_fwd(q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                           out, max_logits, lse) -> None:
    """Backend entry (contract in DESIGN.md §2.2); inputs already validated by sinkops.ops."""
    sq, hq, dqk = q.shape
    if d_v != D_MAIN or dqk not in (D_MAIN, D_MAIN + D_ROPE):
        raise ValueError(f"triton sparse_mla_prefill supports d_v=512 and Dqk in (512, 576), got d_v={d_v}, Dqk={dqk}")
    topk = indices.shape[-1]
    if sq == 0 or hq == 0:
        return
    cfg = prefill_config(hq)
    interp = _interpreting()
    grid = (sq, triton.cdiv(hq, cfg["BLOCK_H"]))
    sparse_mla_prefill_kernel[grid](
        q, kv, indices, attn_sink, topk_length, out, max_logits, lse,
        hq, kv.shape[0], topk, float(sm_scale),
        q.stride(0), q.stride(1), kv.stride(0), indices.stride(0),
        out.stride(0), out.stride(1), max_logits.stride(0), max_logits.stride(1), lse.stride(0), lse.stride(1),
        HAS_SINK=attn_sink is not None, HAS_TOPK_LEN=topk_length is not None, HAS_ROPE=dqk > D_MAIN,
        INTERP=interp, TOPK_STATIC=topk if interp else 0, **cfg,
    )


def _cache_geometry(kv_cache, layout: str):
    """-> (num_slots, block_size, block stride in bytes, token stride in bytes) of a 1-byte cache view.
    The token stride is the layout's, not stride(1): a v4 view is [.., 584] (576 data + 8 scale bytes)
    but its tokens sit 576 B apart with the scales after all of them."""
    num_blocks, block_size = kv_cache.shape[0], kv_cache.shape[1]
    token_stride = V32_BYTES_PER_TOKEN if layout == "v32" else V4_BYTES_PER_TOKEN
    return num_blocks * block_size, block_size, kv_cache.stride(0), token_stride


def _as_bytes(cache):
    return cache if cache.dtype == torch.uint8 else cache.view(torch.uint8)


def _decode_num_splits(programs: int, topk: int, device) -> int:
    """Split the top-k over programs when rows x head blocks cannot fill the GPU (small batch is
    latency-bound). Depends on shapes and the device only, so the workspace does too. Capped at 4:
    on the H200 (CUDA graph, v4 h64 k640) b1/b16 went 98/100 µs unsplit -> 53/55 µs at 4 splits,
    but 156/218 µs at 8, where the combine kernel's unrolled [64, 512] partial loads dominate."""
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(num_sms // programs, triton.cdiv(topk, 64), 4))


def sparse_mla_decode_fwd(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout,
                          extra_kv_cache, extra_indices, extra_topk_length, out, lse, num_splits=None) -> None:
    """Backend entry (contract in DESIGN.md §2.3); inputs already validated by sinkops.ops.
    num_splits (tests, tuning) overrides the shape-based split of the top-k over programs."""
    b, sq, hq, dqk = q.shape
    if layout not in ("v4", "v32"):
        raise ValueError(f"layout must be 'v4' or 'v32', got {layout!r}")
    expected_dqk = D_MAIN + D_ROPE if layout == "v32" else D_MAIN
    if dqk != expected_dqk:
        raise ValueError(f"q: layout {layout!r} needs Dqk={expected_dqk}, got {dqk}")
    if b == 0 or sq == 0 or hq == 0:
        return
    kv_cache = _as_bytes(kv_cache)
    geo = _cache_geometry(kv_cache, layout)
    topk = indices.shape[-1]
    has_extra = extra_kv_cache is not None and extra_indices is not None
    if has_extra:
        extra_kv_cache = _as_bytes(extra_kv_cache)
        x_geo = _cache_geometry(extra_kv_cache, layout)
        x_topk, x_strides = extra_indices.shape[-1], (extra_indices.stride(0), extra_indices.stride(1))
    else:
        extra_kv_cache, extra_indices, extra_topk_length = kv_cache, indices, None
        x_geo, x_topk, x_strides = geo, 0, (0, 0)
    cfg = decode_config(hq)
    block_h, block_k = cfg["BLOCK_H"], cfg["BLOCK_K"]
    interp = _interpreting()
    rows, head_blocks = b * sq, triton.cdiv(hq, block_h)
    splits = num_splits or _decode_num_splits(rows * head_blocks, topk + x_topk, q.device)
    # Chunks are whole BLOCK_K blocks so no block straddles two splits.
    chunk = triton.cdiv(triton.cdiv(topk, splits), block_k) * block_k
    x_chunk = triton.cdiv(triton.cdiv(x_topk, splits), block_k) * block_k
    if splits > 1:
        part_acc = torch.empty(splits * rows * hq * D_MAIN, dtype=torch.float32, device=q.device)
        part_ml = torch.empty(splits * rows * 2 * hq, dtype=torch.float32, device=q.device)
    else:
        part_acc = part_ml = out  # unused
    common_out = (out.stride(0), out.stride(1), out.stride(2), lse.stride(0), lse.stride(1), lse.stride(2))
    sparse_mla_decode_kernel[(rows, head_blocks, splits)](
        q, kv_cache, indices, topk_length, extra_kv_cache, extra_indices, extra_topk_length,
        attn_sink, out, lse, part_acc, part_ml,
        sq, hq, topk, x_topk, chunk, x_chunk, float(sm_scale),
        *geo, *x_geo,
        q.stride(0), q.stride(1), q.stride(2), indices.stride(0), indices.stride(1), *x_strides,
        *common_out,
        KV_FORMAT=KV_V32 if layout == "v32" else KV_V4, HAS_ROPE=layout == "v32",
        HAS_SINK=attn_sink is not None, HAS_TOPK_LEN=topk_length is not None,
        HAS_EXTRA=has_extra, HAS_X_TOPK_LEN=has_extra and extra_topk_length is not None,
        NUM_SPLITS=splits, INTERP=interp,
        TOPK_STATIC=chunk if interp else 0, X_TOPK_STATIC=x_chunk if interp else 0, **cfg,
    )
    if splits > 1:
        sparse_mla_decode_combine_kernel[(rows, head_blocks)](
            part_acc, part_ml, attn_sink, out, lse, rows, sq, hq, *common_out,
            HAS_SINK=attn_sink is not None, NUM_SPLITS=splits, BLOCK_H=block_h, INTERP=interp,
            num_warps=4 if block_h <= 16 else 8,
        )
