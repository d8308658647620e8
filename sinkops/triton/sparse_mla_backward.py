"""Triton backward of sparse MLA prefill with the null-logit sink (docs/DESIGN.md §6).

Row terms as in window_attention_backward.py: D = <dout, out>, r = 1 - p_sink = sigmoid(lse - s),
delta = r D - dlse; per valid index position x: Q = 2^(x - lse log2 e), P = r Q,
dX = Q (r dP - delta), dP = <dout, v>. K == V storage: a gathered row's gradient is
scale dX^T q (all Dqk channels) + P^T dout (the first 512).

Two kernels per chunk of queries (v2; bench/NOTES.md "Backward"), 5 matmuls as the FLOP count says
(v1 recomputed the logits and dP in its dkv kernel: 7, at M = 32):
* dq kernel, one program per (query, head block of 64, as the forward): the row terms, the sink's
  per-row gradient -p_sink D, dq = scale sum dX k over the row's top-k, and the bf16 P and
  scale dX of every (position, head) staged for the next kernel ([queries, topk, Hq]: a position's
  heads contiguous).
* dkv kernel, one program per (query, block of BLOCK_K index positions): the [BLOCK_K, Hq] tiles of
  scale dX^T and P^T against the query's q and dout, in column chunks, summed over every head in
  registers, then one float32 atomic add per (gathered row, channel) — or, deterministic, stored
  per (query, position) for torch's sorted index_put_ to sum in a fixed order. Invalid positions
  add nothing.
The staging is transient, at most STAGE_BYTES per chunk of queries (sinkops/ops/prefill_backward.py,
shared with the CUDA backward; nothing is saved for backward beyond (out, lse)).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sinkops.ops import prefill_backward as _chunks
from sinkops.triton._launch import KernelLauncher, cdiv as _cdiv, interpreted
from sinkops.triton.sparse_mla import _D_MAIN, _D_ROPE, D_MAIN, LOG2E, _dot, _load_head_rows, _to_bf16


@triton.jit
def _gather(kv_ptr, idx_row_ptr, k_offs, n, Skv, stride_kv_s, HAS_ROPE: tl.constexpr):
    """Index positions k_offs of one query -> (slot, valid, main [BLOCK_K, 512], rope [BLOCK_K, 64])."""
    in_range = k_offs < n
    slot = tl.load(idx_row_ptr + k_offs, mask=in_range, other=-1)
    valid = in_range & (slot >= 0) & (slot < Skv)
    row = kv_ptr + tl.where(valid, slot, 0).to(tl.int64) * stride_kv_s
    d = tl.arange(0, _D_MAIN)
    main = tl.load(row[:, None] + d[None, :], mask=valid[:, None], other=0.0)
    rope = main
    if HAS_ROPE:
        rope = tl.load(row[:, None] + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], mask=valid[:, None], other=0.0)
    return slot, valid, main, rope


@triton.jit(do_not_specialize=["Skv", "s0"])
def sparse_mla_bwd_dq_kernel(
    q_ptr, kv_ptr, idx_ptr, sink_ptr, topk_len_ptr, out_ptr, dout_ptr, lse_ptr, dlse_ptr,
    dq_ptr, dsink_rows_ptr, p_stage_ptr, dx_stage_ptr,
    Skv: "i64", s0: "i64", Hq, topk, qk_scale, scale,
    stride_q_s, stride_q_h, stride_kv_s, stride_idx_s, stride_o_s, stride_o_h, stride_do_s, stride_do_h,
    stride_dq_s, stride_dq_h,
    HAS_SINK: tl.constexpr, HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_DLSE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr,
):
    """Program (query s0 + program_id(0), head block program_id(1)). Stages: bf16 [queries of this
    chunk, topk, Hq] (P; scale dX)."""
    s = s0 + tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    q_main, q_rope = _load_head_rows(q_ptr + s * stride_q_s, heads, head_mask, stride_q_h, HAS_ROPE)
    do, _ = _load_head_rows(dout_ptr + s * stride_do_s, heads, head_mask, stride_do_h, False)
    o, _ = _load_head_rows(out_ptr + s * stride_o_s, heads, head_mask, stride_o_h, False)
    rows = s * Hq + heads  # lse, dlse and the sink's row gradients are dense [Sq, Hq]
    lse = tl.load(lse_ptr + rows, mask=head_mask, other=float("inf"))
    seen = lse != float("inf")
    d_row = tl.where(seen, tl.sum(do.to(tl.float32) * o.to(tl.float32), 1), 0.0)
    g_lse = tl.zeros([BLOCK_H], tl.float32)
    if HAS_DLSE:
        g_lse = tl.where(seen, tl.load(dlse_ptr + rows, mask=head_mask, other=0.0), 0.0)
    r = tl.where(seen, 1.0, 0.0)
    if HAS_SINK:
        sink = tl.load(sink_ptr + heads, mask=head_mask, other=float("-inf"))
        # r = sigmoid(lse - s), p_sink = sigmoid(s - lse): exact at s = -inf (r 1) and +inf (r 0)
        r = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((sink - lse) * 1.4426950408889634)), 0.0)
        p_sink = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((lse - sink) * 1.4426950408889634)), 0.0)
        tl.store(dsink_rows_ptr + rows, -p_sink * d_row, mask=head_mask)
    delta = r * d_row - g_lse
    lse2 = lse * 1.4426950408889634

    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + s), 0), topk)
    dq_main = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    dq_rope = tl.zeros([BLOCK_H, _D_ROPE], tl.float32)
    idx_row = idx_ptr + s * stride_idx_s
    stage_row = tl.program_id(0).to(tl.int64) * topk * Hq
    # the interpreter cannot loop to a runtime bound: a static count under the mask there
    for start in range(0, TOPK_STATIC if INTERP else n, BLOCK_K):
        k_offs = start + tl.arange(0, BLOCK_K)
        slot, valid, main, rope = _gather(kv_ptr, idx_row, k_offs, n, Skv, stride_kv_s, HAS_ROPE)
        x = _dot(q_main, tl.trans(main), INTERP)
        if HAS_ROPE:
            x += _dot(q_rope, tl.trans(rope), INTERP)
        prob = tl.where(valid[None, :], tl.math.exp2(x * qk_scale - lse2[:, None]), 0.0)  # Q; 0 where lse = +inf
        dp = _dot(do, tl.trans(main), INTERP)
        dx = prob * (r[:, None] * dp - delta[:, None])
        dx16 = _to_bf16(dx, INTERP)
        dq_main += _dot(dx16, main, INTERP)
        if HAS_ROPE:
            dq_rope += _dot(dx16, rope, INTERP)
        # every position below n, zeros for invalid ones (the dkv kernel reads exactly these)
        stage = stage_row + k_offs.to(tl.int64)[None, :] * Hq + heads[:, None]
        st_mask = head_mask[:, None] & (k_offs < n)[None, :]
        tl.store(p_stage_ptr + stage, _to_bf16(prob * r[:, None], INTERP), mask=st_mask)
        tl.store(dx_stage_ptr + stage, _to_bf16(dx * scale, INTERP), mask=st_mask)
    dq_row = dq_ptr + s * stride_dq_s + heads[:, None].to(tl.int64) * stride_dq_h
    tl.store(dq_row + d[None, :], _to_bf16(dq_main * scale, INTERP), mask=head_mask[:, None])
    if HAS_ROPE:
        tl.store(dq_row + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], _to_bf16(dq_rope * scale, INTERP),
                 mask=head_mask[:, None])


@triton.jit
def _dkv_columns(acc_base, stage_out, valid, in_topk, p_t, dx_t, q_base, do_base, heads, head_mask, stride_q_h,
                 stride_do_h, c0, HAS_DO: tl.constexpr, BLOCK_C: tl.constexpr, DETERMINISTIC: tl.constexpr,
                 INTERP: tl.constexpr):
    """Channels [c0, c0 + BLOCK_C) of the block's gradient rows: dX^T q (+ P^T dout) -> added or staged."""
    c = c0 + tl.arange(0, BLOCK_C)
    hrows = heads[:, None].to(tl.int64)
    q_c = tl.load(q_base + hrows * stride_q_h + c[None, :], mask=head_mask[:, None], other=0.0)
    g = _dot(dx_t, q_c, INTERP)                                                     # [BLOCK_K, BLOCK_C]
    if HAS_DO:
        do_c = tl.load(do_base + hrows * stride_do_h + c[None, :], mask=head_mask[:, None], other=0.0)
        g += _dot(p_t, do_c, INTERP)
    if DETERMINISTIC:  # every position of the block, zeros for invalid ones: index_put_ sums them in order
        tl.store(stage_out[:, None] + c[None, :], g, mask=in_topk[:, None])
    else:  # one atom.global.add.f32 per element (red.global.add.v2.f32 through inline PTX measured slower)
        tl.atomic_add(acc_base[:, None] + c[None, :], g, mask=valid[:, None], sem="relaxed")


@triton.jit(do_not_specialize=["Skv", "s0", "rows", "query_group"])
def sparse_mla_bwd_dkv_kernel(
    q_ptr, idx_ptr, topk_len_ptr, dout_ptr, p_stage_ptr, dx_stage_ptr, dkv_acc_ptr, det_stage_ptr,
    Skv: "i64", s0: "i64", rows: "i64", query_group: "i64", Hq, topk,
    stride_q_s, stride_q_h, stride_idx_s, stride_do_s, stride_do_h,
    HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr, DETERMINISTIC: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, INTERP: tl.constexpr,
):
    """Program -> (index block kb, query s0 + sl) of the chunk's `rows` queries: groups of
    query_group queries, in each the block (odd groups backwards), then the query (the CUDA dkv kernel's
    order, over sorted indices: programs that run together add into one key range of dkv_acc, which
    stays in L2).
    dkv_acc: float32 [Skv + 1, Dqk]; det_stage (deterministic): float32 [queries of this chunk, topk,
    Dqk]."""
    k_blocks = tl.cdiv(topk, BLOCK_K)
    pid = tl.program_id(0).to(tl.int64)
    group = pid // (query_group * k_blocks)
    first = group * query_group
    in_group = tl.minimum(query_group, rows - first)
    rest = pid - first * k_blocks
    kb = rest // in_group
    kb = tl.where(group % 2 == 1, k_blocks - 1 - kb, kb).to(tl.int32)  # odd groups backwards (L2)
    sl = first + rest % in_group  # the query's row in this chunk's stages
    s = s0 + sl
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + s), 0), topk)
    k_offs = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    in_topk = k_offs < topk
    d_qk = _D_MAIN + _D_ROPE if HAS_ROPE else _D_MAIN
    det_out = det_stage_ptr + (sl * topk + k_offs.to(tl.int64)) * d_qk
    if (kb * BLOCK_K < n) | DETERMINISTIC:  # deterministic: a block past n stages its zeros
        in_range = k_offs < n
        slot = tl.load(idx_ptr + s * stride_idx_s + k_offs, mask=in_range, other=-1)
        valid = in_range & (slot >= 0) & (slot < Skv)
        acc_base = dkv_acc_ptr + tl.where(valid, slot, 0).to(tl.int64) * d_qk
        heads = tl.arange(0, BLOCK_HQ)
        head_mask = heads < Hq
        st = sl * topk * Hq + k_offs.to(tl.int64)[:, None] * Hq + heads[None, :]
        st_mask = in_range[:, None] & head_mask[None, :]
        p_t = tl.load(p_stage_ptr + st, mask=st_mask, other=0.0)    # [BLOCK_K, heads] P^T
        dx_t = tl.load(dx_stage_ptr + st, mask=st_mask, other=0.0)  # scale dX^T
        q_base = q_ptr + s * stride_q_s
        do_base = dout_ptr + s * stride_do_s
        for c0 in range(0, _D_MAIN, BLOCK_C):
            _dkv_columns(acc_base, det_out, valid, in_topk, p_t, dx_t, q_base, do_base, heads, head_mask,
                         stride_q_h, stride_do_h, c0, True, BLOCK_C, DETERMINISTIC, INTERP)
        if HAS_ROPE:
            _dkv_columns(acc_base, det_out, valid, in_topk, p_t, dx_t, q_base, do_base, heads, head_mask,
                         stride_q_h, stride_do_h, _D_MAIN, False, _D_ROPE, DETERMINISTIC, INTERP)


def _dq_tiles(num_heads: int, interp: bool):
    """(BLOCK_H, BLOCK_K, warps, stages) of the dq kernel: the forward's tiles (64 heads x 64 keys,
    8 warps: M = 64 wgmma), one stage (two need 266 KB of shared memory; bench/NOTES.md "Backward
    v2"; bench/bench_backward.py --sweep times others)."""
    if interp:
        return 16, 16, 4, 1
    block_h = 16 if num_heads <= 16 else (32 if num_heads <= 32 else 64)
    return block_h, 64, (8 if block_h >= 64 else 4), 1


def _dkv_tiles(num_heads: int, interp: bool):
    """(BLOCK_HQ, BLOCK_K, BLOCK_C, warps, stages) of the dkv kernel: every head in one tile (the
    matmuls' K), 64 positions x 64 channels per product, 4 warps (V4-Pro: 187 TFLOP/s overall vs 173 at
    8 warps; 128 channels or 3 stages were slower: bench/NOTES.md "Backward v2")."""
    block_hq = max(16, triton.next_power_of_2(num_heads))
    if interp:
        return block_hq, 16, 64, 4, 1
    return block_hq, 64, 64, 4, 2


def prepare(a):
    """The launcher for every sparse_mla_prefill_backward call with the signature of args `a`."""
    q, indices = a.q, a.indices
    hq, dqk = q.shape[1], q.shape[2]
    topk = indices.shape[-1]
    interp = interpreted(sparse_mla_bwd_dq_kernel)
    has_rope = dqk > D_MAIN
    block_h, block_k, warps, stages = _dq_tiles(hq, interp)
    block_hq, dkv_k, dkv_c, dkv_warps, dkv_stages = _dkv_tiles(hq, interp)
    run_dq = KernelLauncher(sparse_mla_bwd_dq_kernel, 13, dict(
        HAS_SINK=a.attn_sink is not None, HAS_TOPK_LEN=a.topk_length is not None, HAS_ROPE=has_rope,
        HAS_DLSE=a.dlse is not None, BLOCK_H=block_h, BLOCK_K=block_k, INTERP=interp,
        TOPK_STATIC=topk if interp else 0), warps, stages)
    run_dkv = KernelLauncher(sparse_mla_bwd_dkv_kernel, 8, dict(
        HAS_TOPK_LEN=a.topk_length is not None, HAS_ROPE=has_rope, DETERMINISTIC=bool(a.deterministic),
        BLOCK_HQ=block_hq, BLOCK_K=dkv_k, BLOCK_C=dkv_c, INTERP=interp), dkv_warps, dkv_stages)
    scale = float(a.scale)
    head_blocks = _cdiv(hq, block_h)
    k_blocks = _cdiv(topk, dkv_k)
    deterministic = bool(a.deterministic)

    def launch(a):
        dev, sq, skv = a.q.device, a.q.shape[0], a.kv.shape[0]
        rows = _chunks.chunk_rows(sq, hq, topk, dqk, deterministic)
        dsink_rows = torch.empty(sq, hq, dtype=torch.float32, device=dev) if a.attn_sink is not None else a.lse
        sink = a.attn_sink if a.attn_sink is not None else a.lse
        topk_len = a.topk_length if a.topk_length is not None else a.indices
        dlse = a.dlse if a.dlse is not None else a.lse
        dkv_acc = torch.zeros(skv + 1, dqk, dtype=torch.float32, device=dev)  # + a row for invalid positions
        p_stage = torch.empty(rows, topk, hq, dtype=torch.bfloat16, device=dev)
        dx_stage = torch.empty(rows, topk, hq, dtype=torch.bfloat16, device=dev)
        det = torch.empty(rows, topk, dqk, dtype=torch.float32, device=dev) if a.deterministic else dkv_acc
        pos = torch.arange(topk, device=dev) if a.deterministic else None
        group = _chunks.dkv_query_group(hq, dqk, a.dout.shape[-1])
        for s0 in range(0, sq, rows):
            n = min(rows, sq - s0)
            run_dq((n, head_blocks), (
                a.q, a.kv, a.indices, sink, topk_len, a.out, a.dout, a.lse, dlse, a.dq, dsink_rows, p_stage, dx_stage,
                skv, s0, hq, topk, scale * LOG2E, scale, a.q.stride(0), a.q.stride(1), a.kv.stride(0),
                a.indices.stride(0), a.out.stride(0), a.out.stride(1), a.dout.stride(0), a.dout.stride(1),
                a.dq.stride(0), a.dq.stride(1)), dev)
            run_dkv((k_blocks * n,), (
                a.q, a.indices, topk_len, a.dout, p_stage, dx_stage, dkv_acc, det,
                skv, s0, n, group, hq, topk, a.q.stride(0), a.q.stride(1), a.indices.stride(0), a.dout.stride(0),
                a.dout.stride(1)), dev)
            if a.deterministic:
                _chunks.sum_staged_key_gradients(dkv_acc, det, a, s0, n, pos)
        a.dkv.copy_(dkv_acc[:skv].view(skv, 1, dqk))
        if a.attn_sink is not None:
            torch.sum(dsink_rows, dim=0, out=a.d_attn_sink)
    return launch
