"""Triton backward of window attention (docs/DESIGN.md §6): two kernels, no atomics, so the result
is deterministic by construction.

From the forward's saved (out, lse), per row: D = <dout, out>, r = 1 - p_sink (null mode; 1
otherwise, 0 on rows that saw no key), delta = r D - dlse; per visible logit x (log2 units as in
the forward): Q = 2^(x - lse log2 e), P = r Q, dX = Q (r dP - delta) with dP = <dout, v>.

* dq kernel, one program per (query tile, KV head, head chunk) as the forward's: computes the row
  terms (fused: dout and out are read once), stores r and delta for the dk/dv kernel, walks the
  key blocks of the tile's window for dq = scale sum dX k, and writes each row's sink gradient
  (key0: dX of the segment's key 0; null: -p_sink D) for a deterministic sum over rows afterwards.
* dk/dv kernel, one program per (key tile of a segment, KV head): walks every query head of the
  KV head's group and the query rows whose window reaches the tile, accumulating
  dk = scale sum dX q and dv = sum P dout in registers (GQA sums over the group here, not in
  memory). A +inf key0 sink makes P one-hot on key 0 for the rows that see it (out = v_0).
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from sinkops.triton._launch import KernelLauncher, cdiv as _cdiv, interpreted
from sinkops.triton.window_attention import _segment, _to_lowp_as_f32, key_block_logits, query_tile, tile_key_range

LOG2E = 1.4426950408889634


@triton.jit
def _lowp(x, dtype: tl.constexpr, INTERPRET: tl.constexpr):
    """x (float32) as a tensor-core operand of `dtype`; in the interpreter rounded but kept float32."""
    if INTERPRET:
        return _to_lowp_as_f32(x, dtype)
    else:
        return x.to(dtype)


@triton.jit
def _operand(x, INTERPRET: tl.constexpr):
    if INTERPRET:
        return x.to(tl.float32)  # the interpreter multiplies bf16 as raw integers
    else:
        return x


@triton.jit
def _dq_key_block(dq, dsink_row, q, do, lse2, r, delta, k_ptr, v_ptr, stride_kt, stride_vt, start_n, sk,
                  row_lo, row_hi, qk_scale, key0_bias, offs_n, offs_d, offs_dv, D, DV,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ADD_KEY0: tl.constexpr,
                  INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    x, visible, kn, key_in, rows, k = key_block_logits(q, k_ptr, stride_kt, start_n, sk, row_lo, row_hi, qk_scale,
                                                       key0_bias, offs_n, offs_d, D, HAS_LEFT, HAS_RIGHT, ADD_KEY0,
                                                       INPUT_PRECISION, INTERPRET)
    v = tl.load(v_ptr + rows[:, None] * stride_vt + offs_dv[None, :],
                mask=key_in[:, None] & (offs_dv[None, :] < DV), other=0.0)
    prob = tl.where(visible, tl.math.exp2(x - lse2[:, None]), 0.0)   # Q; 0 where lse = +inf
    dp = tl.dot(do, tl.trans(_operand(v, INTERPRET)), input_precision=INPUT_PRECISION)
    ds = prob * (r[:, None] * dp - delta[:, None])
    if ADD_KEY0:
        dsink_row += tl.sum(tl.where(kn[None, :] == 0, ds, 0.0), 1)
    dq += tl.dot(_lowp(ds, v.dtype, INTERPRET), k, input_precision=INPUT_PRECISION)  # k: float32 when interpreted
    return dq, dsink_row


@triton.jit(do_not_specialize=["total_q", "total_k", "stride_rh", "n_tiles"])
def window_attention_bwd_dq_kernel(
        q_ptr, k_ptr, v_ptr, out_ptr, dout_ptr, lse_ptr, dlse_ptr, sinks_ptr, cu_q_ptr, cu_k_ptr,
        dq_ptr, r_ptr, delta_ptr, dsink_rows_ptr,
        total_q: "i64", total_k: "i64", stride_rh: "i64", n_tiles: "i32",
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
        stride_dot, stride_doh, stride_lh, stride_dlh, stride_dqt, stride_dqh,
        window_left, window_right, qk_scale, scale, group, D, DV,
        BLOCK_Q: tl.constexpr, HEADS: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
        HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SINK_MODE: tl.constexpr, HAS_DLSE: tl.constexpr,
        INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    q_start, sq, k_start, sk, q0, qi, head, row_ok, kv_head, g = query_tile(
        cu_q_ptr, cu_k_ptr, total_q, total_k, n_tiles, group, BLOCK_Q, HEADS)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q_rows = (q_start + qi).to(tl.int64)
    dv_mask = row_ok[:, None] & (offs_dv[None, :] < DV)

    q = tl.load(q_ptr + q_rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
                mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    do = tl.load(dout_ptr + q_rows[:, None] * stride_dot + head[:, None] * stride_doh + offs_dv[None, :],
                 mask=dv_mask, other=0.0)
    o = tl.load(out_ptr + q_rows[:, None] * stride_ot + head[:, None] * stride_oh + offs_dv[None, :],
                mask=dv_mask, other=0.0)
    lse = tl.load(lse_ptr + head * stride_lh + q_rows, mask=row_ok, other=float("inf"))
    seen = lse != float("inf")
    d_row = tl.where(seen, tl.sum(do.to(tl.float32) * o.to(tl.float32), 1), 0.0)
    g_lse = tl.zeros([BLOCK_Q * HEADS], tl.float32)
    if HAS_DLSE:
        g_lse = tl.where(seen, tl.load(dlse_ptr + head * stride_dlh + q_rows, mask=row_ok, other=0.0), 0.0)
    r = tl.where(seen, 1.0, 0.0)
    dsink_row = tl.zeros([BLOCK_Q * HEADS], tl.float32)
    if SINK_MODE == 2:
        s = tl.load(sinks_ptr + head, mask=g < group, other=float("-inf"))
        # r = sigmoid(lse - s), p_sink = sigmoid(s - lse): exact at s = -inf (r 1) and +inf (r 0)
        r = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((s - lse) * 1.4426950408889634)), 0.0)
        p_sink = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((lse - s) * 1.4426950408889634)), 0.0)
        dsink_row = -p_sink * d_row
    delta = r * d_row - g_lse
    tl.store(r_ptr + head * stride_rh + q_rows, r, mask=row_ok)
    tl.store(delta_ptr + head * stride_rh + q_rows, delta, mask=row_ok)
    lse2 = lse * 1.4426950408889634
    q = _operand(q, INTERPRET)
    do = _operand(do, INTERPRET)

    row_lo, row_hi, n_lo, n_hi = tile_key_range(qi, q0, sq, sk, window_left, window_right, BLOCK_Q, BLOCK_N,
                                                HAS_LEFT, HAS_RIGHT)
    sk32 = sk.to(tl.int32)
    kv_k_ptr = k_ptr + k_start * stride_kt + kv_head.to(tl.int64) * stride_kh
    kv_v_ptr = v_ptr + k_start * stride_vt + kv_head.to(tl.int64) * stride_vh
    dq = tl.zeros([BLOCK_Q * HEADS, BLOCK_D], tl.float32)

    if SINK_MODE == 1:
        s = tl.load(sinks_ptr + head, mask=g < group, other=0.0)
        key0_bias = tl.where(s == float("inf"), 0.0, s) * 1.4426950408889634
        if (n_lo == 0) & (n_hi > 0):
            dq, dsink_row = _dq_key_block(dq, dsink_row, q, do, lse2, r, delta, kv_k_ptr, kv_v_ptr, stride_kt,
                                          stride_vt, 0, sk32, row_lo, row_hi, qk_scale, key0_bias, offs_n, offs_d,
                                          offs_dv, D, DV, HAS_LEFT, HAS_RIGHT, True, INPUT_PRECISION, INTERPRET)
            n_lo = n_lo + BLOCK_N
    else:
        key0_bias = lse2  # unused
    if INTERPRET:
        start_n = n_lo
        while start_n < n_hi:
            dq, dsink_row = _dq_key_block(dq, dsink_row, q, do, lse2, r, delta, kv_k_ptr, kv_v_ptr, stride_kt,
                                          stride_vt, start_n, sk32, row_lo, row_hi, qk_scale, key0_bias, offs_n,
                                          offs_d, offs_dv, D, DV, HAS_LEFT, HAS_RIGHT, False, INPUT_PRECISION,
                                          INTERPRET)
            start_n += BLOCK_N
    else:
        for start_n in range(n_lo, n_hi, BLOCK_N):
            dq, dsink_row = _dq_key_block(dq, dsink_row, q, do, lse2, r, delta, kv_k_ptr, kv_v_ptr, stride_kt,
                                          stride_vt, start_n, sk32, row_lo, row_hi, qk_scale, key0_bias, offs_n,
                                          offs_d, offs_dv, D, DV, HAS_LEFT, HAS_RIGHT, False, INPUT_PRECISION,
                                          INTERPRET)
    dq = dq * scale
    if INTERPRET:
        dq = _to_lowp_as_f32(dq, dq_ptr.dtype.element_ty)
    tl.store(dq_ptr + q_rows[:, None] * stride_dqt + head[:, None] * stride_dqh + offs_d[None, :],
             dq.to(dq_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_d[None, :] < D))
    if SINK_MODE != 0:
        tl.store(dsink_rows_ptr + head * stride_rh + q_rows, dsink_row, mask=row_ok)


@triton.jit
def _dkdv_query_block(dk, dv, k, v, kn, key_in, q_base, do_base, lse_base, r_base, delta_base,
                      stride_qt, stride_dot, m0, sq, off, window_left, window_right, qk_scale, key0_bias,
                      inf_sink, offs_m, offs_d, offs_dv, D, DV,
                      HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, ADD_KEY0: tl.constexpr,
                      INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Adds query rows [m0, m0 + BLOCK_M) of one head to the tile's dk, dv (transposed: keys x rows)."""
    qi = m0 + offs_m
    row_ok = (qi >= 0) & (qi < sq)
    rows = qi.to(tl.int64)
    q = tl.load(q_base + rows[:, None] * stride_qt + offs_d[None, :],
                mask=row_ok[:, None] & (offs_d[None, :] < D), other=0.0)
    do = tl.load(do_base + rows[:, None] * stride_dot + offs_dv[None, :],
                 mask=row_ok[:, None] & (offs_dv[None, :] < DV), other=0.0)
    lse2 = tl.load(lse_base + rows, mask=row_ok, other=float("inf")) * 1.4426950408889634
    r = tl.load(r_base + rows, mask=row_ok, other=0.0)
    delta = tl.load(delta_base + rows, mask=row_ok, other=0.0)
    xt = tl.dot(k, tl.trans(_operand(q, INTERPRET)), input_precision=INPUT_PRECISION) * qk_scale  # [BN, BM]
    diag = qi.to(tl.int64) + off                                                                  # key of row i at offset 0
    visible = key_in[:, None] & row_ok[None, :]
    if HAS_LEFT:
        visible = visible & (kn[:, None].to(tl.int64) >= diag[None, :] - window_left)
    if HAS_RIGHT:
        visible = visible & (kn[:, None].to(tl.int64) <= diag[None, :] + window_right)
    if ADD_KEY0:  # only the segment's first tile holds key 0; one select per element elsewhere
        xt = xt + tl.where(kn[:, None] == 0, key0_bias, 0.0)
    prob = tl.where(visible, tl.math.exp2(xt - lse2[None, :]), 0.0)                               # Q^T
    p = prob * r[None, :]
    if ADD_KEY0:
        # +inf sink: the rows that see key 0 output v_0, so P is one-hot there (and Q, dX are 0)
        p = tl.where((kn[:, None] == 0) & visible, tl.where(inf_sink > 0.0, 1.0, p), p)
    do_op = _operand(do, INTERPRET)
    dv += tl.dot(_lowp(p, v.dtype, INTERPRET), do_op, input_precision=INPUT_PRECISION)
    dpt = tl.dot(v, tl.trans(do_op), input_precision=INPUT_PRECISION)
    dst = prob * (r[None, :] * dpt - delta[None, :])
    dk += tl.dot(_lowp(dst, v.dtype, INTERPRET), _operand(q, INTERPRET), input_precision=INPUT_PRECISION)
    return dk, dv


@triton.jit
def _dkdv_step(dk, dv, k, v, kn, key_in, it, n_m, m_lo, kv_head, group, q_ptr, dout_ptr, lse_ptr, r_ptr, delta_ptr,
               sinks_ptr, q_start, stride_qt, stride_qh, stride_dot, stride_doh, stride_lh, stride_rh, sq, off,
               window_left, window_right, qk_scale, offs_m, offs_d, offs_dv, D, DV, BLOCK_M: tl.constexpr,
               HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SINK_MODE: tl.constexpr,
               INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Step `it` of the dk/dv loop: query block it % n_m of head it // n_m of the kv head's group."""
    hg = it // n_m
    m0 = m_lo + (it - hg * n_m) * BLOCK_M
    head = kv_head * group + hg
    key0_bias = 0.0
    inf_sink = 0.0  # 1.0 for a +inf key0 sink (a float: the interpreter cannot AND a loaded bool)
    if SINK_MODE == 1:
        s = tl.load(sinks_ptr + head)
        key0_bias = tl.where(s == float("inf"), 0.0, s) * 1.4426950408889634
        inf_sink = tl.where(s == float("inf"), 1.0, 0.0)
    return _dkdv_query_block(dk, dv, k, v, kn, key_in, q_ptr + q_start * stride_qt + head * stride_qh,
                             dout_ptr + q_start * stride_dot + head * stride_doh, lse_ptr + head * stride_lh + q_start,
                             r_ptr + head * stride_rh + q_start, delta_ptr + head * stride_rh + q_start, stride_qt,
                             stride_dot, m0, sq, off, window_left, window_right, qk_scale, key0_bias, inf_sink, offs_m,
                             offs_d, offs_dv, D, DV, HAS_LEFT, HAS_RIGHT, SINK_MODE == 1, INPUT_PRECISION, INTERPRET)


@triton.jit(do_not_specialize=["total_q", "total_k", "stride_rh", "n_tiles"])
def window_attention_bwd_dkdv_kernel(
        q_ptr, k_ptr, v_ptr, dout_ptr, lse_ptr, r_ptr, delta_ptr, sinks_ptr, cu_q_ptr, cu_k_ptr, dk_ptr, dv_ptr,
        total_q: "i64", total_k: "i64", stride_rh: "i64", n_tiles: "i32",
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_dot, stride_doh, stride_lh,
        stride_dkt, stride_dkh, stride_dvt, stride_dvh,
        window_left, window_right, qk_scale, scale, group, D, DV,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
        HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, SINK_MODE: tl.constexpr,
        INPUT_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    # grid: (batch x key tiles of max_seqlen_k, kv heads)
    b = tl.program_id(0) // n_tiles
    tile = tl.program_id(0) % n_tiles
    kv_head = tl.program_id(1).to(tl.int64)
    q_start, sq = _segment(cu_q_ptr, b, total_q)
    k_start, sk = _segment(cu_k_ptr, b, total_k)
    n0 = tile * BLOCK_N
    if n0 < sk:
        offs_n = tl.arange(0, BLOCK_N)
        offs_m = tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        offs_dv = tl.arange(0, BLOCK_DV)
        kn = n0 + offs_n
        key_in = kn < sk
        krows = (k_start + kn).to(tl.int64)
        k = tl.load(k_ptr + krows[:, None] * stride_kt + kv_head * stride_kh + offs_d[None, :],
                    mask=key_in[:, None] & (offs_d[None, :] < D), other=0.0)
        v = tl.load(v_ptr + krows[:, None] * stride_vt + kv_head * stride_vh + offs_dv[None, :],
                    mask=key_in[:, None] & (offs_dv[None, :] < DV), other=0.0)
        k = _operand(k, INTERPRET)
        v = _operand(v, INTERPRET)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
        off = sk - sq
        # query rows whose window reaches keys [n0, n0 + BLOCK_N): i in [j - off - right, j - off + left]
        m_lo = sq * 0
        m_hi = sq
        if HAS_RIGHT:
            m_lo = tl.maximum(n0 - off - window_right, 0)
        if HAS_LEFT:
            m_hi = tl.minimum(n0 + BLOCK_N - 1 - off + window_left + 1, sq)
        m_lo = (m_lo // BLOCK_M) * BLOCK_M
        n_m = tl.maximum(m_hi - m_lo + BLOCK_M - 1, 0) // BLOCK_M  # query blocks per head
        # One loop over (head of the group, query block), so Triton pipelines the next block's
        # q / dout loads behind this one's dots (v1's nested while loops were not pipelined). The
        # interpreter cannot range() to a runtime bound: a while loop there.
        if INTERPRET:
            it = 0
            while it < group * n_m:
                dk, dv = _dkdv_step(dk, dv, k, v, kn, key_in, it, n_m, m_lo, kv_head, group, q_ptr, dout_ptr,
                                    lse_ptr, r_ptr, delta_ptr, sinks_ptr, q_start, stride_qt, stride_qh, stride_dot,
                                    stride_doh, stride_lh, stride_rh, sq, off, window_left, window_right, qk_scale,
                                    offs_m, offs_d, offs_dv, D, DV, BLOCK_M, HAS_LEFT, HAS_RIGHT, SINK_MODE,
                                    INPUT_PRECISION, INTERPRET)
                it += 1
        else:
            for it in range(0, group * n_m):
                dk, dv = _dkdv_step(dk, dv, k, v, kn, key_in, it, n_m, m_lo, kv_head, group, q_ptr, dout_ptr,
                                    lse_ptr, r_ptr, delta_ptr, sinks_ptr, q_start, stride_qt, stride_qh, stride_dot,
                                    stride_doh, stride_lh, stride_rh, sq, off, window_left, window_right, qk_scale,
                                    offs_m, offs_d, offs_dv, D, DV, BLOCK_M, HAS_LEFT, HAS_RIGHT, SINK_MODE,
                                    INPUT_PRECISION, INTERPRET)
        dk = dk * scale
        if INTERPRET:
            dk = _to_lowp_as_f32(dk, dk_ptr.dtype.element_ty)
            dv = _to_lowp_as_f32(dv, dv_ptr.dtype.element_ty)
        tl.store(dk_ptr + krows[:, None] * stride_dkt + kv_head * stride_dkh + offs_d[None, :],
                 dk.to(dk_ptr.dtype.element_ty), mask=key_in[:, None] & (offs_d[None, :] < D))
        tl.store(dv_ptr + krows[:, None] * stride_dvt + kv_head * stride_dvh + offs_dv[None, :],
                 dv.to(dv_ptr.dtype.element_ty), mask=key_in[:, None] & (offs_dv[None, :] < DV))


@functools.lru_cache(maxsize=None)
def backward_tiles(head_dim: int, head_dim_v: int, group: int, on_gpu: bool):
    """(dq tile rows, heads folded per dq program, dq key block, dk/dv key tile, dk/dv query block,
    padded D, padded Dv, warps, pipeline stages). One H200 sweep so far (bench/NOTES.md, "Backward")."""
    block_d = max(16, triton.next_power_of_2(head_dim))
    block_dv = max(16, triton.next_power_of_2(head_dim_v))
    heads = min(triton.next_power_of_2(group), 64)
    rows = 64 if on_gpu else 16
    block_q = max(1, rows // heads)
    if block_q * heads < 16:
        block_q = 16 // heads
    wide = max(block_d, block_dv) > 128
    # H200 sweep, MiMo video (d 64, window 64): dq key block 32 569 µs vs 64 590; dk/dv tiles of
    # 64 keys x 64 rows beat 32 / 128 and 8 warps (bench/NOTES.md, "Backward")
    block_n = 32 if (wide or not on_gpu or block_d <= 64) else 64
    dkdv_n = 32 if (wide or not on_gpu) else 64
    dkdv_m = 32 if (wide or not on_gpu) else 64
    return block_q, heads, block_n, dkdv_n, dkdv_m, block_d, block_dv, (8 if wide else 4), 2


def prepare(a):
    """The launcher for every window_attention_backward call with the signature of args `a`."""
    q, k, v = a.q, a.k, a.v
    hq, hk = q.shape[1], k.shape[1]
    group = hq // hk
    block_q, heads, block_n, dkdv_n, dkdv_m, block_d, block_dv, warps, stages = backward_tiles(
        q.shape[2], v.shape[2], group, q.is_cuda)
    chunks = _cdiv(group, heads)
    interp = interpreted(window_attention_bwd_dq_kernel)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    common = dict(HAS_LEFT=a.window_left >= 0, HAS_RIGHT=a.window_right >= 0, SINK_MODE=int(a.sink_mode))
    run_dq = KernelLauncher(window_attention_bwd_dq_kernel, 14, dict(
        BLOCK_Q=block_q, HEADS=heads, BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_DV=block_dv, **common,
        HAS_DLSE=a.dlse is not None, INPUT_PRECISION=precision, INTERPRET=interp), warps, stages)
    run_dkdv = KernelLauncher(window_attention_bwd_dkdv_kernel, 12, dict(
        BLOCK_M=dkdv_m, BLOCK_N=dkdv_n, BLOCK_D=block_d, BLOCK_DV=block_dv, **common,
        INPUT_PRECISION=precision, INTERPRET=interp), warps, stages)
    scale = float(a.scale)
    window = (max(a.window_left, 0), max(a.window_right, 0), scale * LOG2E, scale, group, q.shape[2], v.shape[2])

    def launch(a):
        if a.max_seqlen_q <= 0 or a.max_seqlen_k <= 0 or a.batch <= 0:
            a.zero_gradients()
            return
        # the gradients come uninitialized and these kernels write only the rows of segments
        for g in (a.dq, a.dk, a.dv):
            g.zero_()
        dev = a.q.device
        tq = a.q.shape[0]
        r = torch.empty(hq, tq, dtype=torch.float32, device=dev)
        delta = torch.empty(hq, tq, dtype=torch.float32, device=dev)
        has_sink = a.dsinks is not None
        dsink_rows = torch.zeros(hq, tq, dtype=torch.float32, device=dev) if has_sink else r
        sinks = a.sinks if a.sinks is not None else r
        dlse = a.dlse if a.dlse is not None else a.lse
        n_q_tiles = _cdiv(a.max_seqlen_q, block_q)
        run_dq((n_q_tiles * a.batch, hk * chunks), (
            a.q, a.k, a.v, a.out, a.dout, a.lse, dlse, sinks, a.cu_seqlens_q, a.cu_seqlens_k, a.dq, r, delta,
            dsink_rows, a.total_q, a.total_k, tq, n_q_tiles,
            a.q.stride(0), a.q.stride(1), a.k.stride(0), a.k.stride(1), a.v.stride(0), a.v.stride(1),
            a.out.stride(0), a.out.stride(1), a.dout.stride(0), a.dout.stride(1), a.lse.stride(0), dlse.stride(0),
            a.dq.stride(0), a.dq.stride(1), *window), dev)
        n_k_tiles = _cdiv(a.max_seqlen_k, dkdv_n)
        run_dkdv((n_k_tiles * a.batch, hk), (
            a.q, a.k, a.v, a.dout, a.lse, r, delta, sinks, a.cu_seqlens_q, a.cu_seqlens_k, a.dk, a.dv,
            a.total_q, a.total_k, tq, n_k_tiles,
            a.q.stride(0), a.q.stride(1), a.k.stride(0), a.k.stride(1), a.v.stride(0), a.v.stride(1),
            a.dout.stride(0), a.dout.stride(1), a.lse.stride(0), a.dk.stride(0), a.dk.stride(1),
            a.dv.stride(0), a.dv.stride(1), *window), dev)
        if has_sink:
            torch.sum(dsink_rows, dim=1, out=a.dsinks)  # a fixed-order reduction: deterministic
    return launch
