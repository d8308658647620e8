"""Shared test helpers: error metric, the DESIGN.md §4 tolerance rule, random case generators.

Every generator draws fresh random data each call (seed=None) and prints the seed it used, so a
failing run can be replayed by passing that seed back.
"""
from __future__ import annotations

import os

import torch

from sinkops.kv_cache import pack_kv_cache, token_dim

_DTYPE_CAP = {torch.bfloat16: 3e-3, torch.float16: 2e-3, torch.float32: 1e-4, torch.float64: 1e-10}


def _generator(seed, who):
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    print(f"{who}: seed={seed}")
    return torch.Generator().manual_seed(seed)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64. Equal entries (same inf included) contribute 0; any NaN in a,
    or an inf where b differs, gives inf. ||b|| == 0 gives 0 if a == b else inf."""
    a = a.detach().to("cpu", torch.float64)
    b = b.detach().to("cpu", torch.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch {tuple(a.shape)} vs {tuple(b.shape)}")
    if torch.isnan(a).any():
        return float("inf")
    diff = torch.where(a == b, torch.zeros_like(a), a - b)
    if not torch.isfinite(diff).all():
        return float("inf")
    num = torch.linalg.vector_norm(diff).item()
    den = torch.linalg.vector_norm(torch.where(torch.isfinite(b), b, torch.zeros_like(b))).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def check_close(actual, oracle, lowp_baseline=None, name="", rel_cap=None) -> float:
    """DESIGN.md §4: err(actual) <= 2 * err(lowp_baseline) + 1e-5 and under the dtype cap
    (bf16 3e-3, fp16 2e-3, fp32 1e-4; rel_cap overrides). Errors are relative L2 against the
    oracle over its finite entries; at its non-finite entries (+inf lse, -inf max_logits)
    actual must hold exactly the same value. Returns err(actual)."""
    assert not torch.isnan(actual).any(), f"{name}: NaN in output ({int(torch.isnan(actual).sum())} entries; unwritten?)"
    a = actual.detach().to("cpu", torch.float64)
    o = oracle.detach().to("cpu", torch.float64)
    assert a.shape == o.shape, f"{name}: shape {tuple(a.shape)} != oracle {tuple(o.shape)}"
    finite = torch.isfinite(o)
    if not finite.all():
        bad = (a[~finite] != o[~finite]).sum().item()
        assert bad == 0, f"{name}: {bad} entries differ where the oracle is +-inf"
    err = rel_l2(a[finite], o[finite])
    if lowp_baseline is not None:
        base = rel_l2(lowp_baseline.detach().to("cpu", torch.float64)[finite], o[finite])
        assert err <= 2 * base + 1e-5, f"{name}: err {err:.3e} > 2 x baseline err {base:.3e} + 1e-5"
    cap = rel_cap if rel_cap is not None else _DTYPE_CAP.get(actual.dtype, 1e-4)
    assert err < cap, f"{name}: rel L2 err {err:.3e} >= cap {cap:.1e} for {actual.dtype}"
    return err


def _cu(lengths, device):
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.tensor(list(lengths), dtype=torch.int64).cumsum(0).to(torch.int32)
    return cu.to(device)


def make_window_case(seqlens_q, seqlens_k=None, hq=4, hk=2, d=64, dv=None, dtype=torch.bfloat16,
                     device="cpu", seed=None):
    """Packed varlen case: dict(q [Tq,hq,d], k [Tk,hk,d], v [Tk,hk,dv], cu_seqlens_q, cu_seqlens_k,
    max_seqlen_q, max_seqlen_k) with standard-normal data."""
    g = _generator(seed, "make_window_case")
    seqlens_k = list(seqlens_q) if seqlens_k is None else list(seqlens_k)
    seqlens_q = list(seqlens_q)
    assert len(seqlens_q) == len(seqlens_k)
    dv = d if dv is None else dv
    tq, tk = sum(seqlens_q), sum(seqlens_k)
    rand = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)  # noqa: E731
    return dict(
        q=rand(tq, hq, d), k=rand(tk, hk, d), v=rand(tk, hk, dv),
        cu_seqlens_q=_cu(seqlens_q, device), cu_seqlens_k=_cu(seqlens_k, device),
        max_seqlen_q=max(seqlens_q, default=0), max_seqlen_k=max(seqlens_k, default=0),
    )


def _random_indices(g, shape, n_valid, invalid_frac, dup):
    """int32 indices in [0, n_valid) with a fraction replaced by -1 or by values >= n_valid and,
    if dup, some entries copied from elsewhere in the same row (duplicates count twice)."""
    idx = torch.randint(0, max(n_valid, 1), shape, generator=g)
    if dup and shape[-1] > 1:
        src = torch.randint(0, shape[-1], shape, generator=g)
        take = torch.rand(shape, generator=g) < 0.1
        idx = torch.where(take, torch.gather(idx, -1, src), idx)
    bad = torch.rand(shape, generator=g) < invalid_frac
    big = n_valid + torch.randint(0, 1000, shape, generator=g)
    bad_val = torch.where(torch.rand(shape, generator=g) < 0.5, torch.full_like(idx, -1), big)
    idx = torch.where(bad, bad_val, idx)
    if n_valid == 0:
        idx = torch.full_like(idx, -1)
    return idx.to(torch.int32)


def make_sparse_prefill_case(s_q, s_kv, hq, d_qk, topk, device="cpu", invalid_frac=0.1, dup=True, seed=None):
    """dict(q bf16 [s_q,hq,d_qk], kv bf16 [s_kv,1,d_qk], indices int32 [s_q,1,topk]) with invalid
    (-1 and >= s_kv) and duplicated indices."""
    g = _generator(seed, "make_sparse_prefill_case")
    q = torch.randn(s_q, hq, d_qk, generator=g).to(device=device, dtype=torch.bfloat16)
    kv = torch.randn(s_kv, 1, d_qk, generator=g).to(device=device, dtype=torch.bfloat16)
    indices = _random_indices(g, (s_q, 1, topk), s_kv, invalid_frac, dup).to(device)
    return dict(q=q, kv=kv, indices=indices)


def make_latent(num_tokens, layout, generator):
    """bf16 [num_tokens, token_dim(layout)] with per-token magnitudes spread over 2^-3..2^3 so
    the FP8 groups get different scales."""
    x = torch.randn(num_tokens, token_dim(layout), generator=generator)
    mag = torch.exp2(torch.randint(-3, 4, (num_tokens, 1), generator=generator).float())
    return (x * mag).to(torch.bfloat16)


def make_sparse_decode_case(b, s_q, hq, layout, topk, num_tokens, block_size=64, device="cpu", extra=False,
                            seed=None, spare_rows=None, invalid_frac=0.1):
    """dict(q, kv_cache, indices, topk_length=None, layout, extra_kv_cache, extra_indices,
    extra_topk_length=None), every key an argument of sparse_mla_decode. Caches come from
    pack_kv_cache (v32 with one spare row per block by default, so stride(0) is padded);
    indices are slots with -1, out-of-range and duplicate entries. The extra pool has
    num_tokens // 2 + 1 tokens and topk // 2 + 1 indices per query."""
    g = _generator(seed, "make_sparse_decode_case")
    if spare_rows is None:
        spare_rows = 1 if layout == "v32" else 0
    d_qk = token_dim(layout)
    q = torch.randn(b, s_q, hq, d_qk, generator=g).to(device=device, dtype=torch.bfloat16)
    kv_cache = pack_kv_cache(make_latent(num_tokens, layout, g), layout, block_size, spare_rows)
    case = dict(q=q, kv_cache=_keep_strides(kv_cache, device), layout=layout, topk_length=None,
                indices=_random_indices(g, (b, s_q, topk), num_tokens, invalid_frac, True).to(device),
                extra_kv_cache=None, extra_indices=None, extra_topk_length=None)
    if extra:
        n_extra = num_tokens // 2 + 1
        ec = pack_kv_cache(make_latent(n_extra, layout, g), layout, block_size, spare_rows)
        case["extra_kv_cache"] = _keep_strides(ec, device)
        case["extra_indices"] = _random_indices(g, (b, s_q, topk // 2 + 1), n_extra, invalid_frac, True).to(device)
    return case


def _keep_strides(cache, device):
    """Move a strided cache view to device without densifying it (Tensor.to would drop the padding)."""
    if cache.device == torch.device(device):
        return cache
    base = torch.as_strided(cache, (cache.shape[0], cache.stride(0)), (cache.stride(0), 1)).to(device)
    return torch.as_strided(base, cache.shape, cache.stride())


def sinks_like(h, kind) -> torch.Tensor:
    """float32 [h] sinks: "mimo" U(-0.1, 0.6), "dsv4" U(-2.2, 2.5), "large" +-30, "neginf", "posinf",
    "mixed" (-inf, +inf and finite entries)."""
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    u = torch.rand(h, generator=g)
    if kind == "mimo":
        return -0.1 + 0.7 * u
    if kind == "dsv4":
        return -2.2 + 4.7 * u
    if kind == "large":
        return torch.where(u < 0.5, torch.full_like(u, -30.0), torch.full_like(u, 30.0))
    if kind == "neginf":
        return torch.full((h,), float("-inf"))
    if kind == "posinf":
        return torch.full((h,), float("inf"))
    if kind == "mixed":
        s = -2.2 + 4.7 * u
        s[0::3] = float("-inf")
        s[1::3] = float("inf")
        return s
    raise ValueError(f"unknown sink kind {kind!r}")


def nan_like(shape, dtype, device="cpu") -> torch.Tensor:
    """Poisoned output buffer: every element the kernel forgets to write stays NaN."""
    return torch.full(tuple(shape), float("nan"), dtype=dtype, device=device)


def window_oracle(case, window, sinks, sink_mode, compute_dtype=None, scale=None):
    """reference.window_attention on a make_window_case dict: the float64 oracle (compute_dtype
    None) or the same math done by torch in a low precision (the tolerance rule's baseline);
    scale None: d ** -0.5."""
    from sinkops import reference

    c = case
    qkv = (c["q"], c["k"], c["v"]) if compute_dtype else (c["q"].double(), c["k"].double(), c["v"].double())
    sinks = None if sinks is None else sinks.to(c["q"].device)
    return reference.window_attention(*qkv, c["cu_seqlens_q"], c["cu_seqlens_k"], window_size=window,
                                      softmax_scale=c["q"].shape[-1] ** -0.5 if scale is None else scale, sinks=sinks,
                                      sink_mode=sink_mode, compute_dtype=compute_dtype)


def run_window(target, case, window, sinks, sink_mode, scale=None, out=None):
    """window_attention on `target` through torch.ops.sinkops.window_attention_out, with out and
    lse NaN-poisoned first (every element the kernel must write that it forgets stays NaN)."""
    q, k, v = case["q"], case["k"], case["v"]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if out is None:
        out = nan_like((q.shape[0], q.shape[1], v.shape[2]), q.dtype, q.device)
    lse = nan_like((q.shape[1], q.shape[0]), torch.float32, q.device)
    sinks = None if sinks is None else sinks.to(q.device)
    mode = "none" if sinks is None else sink_mode
    torch.ops.sinkops.window_attention_out(
        q, k, v, case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"], case["max_seqlen_k"],
        window[0], window[1], float(scale), sinks, mode, target.backend, out=out, lse=lse)
    return out, lse


def run_prefill(target, case, scale, attn_sink=None, topk_length=None):
    """sparse_mla_prefill on `target` through the _out op, every output NaN-poisoned first."""
    q = case["q"]
    sq, hq = q.shape[0], q.shape[1]
    out = nan_like((sq, hq, 512), q.dtype, q.device)
    max_logits = nan_like((sq, hq), torch.float32, q.device)
    lse = nan_like((sq, hq), torch.float32, q.device)
    sink = None if attn_sink is None else attn_sink.to(q.device)
    tl = None if topk_length is None else topk_length.to(q.device)
    torch.ops.sinkops.sparse_mla_prefill_out(q, case["kv"], case["indices"], float(scale), 512, sink, tl,
                                             target.backend, out=out, max_logits=max_logits, lse=lse)
    return out, max_logits, lse


def prefill_oracle(case, scale, attn_sink=None, topk_length=None, compute_dtype=None):
    from sinkops import reference

    q, kv = (case["q"], case["kv"]) if compute_dtype else (case["q"].double(), case["kv"].double())
    sink = None if attn_sink is None else attn_sink.to(q.device)
    tl = None if topk_length is None else topk_length.to(q.device)
    return reference.sparse_mla_prefill(q, kv, case["indices"], scale, attn_sink=sink, topk_length=tl,
                                        compute_dtype=compute_dtype)


def run_decode(target, case, scale, attn_sink=None):
    """sparse_mla_decode on `target` through the _out op, out and lse NaN-poisoned first."""
    q = case["q"]
    b, sq, hq, _ = q.shape
    out = nan_like((b, sq, hq, 512), q.dtype, q.device)
    lse = nan_like((b, hq, sq), torch.float32, q.device)
    sink = None if attn_sink is None else attn_sink.to(q.device)
    torch.ops.sinkops.sparse_mla_decode_out(
        q, case["kv_cache"], case["indices"], float(scale), sink, case["topk_length"], case["layout"],
        case["extra_kv_cache"], case["extra_indices"], case["extra_topk_length"], target.backend, out=out, lse=lse)
    return out, lse


def decode_oracle(case, scale, attn_sink=None, compute_dtype=None):
    from sinkops import reference

    q = case["q"] if compute_dtype else case["q"].double()
    sink = None if attn_sink is None else attn_sink.to(q.device)
    return reference.sparse_mla_decode(q, case["kv_cache"], case["indices"], scale, attn_sink=sink,
                                       topk_length=case["topk_length"], layout=case["layout"],
                                       extra_kv_cache=case["extra_kv_cache"], extra_indices=case["extra_indices"],
                                       extra_topk_length=case["extra_topk_length"], compute_dtype=compute_dtype)
