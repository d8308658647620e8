"""SYCL window attention (csrc/sycl/kernels/window_attention.hpp) against the float64 oracle.

Runs on CPU tensors through the SYCL CPU device (Intel OpenCL CPU runtime from PyPI), so CI checks
the numerics of the same kernel source an Intel GPU compiles. Skips with the reason when
sinkops._sycl is not built. Every output is NaN-poisoned first; check_close proves every element
was written.
"""
from __future__ import annotations

import pytest
import torch

from helpers import check_close, make_window_case, nan_like, sinks_like, window_oracle

import sinkops.sycl as sycl_backend

if sycl_backend._sycl is None or not sycl_backend.available():
    pytest.skip(f"SYCL backend unavailable: {sycl_backend.why_unavailable()}", allow_module_level=True)

from sinkops.sycl import window_attention_fwd  # noqa: E402

INF = float("inf")
_sycl = sycl_backend._sycl


def _run(case, window, sinks, sink_mode, scale=None, q=None, k=None, v=None):
    q = case["q"] if q is None else q
    k = case["k"] if k is None else k
    v = case["v"] if v is None else v
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out = nan_like((q.shape[0], q.shape[1], v.shape[2]), q.dtype)
    lse = nan_like((q.shape[1], q.shape[0]), torch.float32)
    window_attention_fwd(q, k, v, case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"],
                         case["max_seqlen_k"], window[0], window[1], scale,
                         sinks, "none" if sinks is None else sink_mode, out, lse)
    return out, lse


_oracle = window_oracle

def _check(case, window, sinks, sink_mode, name):
    out, lse = _run(case, window, sinks, sink_mode)
    ref_out, ref_lse = _oracle(case, window, sinks, sink_mode)
    dtype = case["q"].dtype
    base_out, _ = _oracle(case, window, sinks, sink_mode,
                          compute_dtype=dtype if dtype != torch.float32 else torch.float32)
    check_close(out, ref_out, base_out, name=f"{name} out")
    check_close(lse, ref_lse, None, name=f"{name} lse", rel_cap=1e-5)
    return out, lse


def test_every_kernel_is_in_the_built_bundle():
    names = _sycl.kernel_names()
    assert len(names) == 5
    for name in names:
        assert _sycl.has_kernel(name), f"{name} missing from the SYCL bundle (silently dropped?)"
    assert not _sycl.has_kernel("sinkops_no_such_kernel")


# Segments of length 0, 1, < window, >> window, and q/k length mismatch (sk > sq and sk < sq).
SEQLENS = ([5, 0, 40, 1, 3], [7, 2, 40, 0, 9])


@pytest.mark.parametrize("window", [(-1, -1), (4, 0), (4, 4), (0, 0), (2, 7)])
@pytest.mark.parametrize("sink_mode,kind", [("none", None), ("key0", "mimo"), ("null", "dsv4"),
                                            ("key0", "large"), ("null", "large")])
def test_window_sinks_windows_varlen(window, sink_mode, kind):
    case = make_window_case(*SEQLENS, hq=8, hk=2, d=64)
    sinks = None if kind is None else sinks_like(8, kind)
    _check(case, window, sinks, sink_mode, f"{window} {sink_mode} {kind}")


@pytest.mark.parametrize("hq,hk", [(4, 4), (6, 2), (8, 1), (16, 1), (20, 1), (48, 3)])
@pytest.mark.parametrize("sink_mode", ["key0", "null"])
def test_gqa_ratios(hq, hk, sink_mode):
    # 20 and 16 per kv head cover more query heads than one work-group's 16 sub-groups.
    case = make_window_case([9, 17], hq=hq, hk=hk, d=32)
    _check(case, (3, 3), sinks_like(hq, "dsv4"), sink_mode, f"gqa {hq}/{hk} {sink_mode}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("d,dv", [(64, 64), (80, 80), (128, 96), (256, 256), (17, 5)])
def test_dtypes_and_head_dims(dtype, d, dv):
    case = make_window_case([12, 30], hq=4, hk=2, d=d, dv=dv, dtype=dtype)
    _check(case, (5, 5), sinks_like(4, "mimo"), "key0", f"{dtype} d{d} dv{dv}")


@pytest.mark.parametrize("mode", ["none", "null", "key0"])
def test_mixed_infinite_sinks(mode):
    case = make_window_case([6, 20, 1], hq=6, hk=3, d=32)
    sinks = None if mode == "none" else sinks_like(6, "mixed")
    _check(case, (3, 2), sinks, mode, f"mixed {mode}")


def test_null_sink_minus_inf_is_a_bitwise_no_op():
    case = make_window_case([11, 25], hq=4, hk=2, d=64)
    plain = _run(case, (4, 4), None, "none")
    with_sink = _run(case, (4, 4), torch.full((4,), -INF), "null")
    assert torch.equal(plain[0], with_sink[0]) and torch.equal(plain[1], with_sink[1])


def test_null_sink_plus_inf_gives_zero_rows_with_finite_lse():
    case = make_window_case([11, 25], hq=4, hk=2, d=64)
    out, lse = _run(case, (4, 4), torch.full((4,), INF), "null")
    assert torch.equal(out, torch.zeros_like(out))
    _, ref_lse = _oracle(case, (4, 4), None, "key0")
    check_close(lse, ref_lse, None, name="lse", rel_cap=1e-5)


def test_key0_plus_inf_outputs_exactly_v0():
    case = make_window_case([10], hq=4, hk=2, d=64)
    left = 3
    out, lse = _run(case, (left, 0), torch.full((4,), INF), "key0")
    v0 = case["v"][0]  # [hk, dv]
    sees_key0 = torch.arange(10) <= left
    for h in range(4):
        assert torch.equal(out[sees_key0, h], v0[h // 2].expand(int(sees_key0.sum()), -1))
        assert torch.all(lse[h, sees_key0] == INF)
    ref_out, ref_lse = _oracle(case, (left, 0), torch.full((4,), INF), "key0")
    check_close(out, ref_out, None, name="key0 +inf out")
    check_close(lse, ref_lse, None, name="key0 +inf lse", rel_cap=1e-5)


def test_key0_minus_inf_masks_key0_and_empty_rows_are_zero():
    # Window (0, 0) with equal lengths: row i sees only key i; row 0 sees only key 0 -> empty.
    case = make_window_case([6, 0, 1], hq=2, hk=1, d=16)
    out, lse = _run(case, (0, 0), torch.full((2,), -INF), "key0")
    starts = [0, 6]  # row 0 of each non-empty segment
    for r in starts:
        assert torch.equal(out[r], torch.zeros_like(out[r]))
        assert torch.all(lse[:, r] == INF)
    ref_out, ref_lse = _oracle(case, (0, 0), torch.full((2,), -INF), "key0")
    check_close(out, ref_out, None, name="key0 -inf out")
    check_close(lse, ref_lse, None, name="key0 -inf lse", rel_cap=1e-5)


@pytest.mark.parametrize("mode,kind", [("none", None), ("null", "posinf"), ("key0", "posinf"), ("null", "dsv4")])
def test_rows_seeing_no_key_are_zero_with_inf_lse(mode, kind):
    # sk < sq with a causal-like window: the first sq - sk rows see nothing; segment 2 has no keys.
    case = make_window_case([8, 4], [3, 0], hq=2, hk=2, d=16)
    sinks = None if kind is None else sinks_like(2, kind)
    out, lse = _run(case, (2, 0), sinks, mode)
    empty = torch.tensor([1] * 5 + [0] * 3 + [1] * 4, dtype=torch.bool)
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    assert torch.all(lse[:, empty] == INF)
    ref_out, ref_lse = _oracle(case, (2, 0), sinks, "key0" if mode == "none" else mode)
    check_close(out, ref_out, None, name="empty rows out")
    check_close(lse, ref_lse, None, name="empty rows lse", rel_cap=1e-5)


def test_non_contiguous_inputs():
    base = make_window_case([13, 21], hq=8, hk=4, d=64)
    # Views with padded row and head strides (last dim contiguous, as ops.py guarantees).
    q = torch.randn(34, 8, 80).to(torch.bfloat16)[:, :, 8:72]
    kv = torch.randn(34, 8, 2, 64).to(torch.bfloat16)
    k, v = kv[:, 0::2, 0], kv[:, 1::2, 1]
    case = dict(base, q=q, k=k, v=v)
    assert not q.is_contiguous() and not k.is_contiguous()
    _check(case, (6, 2), sinks_like(8, "mimo"), "key0", "non-contiguous")


def test_zero_tokens_is_a_no_op():
    case = make_window_case([0, 0], hq=2, hk=1, d=16)
    out, lse = _run(case, (-1, -1), None, "none")
    assert out.numel() == 0 and lse.numel() == 0


def test_deterministic():
    case = make_window_case([33], hq=4, hk=2, d=64)
    sinks = sinks_like(4, "dsv4")
    a = _run(case, (8, 8), sinks, "null")
    b = _run(case, (8, 8), sinks, "null")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
