"""Exact merge of partial attention results computed over disjoint key sets (DESIGN.md §1).

Layout: ``out_i [..., H, D]`` and ``lse_i [..., H]`` — lse has the leading dims of out minus the
last one. Window attention returns lse as ``[Hq, Tq]``: pass ``lse.transpose(0, 1)``; sparse MLA
decode returns ``[B, Hq, Sq]``: pass ``lse.transpose(1, 2)``; sparse MLA prefill's ``[Sq, Hq]`` fits.

Sinks:
* ``"null"``: partials must be computed WITHOUT the sink; it is applied once here, after the merge
  (out *= e^lse / (e^lse + e^s); s = -inf is a bitwise no-op, s = +inf zeroes non-empty rows).
  lse stays sink-free, as everywhere in sinkops.
* ``"key0"`` (or no sinks): the key-0 bias already lives inside whichever partial held key 0, so the
  merge is plain. Limitation: a key0 sink of +inf gives that partial lse = +inf, which this
  convention cannot tell apart from an empty partial; it is merged as empty.
"""
from __future__ import annotations

import torch

_INF = float("inf")


def merge_attention_states(outs, lses, sinks=None, sink_mode="null"):
    """outs: list of [..., H, D] or stacked [n, ..., H, D]; lses: matching list of [..., H] or [n, ..., H];
    sinks float32 [H] | None. -> (out [..., H, D] in the partials' dtype, lse [..., H] float32,
    float64 for float64 partials). A partial with lse = +inf is empty and contributes nothing;
    if all are empty: out = 0, lse = +inf."""
    if sink_mode not in ("null", "key0", "none"):
        raise ValueError(f"sink_mode must be 'null', 'key0' or 'none', got {sink_mode!r}")
    outs = torch.stack(list(outs)) if isinstance(outs, (list, tuple)) else outs
    lses = torch.stack(list(lses)) if isinstance(lses, (list, tuple)) else lses
    if outs.shape[:-1] != lses.shape:
        raise ValueError(f"lses must have shape outs.shape[:-1] = {tuple(outs.shape[:-1])}, got {tuple(lses.shape)}")
    cdt = torch.float64 if outs.dtype == torch.float64 or lses.dtype == torch.float64 else torch.float32

    lse_i = lses.to(cdt)
    empty_i = torch.isposinf(lse_i)
    # Empty partials weigh exp(-inf) = 0; the row max is shifted by 0 when every partial is empty.
    lse_i = torch.where(empty_i, torch.full_like(lse_i, -_INF), lse_i)
    row_max = lse_i.amax(dim=0)
    all_empty = torch.isneginf(row_max)
    shift = torch.where(all_empty, torch.zeros_like(row_max), row_max)
    w = torch.exp(lse_i - shift)                                        # [n, ..., H]
    total = w.sum(dim=0)
    total_safe = torch.where(all_empty, torch.ones_like(total), total)
    # where(), not multiply: an empty partial's out must not leak (0 * NaN would).
    contrib = torch.where(empty_i.unsqueeze(-1), torch.zeros((), dtype=cdt, device=outs.device),
                          outs.to(cdt) * (w / total_safe).unsqueeze(-1))
    out = contrib.sum(dim=0)
    lse = torch.where(all_empty, torch.full_like(row_max, _INF), shift + torch.log(total_safe))

    if sinks is not None and sink_mode == "null":
        s = sinks.to(device=out.device, dtype=cdt).expand(lse.shape)
        apply = torch.isfinite(s) & ~all_empty
        safe_lse = torch.where(all_empty, torch.zeros_like(lse), lse)
        safe_s = torch.where(torch.isfinite(s), s, torch.zeros_like(s))
        factor = torch.exp(safe_lse - torch.logaddexp(safe_lse, safe_s))
        out = torch.where(apply.unsqueeze(-1), out * factor.unsqueeze(-1), out)
        out = torch.where(torch.isposinf(s).unsqueeze(-1), torch.zeros_like(out), out)
    return out.to(outs.dtype), lse
