"""Torch oracle for every sinkops op (DESIGN.md §1, §4).

Readable first, slow is fine: python loops over segments / batches, dense masks, and
explicit handling of every edge value. Tests and benchmarks call it with float64 inputs
(the oracle) and with ``compute_dtype=torch.bfloat16`` (the "same math done by torch in
the backend's dtype" baseline of the tolerance rule). It is not a backend: no op dispatches to
it, and backends never import it (CPU callers get the torch or SYCL backend).

Conventions shared by all ops:
* lse is the natural-log logsumexp over the keys a row sees (key0 bias included, null
  sink excluded); a row that sees no key outputs exactly 0 with lse = +inf
  (and max_logits = -inf for sparse MLA).
* null sink s: e^(s - rowmax) joins the softmax normaliser only — s = -inf adds exactly 0
  (a bitwise no-op) and s = +inf gives an exact zero row.
* key0 sink s: added (never scaled) to the logit of the segment's key 0; s = -inf masks
  key 0; s = +inf makes every row that sees key 0 output exactly v_0 (lse = +inf).
"""
from __future__ import annotations

import torch

from sinkops import kv_cache as _kv

_INF = float("inf")


# ----------------------------------------------------------------------------- shared core

def _resolve_compute_dtype(input_dtype: torch.dtype, compute_dtype: torch.dtype | None):
    """(compute dtype, stats dtype): float64 stays float64, everything else computes in float32
    unless a low-precision baseline dtype is asked for explicitly."""
    if compute_dtype is None:
        compute_dtype = torch.float64 if input_dtype == torch.float64 else torch.float32
    stats_dtype = torch.float64 if compute_dtype == torch.float64 else torch.float32
    return compute_dtype, stats_dtype


def _rows_per_chunk(n_keys: int, d: int) -> int:
    """Rows per chunk so that a [rows, n_keys, d] temporary stays near 32M elements: long
    benchmark cases then fit in memory without changing any result."""
    return max(1, (1 << 25) // max(1, n_keys * d))


def _masked_softmax_attend(logits: torch.Tensor, visible: torch.Tensor, values: torch.Tensor,
                           null_sink: torch.Tensor | None = None):
    """Masked softmax attention with an optional null sink.

    logits [..., Q, K], visible bool broadcastable to logits, values [..., K, Dv], null_sink
    broadcastable to [..., Q] (float32) -> (out [..., Q, Dv], lse [..., Q], max_logit [..., Q]),
    all in logits.dtype. Rows with no visible key: out exactly 0, lse = +inf, max_logit = -inf.
    The null sink only adds e^(s - max) to the normaliser: s = -inf adds exactly 0 (a bitwise
    no-op), s = +inf makes it inf (an exact zero row); lse never includes it.
    """
    visible = visible.expand(logits.shape)
    x = logits.masked_fill(~visible, -_INF)
    if x.shape[-1] > 0:
        row_max, empty = x.amax(dim=-1), ~visible.any(dim=-1)
    else:
        row_max = x.new_full(x.shape[:-1], -_INF)
        empty = torch.ones_like(row_max, dtype=torch.bool)
    # Shift empty rows by 0 instead of -inf so exp() sees -inf - 0 = -inf, never inf - inf = NaN.
    shift = torch.where(empty, torch.zeros_like(row_max), row_max)
    p = torch.exp(x - shift.unsqueeze(-1))
    denom = p.sum(dim=-1)
    denom_safe = torch.where(empty, torch.ones_like(denom), denom)
    lse = torch.where(empty, torch.full_like(row_max, _INF), shift + torch.log(denom_safe))
    if null_sink is not None:
        # Sink term in at least float32, rounded once to the compute dtype (a sink column in naive torch).
        acc = torch.promote_types(shift.dtype, torch.float32)
        sink_term = torch.exp(null_sink.to(acc) - shift.to(acc)).to(denom.dtype)
        denom_safe = denom_safe + sink_term
    p = p / denom_safe.unsqueeze(-1)  # normalize before PV, as naive torch softmax does
    out = torch.matmul(p, values.to(p.dtype))
    out = torch.where(empty.unsqueeze(-1), torch.zeros_like(out), out)
    return out, lse, row_max


# ----------------------------------------------------------------------------- window attention

def window_visibility(sq: int, sk: int, window_left: int, window_right: int, device=None) -> torch.Tensor:
    """bool [sq, sk]: query i sees key j iff i + sk - sq - left <= j <= i + sk - sq + right
    (flash-attention convention; -1 means that side is unbounded)."""
    i = torch.arange(sq, device=device).unsqueeze(1)
    j = torch.arange(sk, device=device).unsqueeze(0)
    diag = i + sk - sq
    visible = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if window_left >= 0:
        visible &= j >= diag - window_left
    if window_right >= 0:
        visible &= j <= diag + window_right
    return visible


def _window_segment(q, k, v, visible, scale, sinks, sink_mode, compute_dtype):
    """One packed segment, all heads at once. q [sq,Hq,D], k [sk,Hk,D], v [sk,Hk,Dv] (already in
    compute_dtype) -> out [sq,Hq,Dv], lse [Hq,sq] in compute_dtype."""
    sq, hq, _ = q.shape
    sk, hk, dv = v.shape
    group = hq // hk
    qh = q.permute(1, 0, 2)                                   # [Hq, sq, D]
    kh = k.permute(1, 0, 2).repeat_interleave(group, dim=0)   # [Hq, sk, D]: head h reads h // group
    vh = v.permute(1, 0, 2).repeat_interleave(group, dim=0)   # [Hq, sk, Dv]
    logits = torch.matmul(qh, kh.transpose(1, 2)) * scale     # [Hq, sq, sk]
    vis = visible.unsqueeze(0).expand(hq, sq, sk).clone()

    key0_posinf_rows = None
    if sinks is not None and sink_mode == "key0" and sk > 0:
        # The bias is added in at least float32 then rounded, like a kernel holding it in a register.
        acc = torch.promote_types(logits.dtype, torch.float32)
        s = sinks.to(acc)
        finite = torch.isfinite(s)
        col0 = logits[:, :, 0].to(acc) + torch.where(finite, s, torch.zeros_like(s)).unsqueeze(1)
        logits[:, :, 0] = col0.to(logits.dtype)
        # -inf masks key 0; +inf: compute the other rows without key 0, then override below.
        vis[:, :, 0] &= finite.unsqueeze(1)
        key0_posinf_rows = torch.isposinf(s).unsqueeze(1) & visible[:, 0].unsqueeze(0)  # [Hq, sq]

    null_sink = sinks.unsqueeze(1) if sinks is not None and sink_mode == "null" else None
    out, lse, _ = _masked_softmax_attend(logits, vis, vh, null_sink)  # [Hq, sq, Dv], [Hq, sq]

    if key0_posinf_rows is not None:
        v0 = vh[:, 0, :].unsqueeze(1).expand(hq, sq, dv)
        out = torch.where(key0_posinf_rows.unsqueeze(-1), v0, out)
        lse = torch.where(key0_posinf_rows, torch.full_like(lse, _INF), lse)
    return out.permute(1, 0, 2), lse


def _window_setup(q, cu_seqlens_q, cu_seqlens_k, window_size, causal, softmax_scale, sinks, sink_mode):
    """The window op's arguments as both directions use them -> (sinks or None, left, right, scale,
    cu_seqlens_k)."""
    if sink_mode not in ("key0", "null", "none"):
        raise ValueError(f"sink_mode must be 'key0', 'null' or 'none', got {sink_mode!r}")
    if sink_mode == "none":
        sinks = None
    if cu_seqlens_k is None:
        cu_seqlens_k = cu_seqlens_q
    left, right = int(window_size[0]), int(window_size[1])
    if causal:
        right = 0
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    return sinks, left, right, scale, cu_seqlens_k


def _segments(cu_seqlens_q, cu_seqlens_k, tq, tk):
    """(q0, q1, k0, k1) of every segment with queries and keys: bounds clamped to the packed tensors
    (DESIGN.md §2), a decreasing segment is empty."""
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ck = [int(x) for x in cu_seqlens_k.tolist()]
    for b in range(len(cq) - 1):
        q0 = min(max(cq[b], 0), tq)
        q1 = min(max(cq[b + 1], q0), tq)
        k0 = min(max(ck[b], 0), tk)
        k1 = min(max(ck[b + 1], k0), tk)
        if q1 > q0 and k1 > k0:  # else no key: rows stay out 0, lse +inf whatever the sink
            yield q0, q1, k0, k1


def window_attention(q, k, v, cu_seqlens_q, cu_seqlens_k=None, window_size=(-1, -1), causal=False,
                     softmax_scale=None, sinks=None, sink_mode="key0", compute_dtype=None):
    """Varlen windowed attention with sinks (DESIGN.md §2.1).

    q [Tq,Hq,D], k [Tk,Hk,D], v [Tk,Hk,Dv], cu_seqlens_* int [B+1], sinks f32 [Hq] | None,
    sink_mode "key0" | "null" | "none". -> (out [Tq,Hq,Dv] in q.dtype, lse [Hq,Tq] float32,
    or float64 when computing in float64).
    """
    sinks, left, right, scale, cu_seqlens_k = _window_setup(q, cu_seqlens_q, cu_seqlens_k, window_size, causal,
                                                            softmax_scale, sinks, sink_mode)
    cdt, sdt = _resolve_compute_dtype(q.dtype, compute_dtype)
    tq, hq, _ = q.shape
    dv = v.shape[-1]
    if hq % k.shape[1] != 0:
        raise ValueError(f"Hq={hq} must be a multiple of Hk={k.shape[1]}")

    if sinks is not None:
        sinks = sinks.to(q.device)
    out = torch.zeros(tq, hq, dv, dtype=cdt, device=q.device)
    lse = torch.full((hq, tq), _INF, dtype=cdt, device=q.device)
    for q0, q1, k0, k1 in _segments(cu_seqlens_q, cu_seqlens_k, tq, k.shape[0]):
        sq, sk = q1 - q0, k1 - k0
        visible = window_visibility(sq, sk, left, right, device=q.device)
        kb, vb = k[k0:k1].to(cdt), v[k0:k1].to(cdt)
        # Query-row chunks keep the dense [Hq, rows, sk] logits small for long benchmark segments.
        step = _rows_per_chunk(hq * sk, 1)
        for r0 in range(0, sq, step):
            r1 = min(sq, r0 + step)
            o, l = _window_segment(q[q0 + r0:q0 + r1].to(cdt), kb, vb, visible[r0:r1], scale, sinks, sink_mode, cdt)
            out[q0 + r0:q0 + r1] = o
            lse[:, q0 + r0:q0 + r1] = l
    return out.to(q.dtype), lse.to(sdt)


# ----------------------------------------------------------------------------- sparse MLA

def _sparse_attend(q, keys, valid, d_v, scale, sink):
    """q [N,Hq,Dqk], keys [N,K,Dqk], valid bool [N,K] (all in one compute dtype), sink f32 [Hq] | None.
    Values are keys[..., :d_v] (K == V storage). -> out [N,Hq,d_v], max_logits [N,Hq], lse [N,Hq]."""
    logits = torch.matmul(q, keys.transpose(1, 2)) * scale         # [N, Hq, K]
    null_sink = sink.unsqueeze(0) if sink is not None else None
    out, lse, max_logits = _masked_softmax_attend(logits, valid.unsqueeze(1), keys[..., :d_v], null_sink)
    return out, max_logits, lse


def _prefill_setup(q, kv, indices, attn_sink, topk_length):
    """Both directions' view of a prefill call -> (attn_sink on q's device or None, indices int64
    [Sq, topk], valid [Sq, topk]: inside the pool and within topk_length, kv as [Skv, Dqk])."""
    skv = kv.shape[0]
    idx = indices.reshape(indices.shape[0], -1).long()
    valid = (idx >= 0) & (idx < skv)
    if topk_length is not None:
        valid &= torch.arange(idx.shape[1], device=q.device).unsqueeze(0) < topk_length.to(q.device).long().unsqueeze(1)
    return (None if attn_sink is None else attn_sink.to(q.device)), idx, valid, kv.reshape(skv, -1)


def sparse_mla_prefill(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None,
                       compute_dtype=None):
    """Sparse MLA prefill with a null sink (DESIGN.md §2.2).

    q [Sq,Hq,Dqk], kv [Skv,1,Dqk], indices int [Sq,1,topk] (<0 or >= Skv invalid; duplicates count
    each time), topk_length int [Sq] | None. -> (out [Sq,Hq,d_v] q.dtype, max_logits [Sq,Hq], lse [Sq,Hq]).
    """
    cdt, sdt = _resolve_compute_dtype(q.dtype, compute_dtype)
    sq, hq, dqk = q.shape
    skv, topk = kv.shape[0], indices.shape[-1]
    attn_sink, idx, valid, kv2 = _prefill_setup(q, kv, indices, attn_sink, topk_length)
    out = torch.empty(sq, hq, d_v, dtype=cdt, device=q.device)
    max_logits = torch.empty(sq, hq, dtype=cdt, device=q.device)
    lse = torch.empty(sq, hq, dtype=cdt, device=q.device)
    step = _rows_per_chunk(topk, dqk)
    for r0 in range(0, sq, step):
        r1 = min(sq, r0 + step)
        safe = torch.where(valid[r0:r1], idx[r0:r1], torch.zeros_like(idx[r0:r1]))
        keys = kv2[safe].to(cdt) if skv > 0 else q.new_zeros(r1 - r0, topk, dqk, dtype=cdt)
        o, m, l = _sparse_attend(q[r0:r1].to(cdt), keys, valid[r0:r1], d_v, sm_scale, attn_sink)
        out[r0:r1], max_logits[r0:r1], lse[r0:r1] = o, m, l
    return out.to(q.dtype), max_logits.to(sdt), lse.to(sdt)


def _decode_pool(kv_cache, indices_b, topk_length_b, layout):
    """Dequantized keys [Sq, K, D] float32 and valid [Sq, K] for one batch element of one pool."""
    num_slots = kv_cache.shape[0] * kv_cache.shape[1]
    idx = indices_b.long()                                          # [Sq, K]
    valid = (idx >= 0) & (idx < num_slots)
    if topk_length_b is not None:
        valid &= torch.arange(idx.shape[1], device=idx.device).unsqueeze(0) < topk_length_b
    safe = torch.where(valid, idx, torch.zeros_like(idx))
    keys = _kv.dequantize_tokens(kv_cache, layout, safe.reshape(-1)).reshape(*idx.shape, -1)
    return keys, valid


def sparse_mla_decode(q, kv_cache, indices, sm_scale, attn_sink=None, topk_length=None, layout="v4",
                      extra_kv_cache=None, extra_indices=None, extra_topk_length=None,
                      compute_dtype=None):
    """Sparse MLA decode over a paged FP8 cache (DESIGN.md §2.3), main + extra pool in one softmax.

    q [B,Sq,Hq,Dqk], kv_cache uint8 [num_blocks, block_size, 1, bytes_per_token] (read through
    stride(0)), indices int [B,Sq,topk] (slot = block*block_size + offset), topk_length int [B] | None.
    -> (out [B,Sq,Hq,512] q.dtype, lse [B,Hq,Sq]).
    """
    cdt, sdt = _resolve_compute_dtype(q.dtype, compute_dtype)
    b, sq, hq, dqk = q.shape
    d_v = 512
    attn_sink = None if attn_sink is None else attn_sink.to(q.device)
    if _kv.token_dim(layout) != dqk:
        raise ValueError(f"layout {layout!r} stores {_kv.token_dim(layout)} channels, q has {dqk}")
    out = torch.empty(b, sq, hq, d_v, dtype=cdt, device=q.device)
    lse = torch.empty(b, hq, sq, dtype=cdt, device=q.device)
    for bi in range(b):
        keys, valid = _decode_pool(kv_cache, indices[bi], None if topk_length is None else topk_length[bi],
                                   layout)
        if extra_kv_cache is not None:
            ek, ev = _decode_pool(extra_kv_cache, extra_indices[bi],
                                  None if extra_topk_length is None else extra_topk_length[bi], layout)
            keys, valid = torch.cat([keys, ek], dim=1), torch.cat([valid, ev], dim=1)
        # Dequantized values are exact in bf16 (e4m3 * power-of-two scale), so a low-precision
        # baseline sees the same keys as the kernel would.
        o, _, l = _sparse_attend(q[bi].to(cdt), keys.to(cdt), valid, d_v, sm_scale, attn_sink)
        out[bi], lse[bi] = o, l.transpose(0, 1)
    return out.to(q.dtype), lse.to(sdt)


# ----------------------------------------------------------------------------- backward (DESIGN.md §6)

def _attention_grads(logits, visible, values, dout, dlse, null_sink=None):
    """The exact gradient of _masked_softmax_attend, recomputed from scratch (nothing saved).

    logits [..., Q, K] (key0 bias included), visible bool broadcastable to them, values [..., K, Dv],
    dout [..., Q, Dv], dlse [..., Q] | None (the gradient of the returned lse, sink excluded),
    null_sink broadcastable to [..., Q] | None -> (dlogits [..., Q, K], dvalues [..., K, Dv],
    dsink_rows [..., Q]: the null sink's gradient per row, 0 without one).

    With Q = softmax over the visible keys (lse's own probabilities), r = 1 - p_sink, P = r Q
    (the output's probabilities) and D = <dout, out>:  dX = Q (r (dP - D) + dlse),
    dV = P^T dout, dsink = -p_sink D. Empty rows (lse = +inf, a constant) contribute nothing.
    """
    visible = visible.expand(logits.shape)
    x = logits.masked_fill(~visible, -_INF)
    empty = ~visible.any(dim=-1) if x.shape[-1] > 0 else torch.ones(x.shape[:-1], dtype=torch.bool,
                                                                   device=x.device)
    row_max = x.amax(dim=-1) if x.shape[-1] > 0 else x.new_full(x.shape[:-1], -_INF)
    shift = torch.where(empty, torch.zeros_like(row_max), row_max)
    e = torch.exp(x - shift.unsqueeze(-1))
    l_safe = torch.where(empty, torch.ones_like(shift), e.sum(dim=-1))
    probs = e / l_safe.unsqueeze(-1)                                  # Q, exactly 0 on empty rows
    if null_sink is not None:
        lse = shift + torch.log(l_safe)
        s = null_sink.to(lse.dtype).expand(lse.shape)
        # p_sink = e^s / (e^s + sum e^x) = sigmoid(s - lse): exact at s = -inf (0) and +inf (1)
        p_sink = torch.where(empty, torch.zeros_like(lse), torch.sigmoid(s - lse))
        r = torch.where(empty, torch.zeros_like(lse), torch.sigmoid(lse - s))
    else:
        p_sink = torch.zeros_like(shift)
        r = torch.where(empty, torch.zeros_like(shift), torch.ones_like(shift))
    p = probs * r.unsqueeze(-1)
    vals = values.to(p.dtype)
    out = torch.matmul(p, vals)
    d_row = (dout * out).sum(dim=-1)                                  # D
    dp = torch.matmul(dout, vals.transpose(-1, -2))
    g = torch.zeros_like(shift) if dlse is None else torch.where(empty, torch.zeros_like(shift), dlse.to(shift.dtype))
    dlogits = probs * (r.unsqueeze(-1) * (dp - d_row.unsqueeze(-1)) + g.unsqueeze(-1))
    dvalues = torch.matmul(p.transpose(-1, -2), dout)
    return dlogits, dvalues, -p_sink * d_row


def _window_segment_grads(q, k, v, dout, dlse, visible, scale, sinks, sink_mode):
    """One segment, all heads. q [sq,Hq,D], k [sk,Hk,D], v [sk,Hk,Dv], dout [sq,Hq,Dv], dlse [Hq,sq] | None
    (compute dtype) -> dq [sq,Hq,D], dk [sk,Hk,D], dv [sk,Hk,Dv], dsinks [Hq]."""
    sq, hq, _ = q.shape
    sk, hk, dv_dim = v.shape
    group = hq // hk
    qh = q.permute(1, 0, 2)
    kh = k.permute(1, 0, 2).repeat_interleave(group, dim=0)
    vh = v.permute(1, 0, 2).repeat_interleave(group, dim=0)
    do = dout.permute(1, 0, 2)                                        # [Hq, sq, Dv]
    logits = torch.matmul(qh, kh.transpose(1, 2)) * scale
    vis = visible.unsqueeze(0).expand(hq, sq, sk).clone()
    inf_rows = None
    if sinks is not None and sink_mode == "key0":
        s = sinks.to(logits.dtype)
        finite = torch.isfinite(s)
        logits[:, :, 0] += torch.where(finite, s, torch.zeros_like(s)).unsqueeze(1)
        vis[:, :, 0] &= finite.unsqueeze(1)
        # +inf: out = v_0 exactly on the rows that see key 0, so dv_0 takes their dout and nothing
        # else gets a gradient from them (P is one-hot; lse is the constant +inf there)
        inf_rows = torch.isposinf(s).unsqueeze(1) & visible[:, 0].unsqueeze(0)      # [Hq, sq]
        do = torch.where(inf_rows.unsqueeze(-1), torch.zeros_like(do), do)
        if dlse is not None:
            dlse = torch.where(inf_rows, torch.zeros_like(dlse), dlse)
    null_sink = sinks.unsqueeze(1) if sinks is not None and sink_mode == "null" else None
    dx, dvh, dsink_rows = _attention_grads(logits, vis, vh, do, dlse, null_sink)
    if inf_rows is not None:
        dvh[:, 0, :] += torch.where(inf_rows.unsqueeze(-1), dout.permute(1, 0, 2), torch.zeros_like(do)).sum(dim=1)
    dq = torch.matmul(dx, kh) * scale                                 # [Hq, sq, D]
    dkh = torch.matmul(dx.transpose(1, 2), qh) * scale                # [Hq, sk, D]
    dk = dkh.view(hk, group, sk, -1).sum(dim=1).permute(1, 0, 2)
    dv = dvh.view(hk, group, sk, dv_dim).sum(dim=1).permute(1, 0, 2)
    if sink_mode == "key0" and sinks is not None:
        dsinks = dx[:, :, 0].sum(dim=1)                               # masked / +inf: exactly 0
    elif null_sink is not None:
        dsinks = dsink_rows.sum(dim=1)
    else:
        dsinks = torch.zeros(hq, dtype=dq.dtype, device=dq.device)
    return dq.permute(1, 0, 2), dk, dv, dsinks


def window_attention_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k=None, window_size=(-1, -1), causal=False,
                              softmax_scale=None, sinks=None, sink_mode="key0", dlse=None, compute_dtype=None):
    """The exact gradient of window_attention (DESIGN.md §6), recomputed from the inputs.

    dout [Tq,Hq,Dv], dlse [Hq,Tq] | None (the gradient of the returned lse; ignored where lse is
    +inf) -> (dq, dk, dv in the inputs' dtypes, dsinks float32/64 [Hq] or None without sinks).
    """
    sinks, left, right, scale, cu_seqlens_k = _window_setup(q, cu_seqlens_q, cu_seqlens_k, window_size, causal,
                                                            softmax_scale, sinks, sink_mode)
    cdt, sdt = _resolve_compute_dtype(q.dtype, compute_dtype)
    tq, hq, _ = q.shape
    tk = k.shape[0]
    sinks = None if sinks is None else sinks.to(q.device)
    dq = torch.zeros(q.shape, dtype=cdt, device=q.device)
    dk = torch.zeros(k.shape, dtype=cdt, device=q.device)
    dv = torch.zeros(v.shape, dtype=cdt, device=q.device)
    dsinks = torch.zeros(hq, dtype=cdt, device=q.device)
    for q0, q1, k0, k1 in _segments(cu_seqlens_q, cu_seqlens_k, tq, tk):
        visible = window_visibility(q1 - q0, k1 - k0, left, right, device=q.device)
        g_lse = None if dlse is None else dlse[:, q0:q1].to(cdt)
        gq, gk, gv, gs = _window_segment_grads(q[q0:q1].to(cdt), k[k0:k1].to(cdt), v[k0:k1].to(cdt),
                                               dout[q0:q1].to(cdt), g_lse, visible, scale, sinks, sink_mode)
        dq[q0:q1] += gq
        dk[k0:k1] += gk
        dv[k0:k1] += gv
        dsinks += gs
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None if sinks is None else dsinks.to(sdt)


def sparse_mla_prefill_backward(dout, q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None,
                                dlse=None, compute_dtype=None):
    """The exact gradient of sparse_mla_prefill (DESIGN.md §6): dout [Sq,Hq,d_v], dlse [Sq,Hq] | None
    (max_logits has no gradient) -> (dq [Sq,Hq,Dqk], dkv [Skv,1,Dqk] summed over every query and
    duplicate index that reads a row, d attn_sink [Hq] or None)."""
    cdt, sdt = _resolve_compute_dtype(q.dtype, compute_dtype)
    sq, hq, dqk = q.shape
    skv, topk = kv.shape[0], indices.shape[-1]
    attn_sink, idx, valid, kv2 = _prefill_setup(q, kv, indices, attn_sink, topk_length)
    dq = torch.zeros(q.shape, dtype=cdt, device=q.device)
    dkv = torch.zeros(skv, dqk, dtype=cdt, device=q.device)
    dsink = torch.zeros(hq, dtype=cdt, device=q.device)
    step = _rows_per_chunk(topk, dqk)
    for r0 in range(0, sq, step):
        r1 = min(sq, r0 + step)
        ok = valid[r0:r1]
        safe = torch.where(ok, idx[r0:r1], torch.zeros_like(idx[r0:r1]))
        keys = kv2[safe].to(cdt) if skv > 0 else q.new_zeros(r1 - r0, topk, dqk, dtype=cdt)
        qc = q[r0:r1].to(cdt)
        logits = torch.matmul(qc, keys.transpose(1, 2)) * sm_scale  # [N, Hq, K]
        g_lse = None if dlse is None else dlse[r0:r1].to(cdt)
        null_sink = None if attn_sink is None else attn_sink.unsqueeze(0)
        dx, dvals, dsink_rows = _attention_grads(logits, ok.unsqueeze(1), keys[..., :d_v], dout[r0:r1].to(cdt),
                                                 g_lse, null_sink)
        dq[r0:r1] = torch.matmul(dx, keys) * sm_scale
        dkeys = torch.matmul(dx.transpose(1, 2), qc) * sm_scale     # [N, K, Dqk]
        dkeys[..., :d_v] += dvals
        dkeys = torch.where(ok.unsqueeze(-1), dkeys, torch.zeros_like(dkeys))
        if skv > 0:
            dkv.index_add_(0, safe.reshape(-1), dkeys.reshape(-1, dqk))
        dsink += dsink_rows.sum(dim=0)
    return (dq.to(q.dtype), dkv.view(skv, 1, dqk).to(kv.dtype),
            None if attn_sink is None else dsink.to(sdt))
