"""SYCL sparse MLA prefill and FP8 paged decode (csrc/sycl/kernels/sparse_mla.hpp) against the
float64 oracle, on CPU tensors through the SYCL CPU device. Skips with the reason when
sinkops._sycl is not built. Outputs are NaN-poisoned; check_close proves every element was written.
Caches come from sinkops.kv_cache.pack_kv_cache (v32 with a spare row per block, so the kernel must
read through the padded block stride).
"""
from __future__ import annotations

import os

import pytest
import torch

import helpers
from sinkops import reference
from sinkops.kv_cache import dequantize_tokens, pack_kv_cache

import sinkops.sycl as sycl_backend

if sycl_backend._sycl is None or not sycl_backend.available():
    pytest.skip(f"SYCL backend unavailable: {sycl_backend.why_unavailable()}", allow_module_level=True)

from sinkops.sycl import sparse_mla_decode_fwd, sparse_mla_prefill_fwd  # noqa: E402

INF = float("inf")
_sycl = sycl_backend._sycl


def _sink(hq, kind):
    return None if kind is None else helpers.sinks_like(hq, kind)


def _rand_lengths(n, hi):
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    return torch.randint(0, hi + 1, (n,), generator=g, dtype=torch.int32)


# ---------------------------------------------------------------- prefill

def run_prefill(case, sink, topk_length=None, d_v=512, sm_scale=None):
    q, kv, idx = case["q"], case["kv"], case["indices"]
    s_q, hq, d_qk = q.shape
    sm_scale = d_qk ** -0.5 if sm_scale is None else sm_scale
    out = helpers.nan_like((s_q, hq, d_v), torch.bfloat16)
    max_logits = helpers.nan_like((s_q, hq), torch.float32)
    lse = helpers.nan_like((s_q, hq), torch.float32)
    sparse_mla_prefill_fwd(q, kv, idx, sm_scale, d_v, sink, topk_length, out, max_logits, lse)
    return out, max_logits, lse


def check_prefill(case, sink, name, topk_length=None, d_v=512):
    got = run_prefill(case, sink, topk_length, d_v)
    sm_scale = case["q"].shape[-1] ** -0.5
    ref = reference.sparse_mla_prefill(case["q"].double(), case["kv"].double(), case["indices"], sm_scale,
                                       d_v, sink, topk_length)
    low = reference.sparse_mla_prefill(case["q"], case["kv"], case["indices"], sm_scale, d_v, sink,
                                       topk_length, compute_dtype=torch.bfloat16)
    helpers.check_close(got[0], ref[0], low[0], f"{name} out")
    helpers.check_close(got[1], ref[1], None, f"{name} max_logits", rel_cap=1e-5)
    helpers.check_close(got[2], ref[2], None, f"{name} lse", rel_cap=1e-5)
    return got


@pytest.mark.parametrize("d_qk", [512, 576])
@pytest.mark.parametrize("hq,topk,sink_kind", [(1, 1, "dsv4"), (8, 37, None), (16, 64, "dsv4"),
                                               (20, 100, "mixed"), (64, 33, "large")])
def test_prefill_matches_oracle(d_qk, hq, topk, sink_kind):
    case = helpers.make_sparse_prefill_case(6, 300, hq, d_qk, topk)
    check_prefill(case, _sink(hq, sink_kind), f"d{d_qk} h{hq} k{topk} {sink_kind}")


def test_prefill_topk_length_and_all_invalid_rows():
    case = helpers.make_sparse_prefill_case(5, 200, 12, 576, 40)
    case["indices"][1] = -1                                    # all -1
    case["indices"][2] = 200 + torch.arange(40, dtype=torch.int32)  # all >= s_kv
    tl = _rand_lengths(5, 40)
    tl[3] = 0                                                  # reads nothing
    for kind in (None, "dsv4", "posinf", "neginf"):
        out, ml, lse = check_prefill(case, _sink(12, kind), f"invalid sink={kind}", topk_length=tl)
        for r in (1, 2, 3):
            assert torch.equal(out[r], torch.zeros_like(out[r]))
            assert torch.all(lse[r] == INF) and torch.all(ml[r] == -INF)


def test_prefill_null_sink_edges():
    case = helpers.make_sparse_prefill_case(4, 100, 8, 512, 20)
    plain = run_prefill(case, None)
    neg = run_prefill(case, torch.full((8,), -INF))
    assert all(torch.equal(a, b) for a, b in zip(plain, neg)), "-inf sink must be a bitwise no-op"
    pos = run_prefill(case, torch.full((8,), INF))
    assert torch.equal(pos[0], torch.zeros_like(pos[0]))
    assert torch.equal(pos[1], plain[1]) and torch.equal(pos[2], plain[2])  # stats exclude the sink


def test_prefill_smaller_d_v_and_non_contiguous():
    case = helpers.make_sparse_prefill_case(5, 150, 8, 576, 30)
    q_big = torch.randn(5, 8, 640).to(torch.bfloat16)
    case["q"] = q_big[:, :, 64:]
    kv_big = torch.randn(150, 1, 600).to(torch.bfloat16)
    case["kv"] = kv_big[:, :, :576]
    assert not case["q"].is_contiguous() and not case["kv"].is_contiguous()
    check_prefill(case, _sink(8, "dsv4"), "d_v 256 non-contiguous", d_v=256)


# ---------------------------------------------------------------- decode

def run_decode(case, sink, q=None):
    q = case["q"] if q is None else q
    b, s_q, hq, _ = q.shape
    out = helpers.nan_like((b, s_q, hq, 512), torch.bfloat16)
    lse = helpers.nan_like((b, hq, s_q), torch.float32)
    sparse_mla_decode_fwd(q, case["kv_cache"], case["indices"], q.shape[-1] ** -0.5, sink,
                          case["topk_length"], case["layout"], case["extra_kv_cache"],
                          case["extra_indices"], case["extra_topk_length"], out, lse)
    return out, lse


def check_decode(case, sink, name):
    out, lse = run_decode(case, sink)
    kw = dict(attn_sink=sink, topk_length=case["topk_length"], layout=case["layout"],
              extra_kv_cache=case["extra_kv_cache"], extra_indices=case["extra_indices"],
              extra_topk_length=case["extra_topk_length"])
    scale = case["q"].shape[-1] ** -0.5
    ref = reference.sparse_mla_decode(case["q"], case["kv_cache"], case["indices"], scale,
                                      compute_dtype=torch.float64, **kw)
    low = reference.sparse_mla_decode(case["q"], case["kv_cache"], case["indices"], scale,
                                      compute_dtype=torch.bfloat16, **kw)
    helpers.check_close(out, ref[0], low[0], f"{name} out")
    helpers.check_close(lse, ref[1], low[1], f"{name} lse")
    return out, lse


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("b,s_q,hq,topk,n_tok,extra,sink_kind", [
    (1, 1, 64, 100, 700, False, "dsv4"),
    (2, 1, 1, 1, 50, False, "dsv4"),
    (3, 2, 8, 40, 300, True, "mixed"),
    (2, 2, 20, 17, 200, True, None),
    (1, 2, 16, 64, 500, True, "large"),
])
def test_decode_matches_oracle(layout, b, s_q, hq, topk, n_tok, extra, sink_kind):
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, n_tok, extra=extra)
    check_decode(case, _sink(hq, sink_kind), f"{layout} b{b} sq{s_q} h{hq} k{topk} x{extra}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("block_size,spare_rows", [(16, 2), (1, 0), (64, 1)])
def test_decode_block_strides(layout, block_size, spare_rows):
    case = helpers.make_sparse_decode_case(2, 1, 16, layout, 60, 300, block_size=block_size,
                                           extra=True, spare_rows=spare_rows)
    assert case["kv_cache"].stride(0) >= block_size * case["kv_cache"].shape[-1]
    check_decode(case, _sink(16, "dsv4"), f"{layout} bs{block_size} spare{spare_rows}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_topk_length_extra_pool_and_empty_rows(layout):
    case = helpers.make_sparse_decode_case(4, 2, 16, layout, 50, 400, extra=True)
    tl = _rand_lengths(4, 50)
    etl = _rand_lengths(4, case["extra_indices"].shape[-1])
    tl[0], etl[0] = 0, 0   # sees no key at all
    tl[1], etl[1] = 0, 5   # extra pool only
    case["topk_length"], case["extra_topk_length"] = tl, etl
    n_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    case["indices"][2, 0] = n_slots + torch.arange(50, dtype=torch.int32)  # all out of range ...
    case["extra_indices"][2, 0] = -1                                         # ... in both pools
    for kind in (None, "dsv4", "posinf", "neginf"):
        out, lse = check_decode(case, _sink(16, kind), f"{layout} topk_length sink={kind}")
        for bb, ss in ((0, 0), (0, 1), (2, 0)):
            assert torch.equal(out[bb, ss], torch.zeros_like(out[bb, ss]))
            assert torch.all(lse[bb, :, ss] == INF)


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_single_key_reads_bytes_exactly(layout):
    # With one valid key per row the softmax weight is exactly 1, so the output is that token's
    # dequantized values rounded to bf16: a byte-exact check of the FP8 layout decoding.
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    latent = helpers.make_latent(100, layout, g)
    cache = pack_kv_cache(latent, layout, 16, 1)
    slots = torch.randint(0, 100, (3, 2, 1), generator=g, dtype=torch.int32)
    d_qk = 576 if layout == "v32" else 512
    case = dict(q=torch.randn(3, 2, 4, d_qk, generator=g).to(torch.bfloat16), kv_cache=cache,
                indices=slots, topk_length=None, layout=layout, extra_kv_cache=None,
                extra_indices=None, extra_topk_length=None)
    out, _ = run_decode(case, None)
    expect = dequantize_tokens(cache, layout, slots.reshape(-1))[:, :512].to(torch.bfloat16)
    assert torch.equal(out, expect.reshape(3, 2, 1, 512).expand(3, 2, 4, 512))


def test_decode_null_sink_minus_inf_is_a_bitwise_no_op():
    case = helpers.make_sparse_decode_case(2, 2, 16, "v4", 40, 300, extra=True)
    a = run_decode(case, None)
    b = run_decode(case, torch.full((16,), -INF))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ---------------------------------------------------------------- bundle cache

def test_bundle_is_persisted_on_disk():
    cache_dir = _sycl.cache_dir()
    if not cache_dir:
        pytest.skip("on-disk cache disabled (SINKOPS_SYCL_CACHE=0)")
    assert _sycl.has_kernel("sinkops_sparse_mla_decode_fwd")
    files = [f for f in os.listdir(cache_dir) if f.endswith(".syclbin")]
    assert files, f"no SYCLBIN written to {cache_dir}"
