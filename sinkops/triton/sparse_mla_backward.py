"""Triton backward of sparse MLA prefill with the null-logit sink (docs/DESIGN.md §6).

Row terms as in window_attention_backward.py: D = <dout, out>, r = 1 - p_sink = sigmoid(lse - s),
delta = r D - dlse; per valid index position x: Q = 2^(x - lse log2 e), P = r Q,
dX = Q (r dP - delta), dP = <dout, v>. K == V storage: a gathered row's gradient is
scale dX^T q (all Dqk channels) + P^T dout (the first 512).

* dq kernel, one program per (query, head block): the row terms (stored for the dkv kernel),
  the sink's per-row gradient -p_sink D, and dq = scale sum dX k over the row's top-k.
* dkv kernel, one program per (query, block of BLOCK_K index positions): gathers its KV rows once,
  walks every head block of the query (recomputing x, dP: two extra dots so the heads are summed
  in registers, not in memory), and adds the [BLOCK_K, Dqk] gradient to a float32 accumulator
  with one atomic add per element — or, deterministic, stores it per (query, position) for
  torch's sorted index_put_ to sum in a fixed order. Invalid positions add nothing.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from sinkops.triton._launch import KernelLauncher, cdiv as _cdiv, interpreted
from sinkops.triton.sparse_mla import _D_MAIN, _D_ROPE, D_MAIN, LOG2E, _dot, _load_head_rows, _to_bf16

# deterministic mode: per-(query, position) gradients are staged in chunks of at most this many bytes
_STAGE_BYTES = 1 << 30


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


@triton.jit
def _load_q_block(q_ptr, dout_ptr, s, heads, head_mask, stride_q_s, stride_q_h, stride_do_s, stride_do_h,
                  HAS_ROPE: tl.constexpr):
    q_main, q_rope = _load_head_rows(q_ptr + s * stride_q_s, heads, head_mask, stride_q_h, HAS_ROPE)
    do, _ = _load_head_rows(dout_ptr + s * stride_do_s, heads, head_mask, stride_do_h, False)
    return q_main, q_rope, do


@triton.jit
def _logit_grads(q_main, q_rope, do, main, rope, valid, lse2, r, delta, qk_scale,
                 HAS_ROPE: tl.constexpr, INTERP: tl.constexpr):
    """-> (Q [BLOCK_H, BLOCK_K], dX [BLOCK_H, BLOCK_K]) for one head block and one gathered block."""
    x = _dot(q_main, tl.trans(main), INTERP)
    if HAS_ROPE:
        x += _dot(q_rope, tl.trans(rope), INTERP)
    prob = tl.where(valid[None, :], tl.math.exp2(x * qk_scale - lse2[:, None]), 0.0)
    dp = _dot(do, tl.trans(main), INTERP)
    return prob, prob * (r[:, None] * dp - delta[:, None])


@triton.jit(do_not_specialize=["Skv"])
def sparse_mla_bwd_dq_kernel(
    q_ptr, kv_ptr, idx_ptr, sink_ptr, topk_len_ptr, out_ptr, dout_ptr, lse_ptr, dlse_ptr,
    dq_ptr, r_ptr, delta_ptr, dsink_rows_ptr,
    Skv: "i64", Hq, topk, qk_scale, scale,
    stride_q_s, stride_q_h, stride_kv_s, stride_idx_s, stride_o_s, stride_o_h, stride_do_s, stride_do_h,
    stride_dq_s, stride_dq_h,
    HAS_SINK: tl.constexpr, HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_DLSE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr, TOPK_STATIC: tl.constexpr,
):
    s = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < Hq
    d = tl.arange(0, _D_MAIN)
    q_main, q_rope, do = _load_q_block(q_ptr, dout_ptr, s, heads, head_mask, stride_q_s, stride_q_h, stride_do_s,
                                       stride_do_h, HAS_ROPE)
    o, _ = _load_head_rows(out_ptr + s * stride_o_s, heads, head_mask, stride_o_h, False)
    rows = s * Hq + heads  # lse, dlse and the row terms are dense [Sq, Hq]
    lse = tl.load(lse_ptr + rows, mask=head_mask, other=float("inf"))
    seen = lse != float("inf")
    d_row = tl.where(seen, tl.sum(do.to(tl.float32) * o.to(tl.float32), 1), 0.0)
    g_lse = tl.zeros([BLOCK_H], tl.float32)
    if HAS_DLSE:
        g_lse = tl.where(seen, tl.load(dlse_ptr + rows, mask=head_mask, other=0.0), 0.0)
    r = tl.where(seen, 1.0, 0.0)
    if HAS_SINK:
        sink = tl.load(sink_ptr + heads, mask=head_mask, other=float("-inf"))
        r = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((sink - lse) * 1.4426950408889634)), 0.0)
        p_sink = tl.where(seen, 1.0 / (1.0 + tl.math.exp2((lse - sink) * 1.4426950408889634)), 0.0)
        tl.store(dsink_rows_ptr + rows, -p_sink * d_row, mask=head_mask)
    delta = r * d_row - g_lse
    tl.store(r_ptr + rows, r, mask=head_mask)
    tl.store(delta_ptr + rows, delta, mask=head_mask)
    lse2 = lse * 1.4426950408889634

    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + s), 0), topk)
    dq_main = tl.zeros([BLOCK_H, _D_MAIN], tl.float32)
    dq_rope = tl.zeros([BLOCK_H, _D_ROPE], tl.float32)
    idx_row = idx_ptr + s * stride_idx_s
    # the interpreter cannot loop to a runtime bound: a static count under the mask there
    for start in range(0, TOPK_STATIC if INTERP else n, BLOCK_K):
        k_offs = start + tl.arange(0, BLOCK_K)
        slot, valid, main, rope = _gather(kv_ptr, idx_row, k_offs, n, Skv, stride_kv_s, HAS_ROPE)
        prob, dx = _logit_grads(q_main, q_rope, do, main, rope, valid, lse2, r, delta, qk_scale, HAS_ROPE, INTERP)
        dx16 = _to_bf16(dx, INTERP)
        dq_main += _dot(dx16, main, INTERP)
        if HAS_ROPE:
            dq_rope += _dot(dx16, rope, INTERP)
    dq_row = dq_ptr + s * stride_dq_s + heads[:, None].to(tl.int64) * stride_dq_h
    tl.store(dq_row + d[None, :], _to_bf16(dq_main * scale, INTERP), mask=head_mask[:, None])
    if HAS_ROPE:
        tl.store(dq_row + _D_MAIN + tl.arange(0, _D_ROPE)[None, :], _to_bf16(dq_rope * scale, INTERP),
                 mask=head_mask[:, None])


@triton.jit(do_not_specialize=["Skv", "s0"])
def sparse_mla_bwd_dkv_kernel(
    q_ptr, kv_ptr, idx_ptr, topk_len_ptr, dout_ptr, lse_ptr, r_ptr, delta_ptr, dkv_acc_ptr, stage_ptr,
    Skv: "i64", s0: "i64", Hq, topk, qk_scale, scale,
    stride_q_s, stride_q_h, stride_kv_s, stride_idx_s, stride_do_s, stride_do_h,
    HAS_TOPK_LEN: tl.constexpr, HAS_ROPE: tl.constexpr, DETERMINISTIC: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr,
):
    """Program (query s0 + program_id(0), index block program_id(1)). dkv_acc: float32 [Skv, Dqk];
    stage (deterministic): float32 [queries of this launch, topk, Dqk]."""
    s = s0 + tl.program_id(0).to(tl.int64)
    kb = tl.program_id(1)
    n = topk
    if HAS_TOPK_LEN:
        n = tl.minimum(tl.maximum(tl.load(topk_len_ptr + s), 0), topk)
    k_offs = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    slot, valid, main, rope = _gather(kv_ptr, idx_ptr + s * stride_idx_s, k_offs, n, Skv, stride_kv_s, HAS_ROPE)
    d = tl.arange(0, _D_MAIN)
    dr = tl.arange(0, _D_ROPE)
    dk_main = tl.zeros([BLOCK_K, _D_MAIN], tl.float32)
    dk_rope = tl.zeros([BLOCK_K, _D_ROPE], tl.float32)
    if kb * BLOCK_K < n:
        h0 = 0  # a while loop: the interpreter cannot range() to a runtime bound
        while h0 < Hq:
            heads = h0 + tl.arange(0, BLOCK_H)
            head_mask = heads < Hq
            q_main, q_rope, do = _load_q_block(q_ptr, dout_ptr, s, heads, head_mask, stride_q_s, stride_q_h,
                                               stride_do_s, stride_do_h, HAS_ROPE)
            rows = s * Hq + heads
            lse2 = tl.load(lse_ptr + rows, mask=head_mask, other=float("inf")) * 1.4426950408889634
            r = tl.load(r_ptr + rows, mask=head_mask, other=0.0)
            delta = tl.load(delta_ptr + rows, mask=head_mask, other=0.0)
            prob, dx = _logit_grads(q_main, q_rope, do, main, rope, valid, lse2, r, delta, qk_scale, HAS_ROPE,
                                    INTERP)
            dxt = _to_bf16(tl.trans(dx * scale), INTERP)
            dk_main += _dot(dxt, q_main, INTERP) + _dot(_to_bf16(tl.trans(prob * r[:, None]), INTERP), do, INTERP)
            if HAS_ROPE:
                dk_rope += _dot(dxt, q_rope, INTERP)
            h0 += BLOCK_H
    d_qk = _D_MAIN + _D_ROPE if HAS_ROPE else _D_MAIN
    if DETERMINISTIC:  # every position of the block, zeros for invalid ones: index_put_ sums them in order
        stage = stage_ptr + (tl.program_id(0).to(tl.int64) * topk + k_offs.to(tl.int64)) * d_qk
        in_topk = k_offs < topk
        tl.store(stage[:, None] + d[None, :], dk_main, mask=in_topk[:, None])
        if HAS_ROPE:
            tl.store(stage[:, None] + _D_MAIN + dr[None, :], dk_rope, mask=in_topk[:, None])
    else:
        acc = dkv_acc_ptr + tl.where(valid, slot, 0).to(tl.int64) * d_qk
        tl.atomic_add(acc[:, None] + d[None, :], dk_main, mask=valid[:, None], sem="relaxed")
        if HAS_ROPE:
            tl.atomic_add(acc[:, None] + _D_MAIN + dr[None, :], dk_rope, mask=valid[:, None], sem="relaxed")


def _block_h(num_heads: int) -> int:
    return 16 if num_heads <= 16 else 32


def prepare(a):
    """The launcher for every sparse_mla_prefill_backward call with the signature of args `a`."""
    q, indices = a.q, a.indices
    hq, dqk = q.shape[1], q.shape[2]
    topk = indices.shape[-1]
    interp = interpreted(sparse_mla_bwd_dq_kernel)
    has_rope = dqk > D_MAIN
    block_h, block_k = (16, 16) if interp else (_block_h(hq), 32)
    run_dq = KernelLauncher(sparse_mla_bwd_dq_kernel, 13, dict(
        HAS_SINK=a.attn_sink is not None, HAS_TOPK_LEN=a.topk_length is not None, HAS_ROPE=has_rope,
        HAS_DLSE=a.dlse is not None, BLOCK_H=block_h, BLOCK_K=block_k, INTERP=interp,
        TOPK_STATIC=topk if interp else 0), 8, 1)
    run_dkv = KernelLauncher(sparse_mla_bwd_dkv_kernel, 10, dict(
        HAS_TOPK_LEN=a.topk_length is not None, HAS_ROPE=has_rope, DETERMINISTIC=bool(a.deterministic),
        BLOCK_H=block_h, BLOCK_K=block_k, INTERP=interp), 8, 1)
    scale = float(a.scale)
    k_blocks = _cdiv(topk, block_k)

    def launch(a):
        dev, sq, skv = a.q.device, a.q.shape[0], a.kv.shape[0]
        r = torch.empty(sq, hq, dtype=torch.float32, device=dev)
        delta = torch.empty(sq, hq, dtype=torch.float32, device=dev)
        dsink_rows = torch.empty(sq, hq, dtype=torch.float32, device=dev) if a.attn_sink is not None else r
        sink = a.attn_sink if a.attn_sink is not None else r
        topk_len = a.topk_length if a.topk_length is not None else a.indices
        dlse = a.dlse if a.dlse is not None else a.lse
        run_dq((sq, _cdiv(hq, block_h)), (
            a.q, a.kv, a.indices, sink, topk_len, a.out, a.dout, a.lse, dlse, a.dq, r, delta, dsink_rows,
            skv, hq, topk, scale * LOG2E, scale, a.q.stride(0), a.q.stride(1), a.kv.stride(0), a.indices.stride(0),
            a.out.stride(0), a.out.stride(1), a.dout.stride(0), a.dout.stride(1), a.dq.stride(0), a.dq.stride(1)),
            dev)
        dkv_acc = torch.zeros(skv + 1, dqk, dtype=torch.float32, device=dev)  # + a row for invalid positions
        common = (hq, topk, scale * LOG2E, scale, a.q.stride(0), a.q.stride(1), a.kv.stride(0),
                  a.indices.stride(0), a.dout.stride(0), a.dout.stride(1))
        if not a.deterministic:
            run_dkv((sq, k_blocks), (a.q, a.kv, a.indices, topk_len, a.dout, a.lse, r, delta, dkv_acc, dkv_acc,
                                     skv, 0, *common), dev)
        else:
            rows = max(1, min(sq, _STAGE_BYTES // (topk * dqk * 4)))
            stage = torch.empty(rows, topk, dqk, dtype=torch.float32, device=dev)
            pos = torch.arange(topk, device=dev)
            for s0 in range(0, sq, rows):
                n = min(rows, sq - s0)
                run_dkv((n, k_blocks), (a.q, a.kv, a.indices, topk_len, a.dout, a.lse, r, delta, dkv_acc, stage,
                                        skv, s0, *common), dev)
                idx = a.indices[s0:s0 + n, 0, :]
                ok = (idx >= 0) & (idx < skv)
                if a.topk_length is not None:
                    ok &= pos[None, :] < a.topk_length[s0:s0 + n, None].clamp(0, topk)
                target = torch.where(ok, idx.to(torch.int64), skv).reshape(-1)
                # sorted, fixed-order accumulation of duplicates (torch's CUDA index_put_ with accumulate)
                dkv_acc.index_put_((target,), stage[:n].reshape(-1, dqk), accumulate=True)
        a.dkv.copy_(dkv_acc[:skv].view(skv, 1, dqk))
        if a.attn_sink is not None:
            torch.sum(dsink_rows, dim=0, out=a.d_attn_sink)
    return launch
