"""Vectorized PyTorch backward of window attention and sparse MLA prefill (docs/DESIGN.md §6).

Like the forward (attention.py): no host sync, no per-segment loop, fixed-size chunks whose count
depends on shapes alone. From the saved (out, lse) each row gets (in float32, float64 for float64):
  r = 1 - p_sink = sigmoid(lse - s) in null mode, else 1 (0 on empty rows: lse = +inf),
  delta = r * <dout, out> - dlse,
and each visible logit x: Q = exp(x - lse) (lse's own probabilities), P = r Q (the output's),
  dX = Q (r dP - delta) with dP = <dout, v>,  dq += scale dX k,  dk += scale dX q,  dv += P dout.
The window backward's dk, dv accumulate with the sorted index_put_ (deterministic on every
device, as the design promises); sparse prefill's dkv with index_add_ (atomics on CUDA) unless the
call asks for determinism. The null sink's gradient is -sum_i p_sink(i) <dout_i, out_i>; key0's the sum of dX over
the key-0 column; a +inf key0 sink sends the dout of the rows it saturates to v_0.
"""
from __future__ import annotations

import torch

from sinkops.pytorch.attention import (_BUDGET, _compute_dtype, _segments, _valid_positions, key_chunk_logits,
                                       row_windows)

_INF = float("inf")


# The window backward is deterministic on every backend whatever the mode (docs/DESIGN.md §6): on
# CUDA, index_add_'s atomics changed dk's bits between two identical calls (the GPU suite caught it).
WINDOW_DETERMINISTIC = True


def _scatter_add(acc, index, values, deterministic):
    """acc[index[i]] += values[i]. Deterministic: torch's sorted index_put_ (a fixed order on CUDA
    too); else index_add_ (atomics on CUDA)."""
    if deterministic:
        acc.index_put_((index,), values, accumulate=True)
    else:
        acc.index_add_(0, index, values)


def _row_terms(out, dout, lse, dlse, sink, cdt):
    """Per-row (r, delta) as described above, and the null sink's per-row gradient -p_sink * D.
    out, dout [..., Dv]; lse, dlse [...] (rows); sink broadcastable to the rows or None."""
    lse = lse.to(cdt)
    seen = lse != _INF
    # rows that saw no key (or lie in no segment, out unwritten) take no gradient: mask, never multiply
    d = torch.where(seen, (dout.to(cdt) * out.to(cdt)).sum(dim=-1), torch.zeros_like(lse))
    g = torch.zeros_like(lse) if dlse is None else torch.where(seen, dlse.to(cdt), torch.zeros_like(lse))
    if sink is None:
        r = seen.to(cdt)
        dsink_rows = None
    else:
        s = sink.to(cdt).expand_as(lse)
        r = torch.where(seen, torch.sigmoid(lse - s), torch.zeros_like(lse))
        dsink_rows = -torch.where(seen, torch.sigmoid(s - lse), torch.zeros_like(lse)) * d
    return r, r * d - g, dsink_rows


def window_attention_backward(a) -> None:
    q, k, v = a.q, a.k, a.v
    tq, hq, d = q.shape
    tk, hk, dv = v.shape
    group = hq // hk
    cdt = _compute_dtype(q.dtype)
    dev = q.device
    left, right = a.window_left, a.window_right
    mode = int(a.sink_mode)  # 0 none, 1 key0, 2 null
    sinks = None if a.sinks is None else a.sinks.to(cdt)
    q_start, q_len = _segments(a.cu_seqlens_q, tq)
    k_start, k_len = _segments(a.cu_seqlens_k, tk)
    span = left + right + 1 if left >= 0 and right >= 0 else max(a.max_seqlen_k, 1)
    span = max(1, min(span, tk))
    key_chunk = min(span, 512)
    rows = max(1, min(tq, _BUDGET // (key_chunk * (hk * (d + dv) * 2 + 4 * hq))))
    dk = torch.zeros(tk, hk, d, dtype=cdt, device=dev)
    dv_acc = torch.zeros(tk, hk, dv, dtype=cdt, device=dev)
    dsinks = torch.zeros(hk, group, dtype=cdt, device=dev)
    s_rows = sinks.view(1, hk, group) if mode == 2 else None
    for r0 in range(0, tq, rows):
        r1 = min(tq, r0 + rows)
        n = r1 - r0
        row_ok, ks, lo, hi = row_windows(r0, r1, q_start, q_len, k_start, k_len, left, right)
        qc = q[r0:r1].to(cdt).view(n, hk, group, d)
        do = a.dout[r0:r1].to(cdt).view(n, hk, group, dv)
        oc = a.out[r0:r1].view(n, hk, group, dv)
        lse = a.lse[:, r0:r1].t().reshape(n, hk, group)
        lse = torch.where(row_ok[:, None, None], lse.to(cdt), torch.full_like(lse, _INF, dtype=cdt))
        dlse = None if a.dlse is None else a.dlse[:, r0:r1].t().reshape(n, hk, group)
        r, delta, dsink_rows = _row_terms(oc, do, lse, dlse, s_rows, cdt)
        dq = torch.zeros(n, hk, group, d, dtype=cdt, device=dev)
        key0_seen = torch.zeros(n, dtype=torch.bool, device=dev)
        for c0 in range(0, span, key_chunk):
            x, vis, is0, gk, kc, vc = key_chunk_logits(qc, k, v, row_ok, ks, lo, hi, c0, key_chunk, a.scale,
                                                       sinks if mode == 1 else None)
            if mode == 1:
                key0_seen |= is0.any(dim=1)
            # lse = +inf (empty or +inf-key0 rows) gives Q = 0: those rows add nothing here
            prob = torch.where(vis, torch.exp(x - lse.unsqueeze(-1)), torch.zeros((), dtype=cdt, device=dev))
            dp = torch.einsum("rhgd,rchd->rhgc", do, vc)
            dx = prob * (r.unsqueeze(-1) * dp - delta.unsqueeze(-1))
            dq += torch.einsum("rhgc,rchd->rhgd", dx, kc)
            flat = gk.reshape(-1)
            # A key a row does not see gets exactly nothing from it: gk clamps such keys onto other
            # segments' rows, and the row's own q / dout may be NaN (another segment, padding): 0 x NaN.
            seen = vis.any(dim=(1, 2))[:, :, None, None]                                 # [R, C, 1, 1]
            zero = torch.zeros((), dtype=cdt, device=dev)
            dk_part = torch.where(seen, torch.einsum("rhgc,rhgd->rchd", dx, qc), zero)
            dv_part = torch.where(seen, torch.einsum("rhgc,rhgd->rchd", prob * r.unsqueeze(-1), do), zero)
            _scatter_add(dk, flat, dk_part.reshape(-1, hk, d) * a.scale, WINDOW_DETERMINISTIC)
            _scatter_add(dv_acc, flat, dv_part.reshape(-1, hk, dv), WINDOW_DETERMINISTIC)
            if mode == 1:
                dsinks += torch.where(is0[:, None, None, :], dx, torch.zeros((), dtype=cdt, device=dev)).sum(dim=(0, 3))
        if mode == 1:  # +inf key0 sink: the rows that see key 0 output v_0, so v_0 takes their dout
            inf_row = (key0_seen[:, None, None] & torch.isposinf(sinks.view(hk, group))[None])
            _scatter_add(dv_acc, ks.clamp(0, max(tk - 1, 0)),
                         torch.where(inf_row[..., None], do, torch.zeros((), dtype=cdt, device=dev)).sum(dim=2),
                         WINDOW_DETERMINISTIC)
        if mode == 2:
            dsinks += dsink_rows.sum(dim=0)
        a.dq[r0:r1] = torch.where(row_ok[:, None, None], (dq * a.scale).reshape(n, hq, d), 0).to(a.dq.dtype)
    a.dk.copy_(dk)
    a.dv.copy_(dv_acc)
    if a.dsinks is not None:
        a.dsinks.copy_(dsinks.reshape(hq))


def sparse_mla_prefill_backward(a) -> None:
    q, kv = a.q, a.kv
    sq, hq, dqk = q.shape
    skv, topk, d_v = kv.shape[0], a.indices.shape[-1], a.out.shape[-1]
    cdt = _compute_dtype(q.dtype)
    dev = q.device
    kv2 = kv.reshape(skv, dqk)
    chunk = max(1, min(topk, 1024))
    rows = max(1, min(sq, _BUDGET // (chunk * (2 * dqk + 4 * hq))))
    dkv = torch.zeros(skv, dqk, dtype=cdt, device=dev)
    d_sink = torch.zeros(hq, dtype=cdt, device=dev)
    sink = None if a.attn_sink is None else a.attn_sink.view(1, hq)
    for r0 in range(0, sq, rows):
        r1 = min(sq, r0 + rows)
        idx = a.indices[r0:r1, 0, :].to(torch.int64)
        in_len = _valid_positions(topk, a.topk_length, torch.arange(r0, r1, device=dev), dev)
        qc = q[r0:r1].to(cdt)
        do = a.dout[r0:r1].to(cdt)
        lse = a.lse[r0:r1].to(cdt)
        r, delta, dsink_rows = _row_terms(a.out[r0:r1], do, lse, None if a.dlse is None else a.dlse[r0:r1], sink, cdt)
        dq = torch.zeros_like(qc)
        for c0 in range(0, topk, chunk):
            i = idx[:, c0:c0 + chunk]
            valid = (i >= 0) & (i < skv) & in_len[:, c0:c0 + chunk]
            safe = i.clamp(0, max(skv - 1, 0))
            keys = kv2[safe].to(cdt)                                                      # [R, C, Dqk]
            x = torch.einsum("rhd,rcd->rhc", qc, keys) * a.scale
            prob = torch.where(valid[:, None, :], torch.exp(x - lse.unsqueeze(-1)), torch.zeros((), dtype=cdt, device=dev))
            dp = torch.einsum("rhd,rcd->rhc", do, keys[..., :d_v])
            dx = prob * (r.unsqueeze(-1) * dp - delta.unsqueeze(-1))
            dq += torch.einsum("rhc,rcd->rhd", dx, keys)
            dkeys = torch.einsum("rhc,rhd->rcd", dx, qc) * a.scale
            dkeys[..., :d_v] += torch.einsum("rhc,rhd->rcd", prob * r.unsqueeze(-1), do)
            dkeys = torch.where(valid[..., None], dkeys, torch.zeros((), dtype=cdt, device=dev))
            _scatter_add(dkv, safe.reshape(-1), dkeys.reshape(-1, dqk), a.deterministic)
        a.dq[r0:r1] = (dq * a.scale).to(a.dq.dtype)
        if dsink_rows is not None:
            d_sink += dsink_rows.sum(dim=0)
    a.dkv.copy_(dkv.view(skv, 1, dqk))
    if a.d_attn_sink is not None:
        a.d_attn_sink.copy_(d_sink)
