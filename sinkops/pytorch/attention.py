"""Vectorized PyTorch implementations of the three ops (see sinkops/pytorch/__init__.py)."""
from __future__ import annotations

import math

import torch

from sinkops import kv_cache

_BUDGET = 1 << 24  # elements of the largest temporary of one chunk (64 MiB in float32)
_NEG_INF = float("-inf")


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


class _OnlineSoftmax:
    """Softmax over keys arriving in chunks (natural-log units). m: running max (-inf until a
    visible key), l: sum of exp(x - m), acc: sum of exp(x - m) v. A row that never sees a key keeps
    m = -inf, and is shifted by 0 so no -inf - -inf appears."""

    def __init__(self, rows_shape, dv, dtype, device):
        self.m = torch.full(rows_shape, _NEG_INF, dtype=dtype, device=device)
        self.l = torch.zeros(rows_shape, dtype=dtype, device=device)
        self.acc = torch.zeros(*rows_shape, dv, dtype=dtype, device=device)

    def add(self, logits, visible, pv):
        """logits [*rows, C] with visible broadcastable to it; pv(p) -> p @ values as [*rows, dv]."""
        x = logits.masked_fill(~visible, _NEG_INF)
        m_new = torch.maximum(self.m, x.amax(dim=-1))
        shift = torch.where(m_new == _NEG_INF, torch.zeros_like(m_new), m_new)
        alpha = torch.exp(self.m - shift)
        p = torch.exp(x - shift.unsqueeze(-1))
        self.l = self.l * alpha + p.sum(dim=-1)
        self.acc = self.acc * alpha.unsqueeze(-1) + pv(p)
        self.m = m_new

    def finish(self, null_sink=None):
        """-> (out [*rows, dv], lse [*rows], max_logit [*rows]); null_sink broadcastable to the rows,
        folded into the denominator only (-inf: bitwise the no-sink result; +inf: a zero row)."""
        seen = self.m != _NEG_INF
        m = torch.where(seen, self.m, torch.zeros_like(self.m))
        l_safe = torch.where(seen, self.l, torch.ones_like(self.l))
        den = l_safe
        if null_sink is not None:
            s = null_sink.to(m.dtype)
            den = torch.where(s == _NEG_INF, l_safe, l_safe + torch.exp(s - m))
        out = torch.where(seen.unsqueeze(-1), self.acc / den.unsqueeze(-1), torch.zeros_like(self.acc))
        lse = torch.where(seen, m + torch.log(l_safe), torch.full_like(m, math.inf))
        return out, lse, self.m


# ------------------------------------------------------------------------------ window attention

def _segments(cu, total):
    """Clamped segment bounds (docs/DESIGN.md §2): start [B] and length [B], int64 on the device."""
    c = cu.to(torch.int64).clamp(0, total)
    start = c[:-1]
    return start, (torch.maximum(c[1:], start) - start)


def row_windows(r0, r1, q_start, q_len, k_start, k_len, left, right):
    """Packed rows [r0, r1) -> (row_ok: the row lies in a segment, ks: its segment's first key row,
    lo, hi: the segment positions of its first and last visible key; lo > hi when it sees none)."""
    t = torch.arange(r0, r1, device=q_start.device)
    b = (torch.searchsorted(q_start, t, right=True) - 1).clamp(min=0)
    i = t - q_start[b]
    row_ok = (i >= 0) & (i < q_len[b])
    sq, sk = q_len[b], k_len[b]
    diag = i + sk - sq
    lo = (diag - left).clamp(min=0) if left >= 0 else torch.zeros_like(diag)
    hi = torch.minimum(diag + right, sk - 1) if right >= 0 else sk - 1
    return row_ok, k_start[b], lo, hi


def key_chunk_logits(qc, k, v, row_ok, ks, lo, hi, c0, key_chunk, scale, key0_sinks):
    """Keys [lo + c0, lo + c0 + key_chunk) of each row (forward and backward): qc [R, Hk, G, D] ->
    (x [R, Hk, G, C] logits with the key0 bias when key0_sinks [Hq] is given, vis: visible (window,
    segment; -inf and +inf key0 sinks mask key 0: +inf rows are v_0, handled by the caller),
    is0 [R, C]: the segment's key 0, gk [R, C]: the key rows (clamped), kc, vc: the gathered keys)."""
    tk, hk = k.shape[0], k.shape[1]
    group = qc.shape[2]
    dev, cdt = qc.device, qc.dtype
    j = lo.unsqueeze(1) + c0 + torch.arange(key_chunk, device=dev)                     # [R, C] segment positions
    visible = (j <= hi.unsqueeze(1)) & row_ok.unsqueeze(1)
    gk = (ks.unsqueeze(1) + j).clamp(0, max(tk - 1, 0))
    # Keys a row does not see are zeroed: they may be another segment's or padding rows (NaN in
    # uninitialized memory), and a masked key still multiplies its V row by p = 0 (0 x NaN = NaN).
    seen = visible[:, :, None, None]
    kc = torch.where(seen, k[gk].to(cdt), torch.zeros((), dtype=cdt, device=dev))      # [R, C, Hk, D]
    vc = torch.where(seen, v[gk].to(cdt), torch.zeros((), dtype=cdt, device=dev))      # [R, C, Hk, Dv]
    x = torch.einsum("rhgd,rchd->rhgc", qc, kc) * scale
    vis = visible[:, None, None, :]
    is0 = (j == 0) & visible
    if key0_sinks is not None:  # bias the logit of the segment's key 0; an infinite sink masks it
        s0 = key0_sinks.view(hk, group)
        bias = torch.where(torch.isfinite(s0), s0, torch.zeros_like(s0))
        x = x + torch.where(is0[:, None, None, :], bias[None, :, :, None], torch.zeros((), dtype=cdt, device=dev))
        vis = vis & ~(is0[:, None, None, :] & torch.isinf(s0)[None, :, :, None])
    return x, vis, is0, gk, kc, vc


def window_attention(a) -> None:
    q, k, v, out, lse = a.q, a.k, a.v, a.out, a.lse
    tq, hq, d = q.shape
    tk, hk, dv = v.shape
    group = hq // hk
    cdt = _compute_dtype(q.dtype)
    dev = q.device
    left, right = a.window_left, a.window_right
    q_start, q_len = _segments(a.cu_seqlens_q, tq)
    k_start, k_len = _segments(a.cu_seqlens_k, tk)
    # Keys one row can see: a bounded window spans left + right + 1, else up to a segment's length.
    span = left + right + 1 if left >= 0 and right >= 0 else max(a.max_seqlen_k, 1)
    span = max(1, min(span, tk))
    key_chunk = min(span, 512)
    per_row = key_chunk * (hk * (d + dv) + 2 * hq)
    rows = max(1, min(tq, _BUDGET // per_row))
    sinks = None if a.sinks is None else a.sinks.to(cdt)
    mode = int(a.sink_mode)  # 0 none, 1 key0, 2 null
    for r0 in range(0, tq, rows):
        r1 = min(tq, r0 + rows)
        row_ok, ks, lo, hi = row_windows(r0, r1, q_start, q_len, k_start, k_len, left, right)
        qc = q[r0:r1].to(cdt).view(r1 - r0, hk, group, d)
        st = _OnlineSoftmax((r1 - r0, hk, group), dv, cdt, dev)
        key0_seen = None
        for c0 in range(0, span, key_chunk):
            s, vis, is0, _, kc, vc = key_chunk_logits(qc, k, v, row_ok, ks, lo, hi, c0, key_chunk, a.scale,
                                                      sinks if mode == 1 else None)
            if mode == 1:
                key0_seen = is0.any(dim=1) if key0_seen is None else key0_seen | is0.any(dim=1)
            st.add(s, vis, lambda p: torch.einsum("rhgc,rchd->rhgd", p, vc))
        o, l, _ = st.finish(sinks.view(hk, group) if mode == 2 else None)
        if mode == 1:  # +inf key0 sink: rows that see key 0 are exactly v_0, lse = +inf
            inf_row = key0_seen[:, None, None] & torch.isposinf(sinks.view(hk, group))[None]
            v0 = v[ks.clamp(0, max(tk - 1, 0))].to(cdt)                                  # [R, Hk, Dv]
            o = torch.where(inf_row.unsqueeze(-1), v0[:, :, None, :].expand_as(o), o)
            l = torch.where(inf_row, torch.full_like(l, math.inf), l)
        ok = row_ok[:, None, None]
        out[r0:r1] = torch.where(ok, o.reshape(r1 - r0, hq, dv).to(out.dtype), out[r0:r1])
        if lse is not None:
            lse[:, r0:r1] = torch.where(row_ok.view(1, -1), l.reshape(r1 - r0, hq).t().float(), lse[:, r0:r1])


# ------------------------------------------------------------------------------ sparse MLA

def _attend_gathered(q_rows, keys_fn, n_keys, d_v, scale, sink, dtype):
    """q_rows [R, Hq, Dqk]; keys_fn(c0, c1) -> (keys [R, C, Dqk], valid [R, C]) for key positions
    [c0, c1); values are keys[..., :d_v]. -> out, lse, max_logits."""
    r, hq, _ = q_rows.shape
    st = _OnlineSoftmax((r, hq), d_v, dtype, q_rows.device)
    chunk = max(1, min(n_keys, 1024))
    for c0 in range(0, n_keys, chunk):
        keys, valid = keys_fn(c0, min(n_keys, c0 + chunk))
        s = torch.einsum("rhd,rcd->rhc", q_rows, keys) * scale
        st.add(s, valid[:, None, :], lambda p: torch.einsum("rhc,rcd->rhd", p, keys[..., :d_v]))
    return st.finish(None if sink is None else sink.to(dtype).view(1, hq))


def _valid_positions(n, topk_length, rows, device):
    pos = torch.arange(n, device=device)
    if topk_length is None:
        return pos.new_ones(1, n, dtype=torch.bool)
    return pos.unsqueeze(0) < topk_length.to(torch.int64).clamp(0, n)[rows].unsqueeze(1)


def sparse_mla_prefill(a) -> None:
    q, kv, out = a.q, a.kv, a.out
    sq, hq, dqk = q.shape
    skv, topk, d_v = kv.shape[0], a.indices.shape[-1], out.shape[-1]
    cdt = _compute_dtype(q.dtype)
    kv2 = kv.view(skv, dqk) if kv.is_contiguous() else kv.reshape(skv, dqk)
    rows = max(1, min(sq, _BUDGET // (min(topk, 1024) * (dqk + 2 * hq))))
    for r0 in range(0, sq, rows):
        r1 = min(sq, r0 + rows)
        idx = a.indices[r0:r1, 0, :].to(torch.int64)
        in_len = _valid_positions(topk, a.topk_length, torch.arange(r0, r1, device=q.device), q.device)

        def keys(c0, c1, idx=idx, in_len=in_len):
            i = idx[:, c0:c1]
            valid = (i >= 0) & (i < skv) & in_len[:, c0:c1]
            return kv2[i.clamp(0, max(skv - 1, 0))].to(cdt), valid

        o, lse, m = _attend_gathered(q[r0:r1].to(cdt), keys, topk, d_v, a.scale, a.attn_sink, cdt)
        out[r0:r1] = o.to(out.dtype)
        a.lse[r0:r1] = lse.float()
        a.max_logits[r0:r1] = m.float()


def sparse_mla_decode(a) -> None:
    q, out = a.q, a.out
    b, s_q, hq, dqk = q.shape
    d_v = out.shape[-1]
    cdt = _compute_dtype(q.dtype)
    layout = a.layout.name
    pools = [(a.kv_cache, a.indices, a.topk_length)]
    if a.extra_kv_cache is not None:
        pools.append((a.extra_kv_cache, a.extra_indices, a.extra_topk_length))
    widths = [ind.shape[-1] for _, ind, _ in pools]
    n_keys = sum(widths)
    n_rows = b * s_q
    rows = max(1, min(n_rows, _BUDGET // (min(n_keys, 1024) * (dqk + 2 * hq))))
    qf = q.reshape(n_rows, hq, dqk)
    for r0 in range(0, n_rows, rows):
        r1 = min(n_rows, r0 + rows)
        batch_of_row = torch.arange(r0, r1, device=q.device) // s_q

        def keys(c0, c1, r0=r0, r1=r1, batch_of_row=batch_of_row):
            parts, valids, base = [], [], 0
            for (cache, indices, topk_length), w in zip(pools, widths):
                lo, hi = max(c0 - base, 0), min(c1 - base, w)
                if lo < hi:
                    slots = indices.reshape(n_rows, w)[r0:r1, lo:hi].to(torch.int64)
                    num_slots = cache.shape[0] * cache.shape[1]
                    valid = (slots >= 0) & (slots < num_slots)
                    valid &= _valid_positions(w, topk_length, batch_of_row, q.device)[:, lo:hi]
                    deq = kv_cache.dequantize_tokens(cache, layout, torch.where(valid, slots, -1))
                    parts.append(deq.view(r1 - r0, hi - lo, dqk).to(cdt))
                    valids.append(valid)
                base += w
            return torch.cat(parts, dim=1), torch.cat(valids, dim=1)

        o, lse, _ = _attend_gathered(qf[r0:r1].to(cdt), keys, n_keys, d_v, a.scale, a.attn_sink, cdt)
        out.view(n_rows, hq, d_v)[r0:r1] = o.to(out.dtype)
        rows_idx = torch.arange(r0, r1, device=q.device)
        a.lse[rows_idx // s_q, :, rows_idx % s_q] = lse.float()                          # lse is [B, Hq, Sq]
