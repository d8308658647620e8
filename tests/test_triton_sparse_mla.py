"""Triton sparse MLA (prefill + FP8 paged decode) against the float64 oracle in sinkops.reference.

Without CUDA the kernels run in the Triton CPU interpreter on small shapes; the large DeepSeek
shapes are marked `gpu`. Tolerance: DESIGN.md §4 via helpers.check_close, with the bf16 torch
computation (reference, compute_dtype=bf16) as the low-precision baseline.
"""
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first triton import

import helpers  # noqa: E402
from sinkops import reference  # noqa: E402
from sinkops.triton import sparse_mla as triton_sparse_mla  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
NAN = float("nan")


# ----------------------------------------------------------------------------- prefill

def _run_prefill(q, kv, indices, sm_scale, sink, topk_length, d_v=512):
    sq, hq, _ = q.shape
    out = helpers.nan_like((sq, hq, d_v), torch.bfloat16, q.device)
    max_logits = helpers.nan_like((sq, hq), torch.float32, q.device)
    lse = helpers.nan_like((sq, hq), torch.float32, q.device)
    triton_sparse_mla.sparse_mla_prefill_fwd(q, kv, indices, sm_scale, d_v, sink, topk_length,
                                             out, max_logits, lse)
    return out, max_logits, lse


def _check_prefill(q, kv, indices, sink, topk_length, name):
    sm_scale = q.shape[-1] ** -0.5
    got = _run_prefill(q, kv, indices, sm_scale, sink, topk_length)
    oracle = reference.sparse_mla_prefill(q.double(), kv.double(), indices, sm_scale, 512, sink, topk_length)
    lowp = reference.sparse_mla_prefill(q, kv, indices, sm_scale, 512, sink, topk_length,
                                        compute_dtype=torch.bfloat16)
    for what, a, o, b in zip(("out", "max_logits", "lse"), got, oracle, lowp):
        helpers.check_close(a, o, b, f"{name} {what}")
    return got


def _random_topk_length(sq, topk, device):
    # Include 0 (empty row), 1 and the full topk.
    n = torch.randint(0, topk + 1, (sq,), dtype=torch.int32)
    n[0], n[-1] = 0, topk
    return n.to(device)


@pytest.mark.parametrize("dqk", [512, 576])
@pytest.mark.parametrize("hq", [1, 3, 8, 16])
@pytest.mark.parametrize("topk", [1, 17, 64])
def test_prefill_matches_reference(dqk, hq, topk):
    case = helpers.make_sparse_prefill_case(s_q=5, s_kv=70, hq=hq, d_qk=dqk, topk=topk, device=DEVICE)
    sink = helpers.sinks_like(hq, "dsv4").to(DEVICE)
    topk_length = _random_topk_length(5, topk, DEVICE) if topk > 1 else None
    _check_prefill(case["q"], case["kv"], case["indices"], sink, topk_length, f"prefill d{dqk} h{hq} k{topk}")


def test_prefill_more_heads_than_one_block():
    # 20 heads: two head blocks of 16, the second one partly masked.
    case = helpers.make_sparse_prefill_case(s_q=3, s_kv=50, hq=20, d_qk=576, topk=40, device=DEVICE)
    _check_prefill(case["q"], case["kv"], case["indices"], helpers.sinks_like(20, "dsv4").to(DEVICE), None, "h20")


@pytest.mark.parametrize("kind", ["none", "neginf", "posinf", "mixed", "large"])
def test_prefill_sink_edge_values(kind):
    hq = 6
    case = helpers.make_sparse_prefill_case(s_q=4, s_kv=60, hq=hq, d_qk=512, topk=33, device=DEVICE)
    q, kv, idx = case["q"], case["kv"], case["indices"]
    sink = None if kind == "none" else helpers.sinks_like(hq, kind).to(DEVICE)
    out, max_logits, lse = _check_prefill(q, kv, idx, sink, None, f"sink {kind}")
    no_sink = _run_prefill(q, kv, idx, 512 ** -0.5, None, None)
    # The sink never changes the statistics, and -inf sink heads are bitwise the no-sink result.
    assert torch.equal(lse, no_sink[2]) and torch.equal(max_logits, no_sink[1])
    if sink is not None:
        neg, pos = torch.isneginf(sink), torch.isposinf(sink)
        assert torch.equal(out[:, neg], no_sink[0][:, neg])
        assert torch.all(out[:, pos] == 0)


def test_prefill_empty_rows():
    hq, topk, skv = 5, 24, 40
    case = helpers.make_sparse_prefill_case(s_q=6, s_kv=skv, hq=hq, d_qk=576, topk=topk, device=DEVICE)
    idx = case["indices"].clone()
    idx[1] = -1                                   # all -1
    idx[2] = skv + torch.arange(topk, device=DEVICE, dtype=torch.int32)   # all >= Skv
    idx[3, 0, ::2], idx[3, 0, 1::2] = -7, skv     # mixed invalid
    topk_length = torch.full((6,), topk, dtype=torch.int32, device=DEVICE)
    topk_length[4] = 0                            # valid indices, but none read
    for kind in ("posinf", "dsv4", "neginf"):
        sink = helpers.sinks_like(hq, kind).to(DEVICE)
        out, max_logits, lse = _check_prefill(case["q"], case["kv"], idx, sink, topk_length, f"empty {kind}")
        empty = torch.tensor([1, 2, 3, 4], device=DEVICE)
        assert torch.all(out[empty] == 0)
        assert torch.all(torch.isposinf(lse[empty])) and torch.all(torch.isneginf(max_logits[empty]))
        assert torch.isfinite(lse[[0, 5]]).all()


def test_prefill_duplicates_count_each_time():
    hq, skv = 4, 30
    case = helpers.make_sparse_prefill_case(s_q=2, s_kv=skv, hq=hq, d_qk=512, topk=8, device=DEVICE, invalid_frac=0)
    idx = torch.tensor([[[3, 3, 3, 3, 3, 3, 3, 9]], [[5, 5, 6, 6, -1, 6, 40, 5]]], dtype=torch.int32, device=DEVICE)
    sink = helpers.sinks_like(hq, "dsv4").to(DEVICE)
    out, _, lse = _check_prefill(case["q"], case["kv"], idx, sink, None, "duplicates")
    unique = torch.tensor([[[3, 9]], [[5, 6]]], dtype=torch.int32, device=DEVICE)
    _, _, lse1 = _run_prefill(case["q"], case["kv"], unique, 512 ** -0.5, sink, None)
    assert not torch.allclose(lse, lse1)  # duplicates really were counted


def test_prefill_noncontiguous_q_and_out():
    hq, dqk = 8, 576
    case = helpers.make_sparse_prefill_case(s_q=4, s_kv=50, hq=2 * hq, d_qk=dqk, topk=20, device=DEVICE)
    q = case["q"][:, ::2]                        # head stride 2*dqk: a strided slice
    assert not q.is_contiguous()
    sink = helpers.sinks_like(hq, "dsv4").to(DEVICE)
    _check_prefill(q, case["kv"], case["indices"], sink, None, "strided q")
    # Strided outputs (a slice of a wider buffer) are written through their strides.
    wide = helpers.nan_like((4, 2 * hq, 512), torch.bfloat16, DEVICE)
    stats = helpers.nan_like((2, 4, hq), torch.float32, DEVICE)
    out, max_logits, lse = wide[:, ::2], stats[0].t().contiguous().t(), stats[1]
    triton_sparse_mla.sparse_mla_prefill_fwd(q, case["kv"], case["indices"], dqk ** -0.5, 512, sink, None,
                                             out, max_logits, lse)
    ref_out, ref_ml, ref_lse = _run_prefill(q.contiguous(), case["kv"], case["indices"], dqk ** -0.5, sink, None)
    assert torch.equal(out, ref_out) and torch.equal(max_logits, ref_ml) and torch.equal(lse, ref_lse)
    assert torch.isnan(wide[:, 1::2]).all()      # nothing written outside the view


def test_prefill_deterministic():
    case = helpers.make_sparse_prefill_case(s_q=3, s_kv=64, hq=8, d_qk=512, topk=64, device=DEVICE)
    sink = helpers.sinks_like(8, "dsv4").to(DEVICE)
    a = _run_prefill(case["q"], case["kv"], case["indices"], 0.05, sink, None)
    b = _run_prefill(case["q"], case["kv"], case["indices"], 0.05, sink, None)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


# ----------------------------------------------------------------------------- decode

def _run_decode(case, sm_scale, sink, topk_length=None, extra_topk_length=None, num_splits=None):
    q = case["q"]
    b, sq, hq, _ = q.shape
    out = helpers.nan_like((b, sq, hq, 512), torch.bfloat16, q.device)
    lse = helpers.nan_like((b, hq, sq), torch.float32, q.device)
    triton_sparse_mla.sparse_mla_decode_fwd(q, case["kv_cache"], case["indices"], sm_scale, sink, topk_length,
                                            case["layout"], case["extra_kv_cache"], case["extra_indices"],
                                            extra_topk_length, out, lse, num_splits=num_splits)
    return out, lse


def _check_decode(case, sink, topk_length=None, extra_topk_length=None, name="", num_splits=None):
    sm_scale = case["q"].shape[-1] ** -0.5
    got = _run_decode(case, sm_scale, sink, topk_length, extra_topk_length, num_splits)
    args = dict(kv_cache=case["kv_cache"], indices=case["indices"], sm_scale=sm_scale, attn_sink=sink,
                topk_length=topk_length, layout=case["layout"], extra_kv_cache=case["extra_kv_cache"],
                extra_indices=case["extra_indices"], extra_topk_length=extra_topk_length)
    oracle = reference.sparse_mla_decode(case["q"].double(), **args)
    lowp = reference.sparse_mla_decode(case["q"], compute_dtype=torch.bfloat16, **args)
    for what, a, o, b in zip(("out", "lse"), got, oracle, lowp):
        helpers.check_close(a, o, b, f"{name} {what}")
    return got


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("s_q", [1, 2])
@pytest.mark.parametrize("extra", [False, True])
def test_decode_matches_reference(layout, s_q, extra):
    b, hq, topk = 2, 5, 40
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, num_tokens=150, block_size=16,
                                           device=DEVICE, extra=extra)
    sink = helpers.sinks_like(hq, "dsv4").to(DEVICE)
    topk_length = torch.tensor([topk, 7], dtype=torch.int32, device=DEVICE)
    extra_len = torch.tensor([0, 9], dtype=torch.int32, device=DEVICE) if extra else None
    _check_decode(case, sink, topk_length, extra_len, f"decode {layout} sq{s_q} extra{extra}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_padded_block_stride(layout):
    # Spare rows make stride(0) larger than the block's data (v4 is padded to 576 B anyway).
    hq = 16
    case = helpers.make_sparse_decode_case(1, 2, hq, layout, 33, num_tokens=100, block_size=64,
                                           device=DEVICE, spare_rows=2)
    cache = case["kv_cache"]
    assert cache.stride(0) > cache.shape[1] * cache.shape[-1]
    _check_decode(case, helpers.sinks_like(hq, "mixed").to(DEVICE), name=f"padded {layout}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_empty_rows_and_sink_edges(layout):
    hq = 4
    case = helpers.make_sparse_decode_case(2, 2, hq, layout, 20, num_tokens=70, block_size=16, device=DEVICE)
    num_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    case["indices"][0, 1] = -1                   # batch 0, query 1: all invalid
    case["indices"][1, 0, ::2], case["indices"][1, 0, 1::2] = -1, num_slots  # out of the cache
    for kind in ("posinf", "neginf", "mixed"):
        sink = helpers.sinks_like(hq, kind).to(DEVICE)
        out, lse = _check_decode(case, sink, name=f"decode empty {layout} {kind}")
        assert torch.all(out[0, 1] == 0) and torch.all(out[1, 0] == 0)
        assert torch.isposinf(lse[0, :, 1]).all() and torch.isposinf(lse[1, :, 0]).all()
    neg = _run_decode(case, 0.04, helpers.sinks_like(hq, "neginf").to(DEVICE))
    none = _run_decode(case, 0.04, None)
    assert torch.equal(neg[0], none[0]) and torch.equal(neg[1], none[1])  # -inf sink: bitwise no-op


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_split_topk(layout):
    # Top-k split over 3 programs + combine kernel: same answer, sink applied once, empty rows exact.
    hq, topk = 3, 70
    case = helpers.make_sparse_decode_case(2, 2, hq, layout, topk, num_tokens=120, block_size=16,
                                           device=DEVICE, extra=True)
    case["indices"][1, 1] = -1
    case["extra_indices"][1, 1] = -1             # row (1, 1) sees nothing at all
    topk_length = torch.tensor([topk, 40], dtype=torch.int32, device=DEVICE)   # 40: third split empty
    extra_len = torch.tensor([36, 5], dtype=torch.int32, device=DEVICE)
    for kind in ("dsv4", "mixed"):
        sink = helpers.sinks_like(hq, kind).to(DEVICE)
        out, lse = _check_decode(case, sink, topk_length, extra_len, f"split {layout} {kind}", num_splits=3)
        assert torch.all(out[1, 1] == 0) and torch.isposinf(lse[1, :, 1]).all()
    neg = _run_decode(case, 0.04, helpers.sinks_like(hq, "neginf").to(DEVICE), num_splits=3)
    none = _run_decode(case, 0.04, None, num_splits=3)
    assert torch.equal(neg[0], none[0]) and torch.equal(neg[1], none[1])


def test_decode_deterministic():
    case = helpers.make_sparse_decode_case(2, 1, 8, "v4", 48, num_tokens=120, block_size=16, device=DEVICE,
                                           extra=True)
    sink = helpers.sinks_like(8, "dsv4").to(DEVICE)
    a, b = _run_decode(case, 0.04, sink), _run_decode(case, 0.04, sink)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ----------------------------------------------------------------------------- GPU-sized shapes

@pytest.mark.gpu
@pytest.mark.parametrize("hq,dqk,topk", [(64, 512, 640), (128, 512, 1152), (128, 576, 2048), (8, 512, 640)])
def test_prefill_deepseek_shapes(hq, dqk, topk):
    case = helpers.make_sparse_prefill_case(s_q=16, s_kv=4096, hq=hq, d_qk=dqk, topk=topk, device=DEVICE)
    topk_length = _random_topk_length(16, topk, DEVICE)
    _check_prefill(case["q"], case["kv"], case["indices"], helpers.sinks_like(hq, "mixed").to(DEVICE),
                   topk_length, f"gpu prefill h{hq} d{dqk} k{topk}")


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("hq,topk", [(64, 640), (128, 1152)])
def test_decode_deepseek_shapes(layout, hq, topk):
    case = helpers.make_sparse_decode_case(4, 2, hq, layout, topk, num_tokens=4096, block_size=64,
                                           device=DEVICE, extra=True)
    _check_decode(case, helpers.sinks_like(hq, "dsv4").to(DEVICE), name=f"gpu decode {layout} h{hq} k{topk}")
