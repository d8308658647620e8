"""Triton window attention (varlen, GQA, key0 / null sinks): kernel, tile choice, launcher.

One program serves (BLOCK_Q query rows) x (the query heads of one KV head): the group heads are
folded into the M dimension of the tile, so each K/V tile is loaded once for the whole group.
Only key blocks that intersect the window of the query tile are visited.
Semantics (window bounds, sink modes, lse convention, edge values): docs/DESIGN.md §1; cu_seqlens
values are clamped to the packed tensors, so none of them can make an access leave q, k, v, out, lse.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from sinkops.triton._launch import KernelLauncher, cdiv as _cdiv, interpreted
from sinkops.triton.sink import LOG2E, finish_rows


@triton.jit
def _to_lowp_as_f32(x, dtype: tl.constexpr):
    """float32 x rounded to dtype (nearest even), held in float32. Interpreter only: its
    float32 -> bf16 cast truncates, which the GPU never does and which biases the error."""
    if dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    else:
        return x.to(dtype).to(tl.float32)


@triton.jit
def key_block_logits(q, k_ptr, stride_kt, start_n, sk, row_lo, row_hi, qk_scale, key0_bias, offs_n, offs_d, D,
                     HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ADD_KEY0: tl.constexpr,
                     INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Keys [start_n, start_n + BLOCK_N) of a tile (forward and the backward's dq kernel) ->
    (x: the logits in log2 units, key0 bias added, [rows, BLOCK_N]; visible: window and segment;
    kn, key_in, rows: the keys' positions, in-segment mask and int64 rows; k: the block as loaded)."""
    kn = start_n + offs_n
    key_in = kn < sk
    rows = kn.to(tl.int64)
    k = tl.load(k_ptr + rows[:, None] * stride_kt + offs_d[None, :],
                mask=key_in[:, None] & (offs_d[None, :] < D), other=0.0)
    if INTERPRET:
        # the CPU interpreter multiplies bf16 as raw uint16: do the dot in float32 there
        # (products of bf16/fp16 values are exact in float32, as on the tensor cores)
        k = k.to(tl.float32)
    x = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * qk_scale
    visible = key_in[None, :]
    if HAS_LEFT:
        visible = visible & (kn[None, :] >= row_lo[:, None])
    if HAS_RIGHT:
        visible = visible & (kn[None, :] <= row_hi[:, None])
    if ADD_KEY0:
        # only the block holding key 0 pays for the bias (DESIGN: key0 costs nothing elsewhere);
        # a -inf sink makes key 0's logit -inf, which masks it
        x = x + tl.where(kn[None, :] == 0, key0_bias[:, None], 0.0)
    return x, visible, kn, key_in, rows, k


@triton.jit
def _window_key_block(acc, l_i, m_i, q, k_ptr, v_ptr, stride_kt, stride_vt,
                      start_n, sk, row_lo, row_hi, qk_scale, key0_bias,
                      offs_n, offs_d, offs_dv, D, DV,
                      HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ADD_KEY0: tl.constexpr,
                      INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Online-softmax update of (acc, l_i, m_i) with keys [start_n, start_n + BLOCK_N); log2 domain."""
    x, visible, kn, key_in, rows, _ = key_block_logits(q, k_ptr, stride_kt, start_n, sk, row_lo, row_hi, qk_scale,
                                                       key0_bias, offs_n, offs_d, D, HAS_LEFT, HAS_RIGHT, ADD_KEY0,
                                                       INPUT_PRECISION, INTERPRET)
    x = tl.where(visible, x, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(x, 1))
    # a row with nothing visible yet keeps m = -inf: subtract 0 instead so -inf - -inf never makes NaN
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.math.exp2(m_i - m_safe)
    p = tl.math.exp2(x - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_ptr + rows[:, None] * stride_vt + offs_dv[None, :],
                mask=key_in[:, None] & (offs_dv[None, :] < DV), other=0.0)
    # P @ V runs in the input dtype, like flash-attention
    if INTERPRET:
        acc = acc * alpha[:, None] + tl.dot(_to_lowp_as_f32(p, v.dtype), v.to(tl.float32),
                                            input_precision=INPUT_PRECISION)
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=INPUT_PRECISION)
    return acc, l_i, m_new


@triton.jit
def _segment(cu_ptr, b, total):
    """Segment b as (start, length), clamped into [0, total]: a decreasing segment is empty."""
    start = tl.minimum(tl.maximum(tl.load(cu_ptr + b).to(tl.int64), 0), total)
    end = tl.minimum(tl.maximum(tl.load(cu_ptr + b + 1).to(tl.int64), start), total)
    return start, end - start


@triton.jit
def query_tile(cu_q_ptr, cu_k_ptr, total_q, total_k, n_tiles, group, BLOCK_Q: tl.constexpr, HEADS: tl.constexpr):
    """The tile of this program, for the forward and the backward's dq kernel. Grid: (batch x query
    tiles of max_seqlen_q, kv heads x head chunks); the batch shares dim 0 with the tiles because grid
    dims 1 and 2 stop at 65535 (70000 one-token segments are real). Tile row r = (query q0 + r // HEADS,
    head chunk * HEADS + r % HEADS): a token's group heads are adjacent in memory, so q loads read runs
    of HEADS * D contiguous elements. -> (q_start, sq, k_start, sk, q0, qi, head, row_ok, kv_head, g)"""
    b = tl.program_id(0) // n_tiles
    tile = tl.program_id(0) % n_tiles
    chunks = tl.cdiv(group, HEADS)
    kv_head = tl.program_id(1) // chunks
    chunk = tl.program_id(1) % chunks
    q_start, sq = _segment(cu_q_ptr, b, total_q)
    k_start, sk = _segment(cu_k_ptr, b, total_k)
    q0 = tile * BLOCK_Q
    offs_m = tl.arange(0, BLOCK_Q * HEADS)
    qi = q0 + offs_m // HEADS
    g = chunk * HEADS + offs_m % HEADS
    head = (kv_head * group + g).to(tl.int64)
    row_ok = (qi < sq) & (g < group)
    return q_start, sq, k_start, sk, q0, qi, head, row_ok, kv_head, g


@triton.jit
def tile_key_range(qi, q0, sq, sk, window_left, window_right, BLOCK_Q: tl.constexpr, BLOCK_N: tl.constexpr,
                   HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """Row i sees keys [i + sk - sq - left, i + sk - sq + right] (flash-attention convention),
    computed in int64 (sk - sq - left may pass -2^31), then clamped to [-1, sk] and narrowed: key
    positions inside a segment fit int32, and the per-element window mask stays 32-bit.
    -> (row_lo, row_hi, n_lo, n_hi): per-row bounds and the tile's key blocks [n_lo, n_hi) (n_lo
    rounded down to BLOCK_N; empty when the tile is past sq)."""
    diag = qi.to(tl.int64) + sk - sq
    row_lo = tl.minimum(tl.maximum(diag - window_left, -1), sk).to(tl.int32)
    row_hi = tl.minimum(tl.maximum(diag + window_right, -1), sk).to(tl.int32)
    q_last = tl.minimum(q0 + BLOCK_Q, sq) - 1
    n_lo = sk * 0  # a tensor (not a constexpr) so a key0 peel may advance it
    n_hi = sk
    if HAS_LEFT:
        n_lo = tl.maximum(q0 + sk - sq - window_left, 0)
    if HAS_RIGHT:
        n_hi = tl.minimum(q_last + sk - sq + window_right + 1, sk)
    n_hi = n_hi * (q_last >= q0).to(tl.int64)
    n_lo = ((n_lo // BLOCK_N) * BLOCK_N).to(tl.int32)
    return row_lo, row_hi, n_lo, n_hi.to(tl.int32)


# Per-call ints are i64 and never specialized (sinkops/triton/_launch.py relies on it).
@triton.jit(do_not_specialize=["total_q", "total_k", "stride_lh", "n_tiles"])
def window_attention_fwd_kernel(
        q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, sinks_ptr, cu_q_ptr, cu_k_ptr,
        total_q: "i64", total_k: "i64", stride_lh: "i64", n_tiles: "i32",
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
        window_left, window_right, qk_scale, group, D, DV,
        BLOCK_Q: tl.constexpr, HEADS: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
        HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SINK_MODE: tl.constexpr, WRITE_LSE: tl.constexpr,
        INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    q_start, sq, k_start, sk, q0, qi, head, row_ok, kv_head, g = query_tile(
        cu_q_ptr, cu_k_ptr, total_q, total_k, n_tiles, group, BLOCK_Q, HEADS)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)

    q_rows = (q_start + qi).to(tl.int64)
    q = tl.load(q_ptr + q_rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
                mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    if INTERPRET:
        q = q.to(tl.float32)  # see _window_key_block: no bf16 dot in the interpreter

    row_lo, row_hi, n_lo, n_hi = tile_key_range(qi, q0, sq, sk, window_left, window_right, BLOCK_Q, BLOCK_N,
                                                HAS_LEFT, HAS_RIGHT)
    sk32 = sk.to(tl.int32)

    kv_k_ptr = k_ptr + k_start * stride_kt + kv_head.to(tl.int64) * stride_kh
    kv_v_ptr = v_ptr + k_start * stride_vt + kv_head.to(tl.int64) * stride_vh

    m_i = tl.full([BLOCK_Q * HEADS], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_Q * HEADS], tl.float32)
    acc = tl.zeros([BLOCK_Q * HEADS, BLOCK_DV], tl.float32)

    if SINK_MODE == 1:
        sink = tl.load(sinks_ptr + head, mask=g < group, other=0.0)
        # a +inf sink is handled in the epilogue (row = v_0); keep the running softmax finite
        key0_bias = tl.where(sink == float("inf"), 0.0, sink) * 1.4426950408889634
        # every block adds the bias where its key is 0 (a compare + select): measured 3-12 % faster
        # than peeling the block that holds key 0, whose second copy of the block body cost the main
        # loop its schedule (bench/NOTES.md "Triton key0 bias in every block")
    else:
        key0_bias = m_i  # unused placeholder of the right shape

    if INTERPRET:
        # the CPU interpreter (triton 3.6 + numpy 2) cannot take range() over loaded scalars;
        # on the GPU a for loop, so the compiler can pipeline it
        start_n = n_lo
        while start_n < n_hi:
            acc, l_i, m_i = _window_key_block(
                acc, l_i, m_i, q, kv_k_ptr, kv_v_ptr, stride_kt, stride_vt, start_n, sk32, row_lo,
                row_hi, qk_scale, key0_bias, offs_n, offs_d, offs_dv, D, DV,
                HAS_LEFT, HAS_RIGHT, SINK_MODE == 1, INPUT_PRECISION, INTERPRET)
            start_n += BLOCK_N
    else:
        for start_n in range(n_lo, n_hi, BLOCK_N):
            acc, l_i, m_i = _window_key_block(
                acc, l_i, m_i, q, kv_k_ptr, kv_v_ptr, stride_kt, stride_vt, start_n, sk32, row_lo,
                row_hi, qk_scale, key0_bias, offs_n, offs_d, offs_dv, D, DV,
                HAS_LEFT, HAS_RIGHT, SINK_MODE == 1, INPUT_PRECISION, INTERPRET)

    if SINK_MODE == 2:
        sink_log2 = tl.load(sinks_ptr + head, mask=g < group, other=float("-inf")) * 1.4426950408889634
    else:
        sink_log2 = m_i  # unused
    factor, lse = finish_rows(m_i, l_i, sink_log2, SINK_MODE == 2)
    o = acc * factor[:, None]

    if SINK_MODE == 1:
        # a +inf key0 sink: rows that see key 0 output exactly v_0 (lse = +inf), whatever the
        # (finite, bias-free) running softmax computed for them
        sees_key0 = sk > 0
        if HAS_LEFT:
            sees_key0 = sees_key0 & (row_lo <= 0)
        if HAS_RIGHT:
            sees_key0 = sees_key0 & (row_hi >= 0)
        inf_row = sees_key0 & (sink == float("inf"))
        if tl.max(inf_row.to(tl.int32), 0) > 0:  # rare: the load of v_0 and the select only then
            v0 = tl.load(kv_v_ptr + offs_dv, mask=(offs_dv < DV) & (sk > 0), other=0.0)
            o = tl.where(inf_row[:, None], v0[None, :].to(tl.float32), o)
            lse = tl.where(inf_row, float("inf"), lse)

    if INTERPRET:
        o = _to_lowp_as_f32(o, out_ptr.dtype.element_ty)  # then the cast below is exact
    tl.store(out_ptr + q_rows[:, None] * stride_ot + head[:, None] * stride_oh + offs_dv[None, :],
             o.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_dv[None, :] < DV))
    if WRITE_LSE:
        tl.store(lse_ptr + head * stride_lh + q_rows, lse, mask=row_ok)


@dataclass(frozen=True)
class WindowAttentionTile:
    block_q: int      # query rows per program
    heads: int        # query heads of one KV head per program (power of two, >= group when possible)
    block_n: int      # keys per inner step
    block_d: int      # padded head dim of q/k
    block_dv: int     # padded head dim of v
    num_warps: int
    num_stages: int


@functools.lru_cache(maxsize=None)  # pure function of ints: keep it off the launch path
def window_attention_tile(head_dim: int, head_dim_v: int, group: int, window_left: int,
                          window_right: int, on_gpu: bool) -> WindowAttentionTile:
    """All tile choices in one place (no autotune: shapes alone decide, so no first-call stall)."""
    block_d = max(16, triton.next_power_of_2(head_dim))
    block_dv = max(16, triton.next_power_of_2(head_dim_v))
    heads = min(triton.next_power_of_2(group), 64)  # > 64 heads per KV head: split into chunks
    wide_d = max(block_d, block_dv) > 128
    # M of the tile = query rows x heads. Measured on H200 (bf16, 32/8 heads, window ±64):
    # M = 64 beats 128 by 5-8% (more programs in flight for short windows), 4 warps, 3 stages
    rows = 64
    if not on_gpu:
        rows = 32  # interpreter: numpy per op, small tiles keep the tests quick
    block_q = max(1, rows // heads)
    bounded = window_left >= 0 and window_right >= 0
    narrow = bounded and window_left + window_right + 1 <= 256
    # a narrow window touches few keys per query: short key tiles waste less of the last block
    # (d 64: 32 keys best; d 80/128 padded to 128: 64 keys amortize the wider loads better)
    block_n = 32 if (not on_gpu or wide_d or (narrow and block_d <= 64)) else 64
    if on_gpu and block_q * heads < 16:
        block_q = 16 // heads  # tl.dot needs M >= 16
    num_warps = 4
    return WindowAttentionTile(block_q, heads, block_n, block_d, block_dv, num_warps,
                               num_stages=2 if wide_d else 3)


def prepare(a):
    """The launcher for every window_attention call with the signature of args `a`."""
    q, k, v = a.q, a.k, a.v
    hq, hk = q.shape[1], k.shape[1]
    group = hq // hk
    tile = window_attention_tile(q.shape[2], v.shape[2], group, a.window_left, a.window_right, q.is_cuda)
    chunks = _cdiv(group, tile.heads)
    interp = interpreted(window_attention_fwd_kernel)
    constexprs = dict(BLOCK_Q=tile.block_q, HEADS=tile.heads, BLOCK_N=tile.block_n, BLOCK_D=tile.block_d,
                      BLOCK_DV=tile.block_dv, HAS_LEFT=a.window_left >= 0, HAS_RIGHT=a.window_right >= 0,
                      SINK_MODE=int(a.sink_mode), WRITE_LSE=a.lse is not None,
                      INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32", INTERPRET=interp)
    run = KernelLauncher(window_attention_fwd_kernel, 8, constexprs, tile.num_warps, tile.num_stages)
    static = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
              a.out.stride(0), a.out.stride(1), max(a.window_left, 0), max(a.window_right, 0),
              float(a.scale) * LOG2E, group, q.shape[2], v.shape[2])

    def launch(a):
        if a.max_seqlen_q <= 0 or a.batch <= 0:
            return
        lse = a.lse if a.lse is not None else a.out  # never written without WRITE_LSE
        sinks = a.sinks if a.sinks is not None else lse  # never read when SINK_MODE == 0
        n_tiles = _cdiv(a.max_seqlen_q, tile.block_q)
        run((n_tiles * a.batch, hk * chunks), (a.q, a.k, a.v, a.out, lse, sinks, a.cu_seqlens_q, a.cu_seqlens_k,
                                               a.total_q, a.total_k, lse.stride(0) if a.lse is not None else 0,
                                               n_tiles, *static), a.q.device)
    return launch
