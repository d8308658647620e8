"""Triton sparse MLA with a null-logit sink: prefill (bf16 KV) and paged FP8 decode (v4 / v32 caches).

One program serves a block of query heads of one query row, so every gathered latent KV row is read
once for the whole head block (the KV head is shared: Hk == 1). It walks the row's top-k indices in
blocks of BLOCK_K with an online softmax (log2 units) and folds the sink when the row is finished
(sinkops/triton/sink.py), fused:
    out = sum_j e^{x_j} v_j / (sum_j e^{x_j} + e^{sink}),  lse = log sum_j e^{x_j} (sink excluded).

The QK dot is split into the 512 "main" channels (also the value channels) and, when Dqk == 576,
a 64-channel RoPE tail, so nothing is padded to 1024. The three KV formats share one loop
(`_attend_pool`); only the row loader (`_load_kv_rows`) differs, and the FP8 byte layouts come in
as constexprs from sinkops/kv_layout.py (the only Python place they are spelled):
  KV_BF16 - prefill: bf16 rows [Skv, Dqk], index = row.
  KV_FP8  - decode: a v4 or v32 cache read through its block stride.
Any int32 index or topk_length is safe: invalid indices load row 0 under a mask (no address out of
the pool is formed) and get -inf logits; topk_length is clamped to [0, topk].
Decode splits the top-k over several programs when rows x head blocks cannot fill the GPU and
merges the partials in a combine kernel that applies the sink once.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sinkops import kv_layout
from sinkops.triton._launch import KernelLauncher, cdiv as _cdiv, interpreted
from sinkops.triton.sink import LOG2E, finish_rows

KV_BF16, KV_FP8 = 0, 1
D_MAIN = kv_layout.VALUE_DIM  # value channels (and the QK channels that are not the V3.2 RoPE tail)
D_ROPE = kv_layout.ROPE_DIM
_D_MAIN = tl.constexpr(D_MAIN)  # kernels may only read constexpr globals
_D_ROPE = tl.constexpr(D_ROPE)


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
def _load_kv_rows(kv_ptr, slot, valid, block_size, stride_block,
                  KV_FORMAT: tl.constexpr, HAS_ROPE: tl.constexpr, NOPE: tl.constexpr,
                  TOKEN_STRIDE: tl.constexpr, ROPE_OFFSET: tl.constexpr, SCALE_GROUP: tl.constexpr,
                  SCALES_IN_TOKEN: tl.constexpr, SCALE_OFFSET: tl.constexpr, SCALE_STRIDE: tl.constexpr):
    """Gathers BLOCK_K KV rows -> (main [BLOCK_K, 512] bf16, rope [BLOCK_K, 64] bf16 or unused).
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
        token = block_base + offset * TOKEN_STRIDE  # uint8 pointers: strides are in bytes
        is_nope = d < NOPE
        fp8 = tl.load(token[:, None] + d[None, :], mask=valid[:, None] & is_nope[None, :], other=0)
        if SCALES_IN_TOKEN:  # v32: fp32 scales inside the token
            scale_ptr = (token + SCALE_OFFSET).to(tl.pointer_type(tl.float32))
            scale = tl.load(scale_ptr[:, None] + (d // SCALE_GROUP)[None, :],
                            mask=valid[:, None] & is_nope[None, :], other=0.0)
        else:  # v4: e8m0 bytes after the block's tokens; 2^(byte-127) built from the exponent bits
            # (exact, unlike an ex2 approximation); byte 0 is the subnormal 2^-127, which the bit
            # trick cannot express.
            e8m0_ptr = block_base + block_size * TOKEN_STRIDE + offset * SCALE_STRIDE
            e8m0 = tl.load(e8m0_ptr[:, None] + (d // SCALE_GROUP)[None, :],
                           mask=valid[:, None] & is_nope[None, :], other=127)
            scale = (e8m0.to(tl.int32) << 23).to(tl.float32, bitcast=True)
            scale = tl.where(e8m0 == 0, 5.877471754111438e-39, scale)
        nope = fp8.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale
        rope_ptr = (token + ROPE_OFFSET).to(tl.pointer_type(tl.bfloat16))
        if HAS_ROPE:  # v32: main = the 512 nope channels, the RoPE tail apart
            main = nope.to(tl.bfloat16)
            rope = tl.load(rope_ptr[:, None] + r[None, :], mask=valid[:, None], other=0.0)
        else:  # v4: main = 448 nope channels then the 64 RoPE channels
            rope_col = tl.where(is_nope, 0, d - NOPE)
            rope512 = tl.load(rope_ptr[:, None] + rope_col[None, :],
                              mask=valid[:, None] & (~is_nope)[None, :], other=0.0)
            main = tl.where(is_nope[None, :], nope, rope512.to(tl.float32)).to(tl.bfloat16)
            rope = main  # unused
    return main, rope


@triton.jit
def _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_row_ptr, lo, n, num_slots, block_size,
                 stride_block, qk_scale,
                 KV_FORMAT: tl.constexpr, HAS_ROPE: tl.constexpr, NOPE: tl.constexpr,
                 TOKEN_STRIDE: tl.constexpr, ROPE_OFFSET: tl.constexpr, SCALE_GROUP: tl.constexpr,
                 SCALES_IN_TOKEN: tl.constexpr, SCALE_OFFSET: tl.constexpr, SCALE_STRIDE: tl.constexpr,
                 BLOCK_K: tl.constexpr, INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr):
    """Online softmax (log2 units: qk_scale includes log2(e)) over indices [lo, n) of one row."""
    # The Triton 3.6 interpreter (with numpy >= 2.4) cannot loop to a runtime bound; there we walk
    # a compile-time count under the mask (a fully masked block leaves m, l, acc bitwise unchanged).
    for start in range(0, TOPK_STATIC if INTERP else n - lo, BLOCK_K):
        k_offs = lo + start + tl.arange(0, BLOCK_K)
        in_range = k_offs < n
        slot = tl.load(idx_row_ptr + k_offs, mask=in_range, other=-1)
        valid = in_range & (slot >= 0) & (slot < num_slots)
        main, rope = _load_kv_rows(kv_ptr, slot, valid, block_size, stride_block, KV_FORMAT, HAS_ROPE, NOPE,
                                   TOKEN_STRIDE, ROPE_OFFSET, SCALE_GROUP, SCALES_IN_TOKEN, SCALE_OFFSET,
                                   SCALE_STRIDE)
        qk = _dot(q_main, tl.trans(main), INTERP)
        if HAS_ROPE:
            qk += _dot(q_rope, tl.trans(rope), INTERP)
        qk = tl.where(valid[None, :], qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, 1))
        # A row with no valid key yet has m_new == -inf: shift by 0 so that no -inf - -inf NaN appears.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m - m_shift)
        p = tl.math.exp2(qk - m_shift[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(_to_bf16(p, INTERP), main, INTERP)
        m = m_new
    return m, l, acc


@triton.jit
def _load_head_rows(row_ptr, heads, head_mask, stride_h, HAS_ROPE: tl.constexpr):
    """A block of query heads of one row (q, or a gradient laid out like it) -> (main [BLOCK_H, 512],
    rope [BLOCK_H, 64] or main again without a RoPE tail)."""
    rows = row_ptr + heads[:, None].to(tl.int64) * stride_h
    main = tl.load(rows + tl.arange(0, _D_MAIN)[None, :], mask=head_mask[:, None], other=0.0)
    rope = main
    if HAS_ROPE:
        rope = tl.load(rows + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], mask=head_mask[:, None], other=0.0)
    return main, rope


@triton.jit
def _load_sink_log2(sink_ptr, heads, head_mask, HAS_SINK: tl.constexpr):
    if HAS_SINK:
        return tl.load(sink_ptr + heads, mask=head_mask, other=float("-inf")) * 1.4426950408889634
    else:
        return tl.where(head_mask, float("-inf"), float("-inf"))


# Per-call ints are i64 and never specialized (sinkops/triton/_launch.py relies on it).
@triton.jit(do_not_specialize=["Skv"])
def sparse_mla_prefill_kernel(
    q_ptr, kv_ptr, idx_ptr, sink_ptr, topk_len_ptr, out_ptr, max_logits_ptr, lse_ptr,
    Skv: "i64", Hq, topk, qk_scale,
    stride_q_s, stride_q_h, stride_kv_s, stride_idx_s,
    stride_o_s, stride_o_h, stride_ml_s, stride_ml_h, stride_lse_s, stride_lse_h,
    HAS_SINK: tl.constexpr, HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr,
):
    s = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    q_main, q_rope = _load_head_rows(q_ptr + s * stride_q_s, heads, head_mask, stride_q_h, HAS_ROPE)
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + s), 0), topk)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_ptr + s * stride_idx_s, 0, n, Skv, 1,
                             stride_kv_s, qk_scale, 0, HAS_ROPE, 0, 0, 0, 1, False, 0, 0, BLOCK_K, INTERP,
                             TOPK_STATIC)
    factor, lse = finish_rows(m, l, _load_sink_log2(sink_ptr, heads, head_mask, HAS_SINK), HAS_SINK)
    o_ptr = out_ptr + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
    tl.store(o_ptr, _to_bf16(acc * factor[:, None], INTERP), mask=head_mask[:, None])  # out is bf16 (contract)
    tl.store(max_logits_ptr + s * stride_ml_s + heads * stride_ml_h, m * 0.6931471805599453, mask=head_mask)
    tl.store(lse_ptr + s * stride_lse_s + heads * stride_lse_h, lse, mask=head_mask)


@triton.jit(do_not_specialize=["num_slots", "x_num_slots", "chunk", "x_chunk"])
def sparse_mla_decode_kernel(
    q_ptr, kv_ptr, idx_ptr, topk_len_ptr, x_kv_ptr, x_idx_ptr, x_topk_len_ptr,
    sink_ptr, out_ptr, lse_ptr, part_acc_ptr, part_ml_ptr,
    num_slots: "i64", x_num_slots: "i64", chunk: "i64", x_chunk: "i64",
    Sq, Hq, topk, x_topk, qk_scale, block_size, stride_block, x_block_size, x_stride_block,
    stride_q_b, stride_q_s, stride_q_h, stride_idx_b, stride_idx_s, stride_xidx_b, stride_xidx_s,
    stride_o_b, stride_o_s, stride_o_h, stride_lse_b, stride_lse_h, stride_lse_s,
    HAS_ROPE: tl.constexpr, NOPE: tl.constexpr, TOKEN_STRIDE: tl.constexpr, ROPE_OFFSET: tl.constexpr,
    SCALE_GROUP: tl.constexpr, SCALES_IN_TOKEN: tl.constexpr, SCALE_OFFSET: tl.constexpr,
    SCALE_STRIDE: tl.constexpr, HAS_SINK: tl.constexpr,
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
    q_main, q_rope = _load_head_rows(q_ptr + b * stride_q_b + s * stride_q_s, heads, head_mask, stride_q_h,
                                     HAS_ROPE)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + b), 0), topk)
    lo = split * chunk
    m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, kv_ptr, idx_ptr + b * stride_idx_b + s * stride_idx_s,
                             lo, tl.minimum(n, lo + chunk), num_slots, block_size, stride_block, qk_scale,
                             1, HAS_ROPE, NOPE, TOKEN_STRIDE, ROPE_OFFSET, SCALE_GROUP, SCALES_IN_TOKEN,
                             SCALE_OFFSET, SCALE_STRIDE, BLOCK_K, INTERP, TOPK_STATIC)
    if HAS_EXTRA:  # the second pool joins the same softmax
        xn = x_topk
        if HAS_X_TOPK_LEN:
            xn = tl.minimum(tl.maximum(tl.load(x_topk_len_ptr + b), 0), x_topk)
        x_lo = split * x_chunk
        m, l, acc = _attend_pool(q_main, q_rope, m, l, acc, x_kv_ptr,
                                 x_idx_ptr + b * stride_xidx_b + s * stride_xidx_s, x_lo,
                                 tl.minimum(xn, x_lo + x_chunk), x_num_slots, x_block_size, x_stride_block,
                                 qk_scale, 1, HAS_ROPE, NOPE, TOKEN_STRIDE, ROPE_OFFSET, SCALE_GROUP,
                                 SCALES_IN_TOKEN, SCALE_OFFSET, SCALE_STRIDE, BLOCK_K, INTERP, X_TOPK_STATIC)
    if NUM_SPLITS == 1:
        factor, lse = finish_rows(m, l, _load_sink_log2(sink_ptr, heads, head_mask, HAS_SINK), HAS_SINK)
        o_ptr = out_ptr + b * stride_o_b + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
        tl.store(o_ptr, _to_bf16(acc * factor[:, None], INTERP), mask=head_mask[:, None])  # out is bf16 (contract)
        tl.store(lse_ptr + b * stride_lse_b + heads * stride_lse_h + s * stride_lse_s, lse, mask=head_mask)
    else:
        # Partials: acc [splits, rows, Hq, 512] f32 and (m, l) [splits, rows, 2, Hq] f32, dense.
        part = (split.to(tl.int64) * tl.num_programs(0) + row) * Hq
        tl.store(part_acc_ptr + (part + heads[:, None]) * _D_MAIN + d[None, :], acc, mask=head_mask[:, None])
        tl.store(part_ml_ptr + part * 2 + heads, m, mask=head_mask)
        tl.store(part_ml_ptr + part * 2 + Hq + heads, l, mask=head_mask)


@triton.jit(do_not_specialize=["num_rows"])
def sparse_mla_decode_combine_kernel(
    part_acc_ptr, part_ml_ptr, sink_ptr, out_ptr, lse_ptr, num_rows: "i64", Sq, Hq,
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
        w = tl.math.exp2(m_k - m_shift)
        l += l_k * w
        acc += acc_k * w[:, None]
    factor, lse = finish_rows(m, l, _load_sink_log2(sink_ptr, heads, head_mask, HAS_SINK), HAS_SINK)
    o_ptr = out_ptr + b * stride_o_b + s * stride_o_s + heads[:, None].to(tl.int64) * stride_o_h + d[None, :]
    tl.store(o_ptr, _to_bf16(acc * factor[:, None], INTERP), mask=head_mask[:, None])
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


def _launch_options(cfg):
    cfg = dict(cfg)
    return cfg.pop("num_warps"), cfg.pop("num_stages"), cfg


def prepare_prefill(a):
    """The launcher for every sparse_mla_prefill call with the signature of args `a`."""
    q, kv, indices, out = a.q, a.kv, a.indices, a.out
    hq, dqk = q.shape[1], q.shape[2]
    topk = indices.shape[-1]
    num_warps, num_stages, cfg = _launch_options(prefill_config(hq))
    interp = interpreted(sparse_mla_prefill_kernel)
    constexprs = dict(HAS_SINK=a.attn_sink is not None, HAS_TOPK_LEN=a.topk_length is not None,
                      HAS_ROPE=dqk > D_MAIN, BLOCK_H=cfg["BLOCK_H"], BLOCK_K=cfg["BLOCK_K"], INTERP=interp,
                      TOPK_STATIC=topk if interp else 0)
    run = KernelLauncher(sparse_mla_prefill_kernel, 8, constexprs, num_warps, num_stages)
    static = (hq, topk, float(a.scale) * LOG2E, q.stride(0), q.stride(1), kv.stride(0), indices.stride(0),
              out.stride(0), out.stride(1), a.max_logits.stride(0), a.max_logits.stride(1), a.lse.stride(0),
              a.lse.stride(1))
    head_blocks = _cdiv(hq, cfg["BLOCK_H"])

    def launch(a):
        # Absent optional tensors become dummies of the right dtype that the kernel never reads.
        sink = a.attn_sink if a.attn_sink is not None else a.lse
        topk_len = a.topk_length if a.topk_length is not None else a.indices
        run((a.s_q, head_blocks), (a.q, a.kv, a.indices, sink, topk_len, a.out, a.max_logits, a.lse,
                                   a.kv.shape[0], *static), a.q.device)
    return launch


def _decode_num_splits(programs: int, topk: int, device) -> int:
    """Split the top-k over programs when rows x head blocks cannot fill the GPU (small batch is
    latency-bound). Depends on shapes and the device only, so the workspace does too. Capped at 4:
    on the H200 (CUDA graph, v4 h64 k640) b1/b16 went 98/100 µs unsplit -> 53/55 µs at 4 splits,
    but 156/218 µs at 8, where the combine kernel's unrolled [64, 512] partial loads dominate."""
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(num_sms // programs, _cdiv(topk, 64), 4))


def _layout_constexprs(lay: kv_layout.KvLayout) -> dict:
    return dict(HAS_ROPE=lay.d_qk > D_MAIN, NOPE=lay.nope_dim, TOKEN_STRIDE=lay.token_stride,
                ROPE_OFFSET=lay.rope_offset, SCALE_GROUP=lay.scale_group, SCALES_IN_TOKEN=lay.scales_in_token,
                SCALE_OFFSET=lay.scale_offset, SCALE_STRIDE=lay.scale_stride)


def prepare_decode(a, num_splits=None):
    """The launcher for every sparse_mla_decode call with the signature of args `a`.
    num_splits (tests, tuning) overrides the shape-based split of the top-k over programs."""
    q, lay = a.q, a.layout
    _, sq, hq, _ = q.shape
    num_warps, num_stages, cfg = _launch_options(decode_config(hq))
    block_h, block_k = cfg["BLOCK_H"], cfg["BLOCK_K"]
    head_blocks = _cdiv(hq, block_h)
    interp = interpreted(sparse_mla_decode_kernel)
    topk = a.indices.shape[-1]
    has_extra = a.extra_kv_cache is not None
    x_topk = a.extra_indices.shape[-1] if has_extra else 0
    base = dict(_layout_constexprs(lay), HAS_SINK=a.attn_sink is not None, HAS_TOPK_LEN=a.topk_length is not None,
                HAS_EXTRA=has_extra, HAS_X_TOPK_LEN=has_extra and a.extra_topk_length is not None,
                BLOCK_H=block_h, BLOCK_K=block_k, INTERP=interp)
    sm = torch.cuda.get_device_properties(q.device).multi_processor_count if q.device.type == "cuda" else 8
    runs, combines = {}, {}  # per split count (a function of the batch): their constexprs differ

    def runners(splits, chunk, x_chunk):
        key = (splits, chunk, x_chunk) if interp else splits  # the interpreter loops to static bounds
        if key not in runs:
            runs[key] = KernelLauncher(sparse_mla_decode_kernel, 12, dict(
                base, NUM_SPLITS=splits, TOPK_STATIC=chunk if interp else 0,
                X_TOPK_STATIC=x_chunk if interp else 0), num_warps, num_stages)
            combines[key] = KernelLauncher(sparse_mla_decode_combine_kernel, 5, dict(
                HAS_SINK=a.attn_sink is not None, NUM_SPLITS=splits, BLOCK_H=block_h, INTERP=interp),
                4 if block_h <= 16 else 8, 3)
        return runs[key], combines[key]

    def launch(a):
        rows = a.batch * sq
        splits = num_splits or max(1, min(sm // (rows * head_blocks), _cdiv(topk + x_topk, 64), 4))
        # Chunks are whole BLOCK_K blocks so no block straddles two splits.
        chunk = _cdiv(_cdiv(topk, splits), block_k) * block_k
        x_chunk = _cdiv(_cdiv(x_topk, splits), block_k) * block_k
        run, combine = runners(splits, chunk, x_chunk)
        cache = a.kv_cache
        x_cache = a.extra_kv_cache if has_extra else cache
        x_idx = a.extra_indices if has_extra else a.indices
        sink = a.attn_sink if a.attn_sink is not None else a.lse
        topk_len = a.topk_length if a.topk_length is not None else a.indices
        x_topk_len = a.extra_topk_length if has_extra and a.extra_topk_length is not None else a.indices
        if splits > 1:
            part_acc = torch.empty(splits * rows * hq * D_MAIN, dtype=torch.float32, device=q.device)
            part_ml = torch.empty(splits * rows * 2 * hq, dtype=torch.float32, device=q.device)
        else:
            part_acc = part_ml = a.lse  # unused
        out, lse = a.out, a.lse
        outs = (out.stride(0), out.stride(1), out.stride(2), lse.stride(0), lse.stride(1), lse.stride(2))
        run((rows, head_blocks, splits), (
            a.q, cache, a.indices, topk_len, x_cache, x_idx, x_topk_len, sink, out, lse, part_acc, part_ml,
            cache.shape[0] * cache.shape[1], x_cache.shape[0] * x_cache.shape[1] if has_extra else 0, chunk,
            x_chunk, sq, hq, topk, x_topk, float(a.scale) * LOG2E, cache.shape[1], cache.stride(0),
            x_cache.shape[1], x_cache.stride(0), a.q.stride(0), a.q.stride(1), a.q.stride(2),
            a.indices.stride(0), a.indices.stride(1), x_idx.stride(0) if has_extra else 0,
            x_idx.stride(1) if has_extra else 0, *outs), q.device)
        if splits > 1:
            combine((rows, head_blocks), (part_acc, part_ml, sink, out, lse, rows, sq, hq, *outs), q.device)
    return launch
