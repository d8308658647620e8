"""Context-parallel attention ops (DESIGN.md §2.4): each rank holds t_local tokens of a global
packed sequence in load-balanced order (head chunk, tail chunk) and gets back exactly what the
single-device op computes for those rows on the global sequence.

sparse_mla_prefill: indices address any global token, so the KV is all-gathered (its backward
would reduce-scatter) and put in global order; the local queries then run the single-device op.

window_attention moves only a halo (no all-gather of the sequence). Design, chosen for exactness
with the unmodified single-device op and no host sync:
* `layout.window_halo_plan` gives, per local chunk [c0, c1), the key range [k0, k1) it needs
  (k0 = c0 - L - 1, k1 = c1 + R, clipped to the sequence) and a query range [c0, k1) padded
  with k1 - c1 dummy rows. Both are pure functions of (cp, t_local, window), so every rank knows
  every peer's needs and the exchange (one all_to_all_single of K|V rows) has static sizes.
* Each chunk becomes a varlen sub-problem whose cu_seqlens are the global ones clipped to the
  query / key range (torch.clamp on the device where cu_seqlens lives: no sync). Because query
  and key ranges end at the same position, every clipped segment keeps the global window rule
  with the caller's (L, R) (proof in `window_halo_plan`); the one extra halo key on the left
  makes the key0 sink land either on the segment's true key 0 or on a key no real query sees.
* Both chunk problems are packed into ONE single-device call (their segments concatenated).

Costs (documented trade-offs for exactness and simplicity):
* up to R dummy query rows per chunk (outputs discarded), plus one copy of q and of the halo;
* an unbounded side degenerates to fetching everything on that side (the halo is then the whole
  prefix/suffix), and with R unbounded but L bounded the dummy rows reach the sequence end;
  with both sides unbounded there are no dummy rows (the window rule has no offset then).
* Tokens past cu_seqlens[-1] (CP padding at the global tail) are treated as one extra segment
  so every output row is written: identical to the single-device op with cu_seqlens + [T].
* cu_seqlens must satisfy cu_seqlens[-1] <= T; that is checked only when it is a list or a CPU
  tensor (checking a device tensor would sync).

Bytes moved are reported into an optional `stats` dict: send_bytes, recv_bytes (this rank's
payload) and all_gather_recv_bytes (what gathering the sequence would have received).
"""
from __future__ import annotations

import torch

from sinkops import _validate

from sinkops.cp.comm import all_gather_seq, exchange_halo, group_rank_and_size
from sinkops.cp.layout import gather_order, window_halo_plan


def _single_device_ops():
    from sinkops import ops  # late import: sinkops.ops registers torch.library ops on import

    return ops


def _check_local(name, t, t_local, ndim=3):
    if not isinstance(t, torch.Tensor) or t.dim() != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D tensor, got "
                         f"{getattr(t, 'shape', type(t).__name__)}")
    if t.shape[0] != t_local:
        raise ValueError(f"{name}: has {t.shape[0]} local tokens, q_local has {t_local}")


def _check_t_local(t_local):
    if t_local % 2:
        raise ValueError(f"q_local: t_local = {t_local} must be even (two load-balanced chunks "
                         f"of t_local/2); pad the global sequence to padded_length(T, cp)")


def _global_cu_seqlens(cu_seqlens, total, device):
    """int64 [B+2] on `device`: the caller's boundaries plus T, so tokens past the last segment
    (CP padding) form one more segment and every row is written."""
    if isinstance(cu_seqlens, torch.Tensor):
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1 or cu_seqlens.dtype not in (
                torch.int32, torch.int64):
            raise ValueError(f"cu_seqlens: expected int32 [B+1], got {cu_seqlens.dtype} "
                             f"{tuple(cu_seqlens.shape)}")
        cu = cu_seqlens
    else:
        cu = torch.tensor(list(cu_seqlens), dtype=torch.int64)
    if cu.device.type == "cpu":  # free to check here; on a device it would sync
        if int(cu[0]) != 0 or bool((cu[1:] < cu[:-1]).any()) or int(cu[-1]) > total:
            raise ValueError(f"cu_seqlens: must start at 0, be non-decreasing and end <= "
                             f"T = {total}, got {cu.tolist()[:16]}")
    cu = cu.to(device=device, dtype=torch.int64)
    return torch.cat([cu, torch.full((1,), total, dtype=torch.int64, device=device)])


def window_attention_from_halo(q_local, halo_k, halo_v, plan, cu_seqlens, window_left,
                               window_right, scale, sinks=None, sink_mode="key0",
                               backend="auto"):
    """The compute half of `window_attention`, given the halo (no communication): build both
    chunk sub-problems, run them in one single-device call, return (out_local, lse_local).
    halo_k / halo_v hold the keys of `plan.ranges` back to back in global order."""
    ops = _single_device_ops()
    t_local, hq, d = q_local.shape
    h = t_local // 2
    total = plan.cp_size * t_local
    cu = _global_cu_seqlens(cu_seqlens, total, q_local.device)
    q_parts, k_parts, v_parts, cu_q_parts, cu_k_parts = [], [], [], [], []
    q_rows = k_rows = max_q = max_k = 0
    real_rows = []
    for idx, p in enumerate(plan.problems):
        n_q, n_k = p.q_end - p.q_start, p.k_end - p.k_start
        q_parts.append(q_local.narrow(0, idx * h, h))
        if p.q_end > p.q_real_end:  # dummy rows: any finite value, their output is dropped
            q_parts.append(q_local.new_zeros((p.q_end - p.q_real_end, hq, d)))
        k_off = plan.halo_offset(p.k_start) if n_k else 0
        k_parts.append(halo_k.narrow(0, k_off, n_k))
        v_parts.append(halo_v.narrow(0, k_off, n_k))
        cu_q = torch.clamp(cu, p.q_start, p.q_end) - p.q_start + q_rows
        cu_k = torch.clamp(cu, p.k_start, p.k_end) - p.k_start + k_rows
        # the second problem's leading boundary equals the first one's last: drop it
        cu_q_parts.append(cu_q if idx == 0 else cu_q[1:])
        cu_k_parts.append(cu_k if idx == 0 else cu_k[1:])
        real_rows.append(q_rows)
        q_rows, k_rows = q_rows + n_q, k_rows + n_k
        max_q, max_k = max(max_q, n_q), max(max_k, n_k)
    out, lse = ops.window_attention(
        torch.cat(q_parts), torch.cat(k_parts), torch.cat(v_parts),
        torch.cat(cu_q_parts).to(torch.int32), torch.cat(cu_k_parts).to(torch.int32),
        max_q, max_k, window_size=(window_left, window_right), causal=False,
        softmax_scale=scale, sinks=sinks, sink_mode=sink_mode, return_lse=True, backend=backend)
    out_local = torch.cat([out.narrow(0, r, h) for r in real_rows])
    lse_local = torch.cat([lse.narrow(1, r, h) for r in real_rows], dim=1)
    return out_local, lse_local


def window_attention(q_local, k_local, v_local, cu_seqlens, window_size=(-1, -1), causal=False,
                     softmax_scale=None, sinks=None, sink_mode="key0", return_lse=False,
                     group=None, backend="auto", stats=None):
    """Context-parallel `sinkops.window_attention` (self-attention: cu_seqlens_q == _k).

    q_local [t_local, Hq, D], k_local [t_local, Hk, D], v_local [t_local, Hk, Dv]: this rank's
    rows in load-balanced order; cu_seqlens int32 [B+1] (tensor on any device, or a list) of the
    GLOBAL packed sequence of T = cp * t_local tokens. Returns out_local [t_local, Hq, Dv]
    (and lse_local [Hq, t_local]), equal to the single-device op's rows for this rank.
    Moves only the halo (see module docstring); `stats` (dict) receives the bytes moved.
    """
    rank, cp = group_rank_and_size(group)
    if not isinstance(q_local, torch.Tensor) or q_local.dim() != 3:
        raise ValueError(f"q_local: expected [t_local, Hq, D], got "
                         f"{getattr(q_local, 'shape', type(q_local).__name__)}")
    t_local, _, d = q_local.shape
    _check_t_local(t_local)
    _check_local("k_local", k_local, t_local)
    _check_local("v_local", v_local, t_local)
    if k_local.dtype != v_local.dtype or k_local.device != v_local.device:
        raise ValueError("k_local / v_local: must share dtype and device (sent as one message)")
    if v_local.shape[1] != k_local.shape[1]:
        raise ValueError(f"v_local: {v_local.shape[1]} heads, k_local has {k_local.shape[1]}")
    left, right = _validate.window_size(window_size, causal)
    scale = d ** -0.5 if softmax_scale is None else softmax_scale
    plan = window_halo_plan(cp, t_local, rank, left, right)
    hk, dk, dv = k_local.shape[1], k_local.shape[2], v_local.shape[2]
    # K and V travel as one [t_local, Hk*D + Hk*Dv] message per peer
    tokens = torch.cat([k_local.reshape(t_local, hk * dk), v_local.reshape(t_local, hk * dv)],
                       dim=1)
    halo = exchange_halo(tokens, plan, left, right, group=group, stats=stats)
    halo_k = halo[:, :hk * dk].reshape(-1, hk, dk)
    halo_v = halo[:, hk * dk:].reshape(-1, hk, dv)
    if stats is not None:
        row_bytes = tokens.shape[1] * tokens.element_size()
        stats["all_gather_recv_bytes"] = (cp - 1) * t_local * row_bytes
        stats["halo_tokens"] = plan.halo_tokens
    out, lse = window_attention_from_halo(q_local, halo_k, halo_v, plan, cu_seqlens, left, right,
                                          scale, sinks, sink_mode, backend)
    return (out, lse) if return_lse else out


def sparse_mla_prefill(q_local, kv_local, indices_local, sm_scale, d_v=512, attn_sink=None,
                       topk_length=None, group=None, backend="auto", stats=None):
    """Context-parallel `sinkops.sparse_mla_prefill`.

    q_local [t_local, Hq, Dqk], kv_local [t_local, 1, Dqk] in load-balanced order;
    indices_local int32 [t_local, 1, topk] hold GLOBAL token positions (< 0 or >= T invalid).
    The KV is all-gathered and put in global order, then the local queries run the
    single-device op. Returns (out_local, max_logits_local, lse_local).
    """
    ops = _single_device_ops()
    _, cp = group_rank_and_size(group)
    if not isinstance(kv_local, torch.Tensor) or kv_local.dim() != 3:
        raise ValueError(f"kv_local: expected [t_local, 1, Dqk], got "
                         f"{getattr(kv_local, 'shape', type(kv_local).__name__)}")
    t_local = kv_local.shape[0]
    _check_t_local(t_local)
    gathered = all_gather_seq(kv_local, group=group, dim=0)
    kv_global = gathered.index_select(0, gather_order(cp, t_local, kv_local.device))
    if stats is not None:
        moved = (cp - 1) * kv_local[0].numel() * kv_local.element_size() * t_local
        stats["send_bytes"] = stats.get("send_bytes", 0) + moved
        stats["recv_bytes"] = stats.get("recv_bytes", 0) + moved
        stats["all_gather_recv_bytes"] = moved
    return ops.sparse_mla_prefill(q_local, kv_global, indices_local, sm_scale, d_v=d_v,
                                  attn_sink=attn_sink, topk_length=topk_length, backend=backend)
