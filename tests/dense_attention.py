"""An independent, differentiable dense formulation of both training ops, for checking the oracle's
backward (sinkops.reference.*_backward) against torch autograd.

Nothing here shares code or structure with sinkops.reference: window attention is one dense
[Hq, Tq, Tk] problem over the whole packed sequence (segment ids and the window rule as one mask,
the key-0 bias placed by segment starts), and sparse MLA is dense over every KV row with
multiplicities (how many valid index positions of a query name that row), not a gather.
Finite sinks and -inf only: autograd through +inf is not defined (those edge values are checked
against their stated limits instead).
"""
from __future__ import annotations

import torch

_INF = float("inf")


def _softmax_parts(x, weight=None, null_sink=None):
    """x [..., Q, K] with -inf where invisible; weight [..., Q, K] multiplicities or None;
    null_sink [..., Q] or None -> (p [..., Q, K] over the keys, lse [..., Q] excl. the sink)."""
    m = x.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(x - m)
    if weight is not None:
        e = e * weight
    total = e.sum(dim=-1)
    empty = total == 0
    denom = total
    if null_sink is not None:
        denom = denom + torch.exp(null_sink - m.squeeze(-1))
    p = e / torch.where(denom == 0, torch.ones_like(denom), denom).unsqueeze(-1)
    lse = torch.where(empty, torch.full_like(total, _INF),
                      m.squeeze(-1) + torch.log(torch.where(empty, torch.ones_like(total), total)))
    return p, lse


def window_attention(q, k, v, cu_q, cu_k, window, scale, sinks, sink_mode):
    """q [Tq,Hq,D], k [Tk,Hk,D], v [Tk,Hk,Dv], sorted cu_seqlens -> (out [Tq,Hq,Dv], lse [Hq,Tq])."""
    tq, hq, _ = q.shape
    tk, hk, _ = k.shape
    cq, ck = cu_q.long().cpu(), cu_k.long().cpu()
    seg_q = torch.bucketize(torch.arange(tq), cq[1:], right=True)        # segment of each query row
    seg_k = torch.bucketize(torch.arange(tk), ck[1:], right=True)
    pos_q = torch.arange(tq) - cq[seg_q.clamp(max=len(cq) - 2)]
    pos_k = torch.arange(tk) - ck[seg_k.clamp(max=len(ck) - 2)]
    len_q, len_k = (cq[1:] - cq[:-1]), (ck[1:] - ck[:-1])
    nseg = len(cq) - 1
    in_q, in_k = seg_q < nseg, seg_k < nseg
    same = (seg_q[:, None] == seg_k[None, :]) & in_q[:, None] & in_k[None, :]
    off = (len_k[seg_k.clamp(max=nseg - 1)][None, :] - len_q[seg_q.clamp(max=nseg - 1)][:, None])
    rel = pos_k[None, :] - pos_q[:, None] - off                            # j - (i + sk - sq)
    vis = same.clone()
    if window[0] >= 0:
        vis &= rel >= -window[0]
    if window[1] >= 0:
        vis &= rel <= window[1]
    vis = vis.to(q.device)
    kh = k.repeat_interleave(hq // hk, dim=1)
    vh = v.repeat_interleave(hq // hk, dim=1)
    x = torch.einsum("qhd,khd->hqk", q, kh) * scale
    if sinks is not None and sink_mode == "key0":
        first = (pos_k == 0).to(q.device)[None, None, :].expand_as(x)
        x = torch.where(first, x + sinks.view(hq, 1, 1).to(x.dtype), x)
    x = x.masked_fill(~vis, -_INF)
    null = sinks.view(hq, 1).to(x.dtype).expand(hq, tq) if sinks is not None and sink_mode == "null" else None
    p, lse = _softmax_parts(x, null_sink=null)
    out = torch.einsum("hqk,khd->qhd", p, vh)
    return out, lse


def sparse_mla_prefill(q, kv, indices, scale, d_v, attn_sink, topk_length):
    """q [Sq,Hq,Dqk], kv [Skv,1,Dqk], indices [Sq,1,topk] -> (out [Sq,Hq,d_v], lse [Sq,Hq])."""
    sq, hq, _ = q.shape
    skv = kv.shape[0]
    idx = indices.reshape(sq, -1).long().cpu()
    ok = (idx >= 0) & (idx < skv)
    if topk_length is not None:
        ok &= torch.arange(idx.shape[1])[None, :] < topk_length.long().cpu()[:, None]
    count = torch.zeros(sq, skv + 1, dtype=q.dtype)
    count.scatter_add_(1, torch.where(ok, idx, skv), torch.ones_like(idx, dtype=q.dtype))
    count = count[:, :skv].to(q.device)                                      # multiplicity of each row
    keys = kv.reshape(skv, -1)
    x = torch.einsum("shd,kd->shk", q, keys) * scale
    x = x.masked_fill((count == 0)[:, None, :], -_INF)
    null = attn_sink.view(1, hq).to(x.dtype).expand(sq, hq) if attn_sink is not None else None
    p, lse = _softmax_parts(x, count[:, None, :].expand_as(x), null)
    out = torch.einsum("shk,kd->shd", p, keys[:, :d_v])
    return out, lse
