"""CUDA sparse MLA decode (csrc/cuda/sparse_mla_decode*.cu) against the float64 oracle.

Caches come from sinkops.kv_cache.pack_kv_cache through helpers.make_sparse_decode_case (v32
with spare rows, v4 with padded blocks), so the kernel reads through a padded block stride.
Every output is NaN-poisoned first; check_close then proves every element was written.
Small-batch cases take the split-k + combine path, large-batch cases the single-pass path.
"""
from __future__ import annotations

import math
import os

import pytest
import torch

import helpers
from cuda_target import GPU_ONLY, K
from sinkops import reference

pytestmark = pytest.mark.usefixtures("cuda_target")  # every test: [gpu] and [emu] (tests/cuda_target.py)


def _cuda_fwd():
    return K.sparse_mla_decode_fwd


def _make_case(b, s_q, hq, layout, topk, num_tokens, extra=False, block_size=64, **kw):
    if K.name == "emu":  # the emulator models a 16-SM device (cuda_emu_backend): 1/8 of the batch
        b = b if b <= 8 else b // 8  # takes the same split / single-pass path as the batch on 132 SMs
    return helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, num_tokens, block_size=block_size,
                                           device=K.device, extra=extra, **kw)


def _scale(case):
    return 1.0 / math.sqrt(case["q"].shape[-1])


def run_cuda(case, sink, q=None, indices=None):
    q = case["q"] if q is None else q
    indices = case["indices"] if indices is None else indices
    b, s_q, hq, _ = q.shape
    out = helpers.nan_like((b, s_q, hq, 512), torch.bfloat16, K.device)
    lse = helpers.nan_like((b, hq, s_q), torch.float32, K.device)
    _cuda_fwd()(q, case["kv_cache"], indices, _scale(case), sink, case["topk_length"], case["layout"],
                case["extra_kv_cache"], case["extra_indices"], case["extra_topk_length"], out, lse)
    return out, lse


def run_oracle(case, sink, compute_dtype):
    return reference.sparse_mla_decode(
        case["q"], case["kv_cache"], case["indices"], _scale(case), attn_sink=sink,
        topk_length=case["topk_length"], layout=case["layout"], extra_kv_cache=case["extra_kv_cache"],
        extra_indices=case["extra_indices"], extra_topk_length=case["extra_topk_length"],
        compute_dtype=compute_dtype)


def check_against_oracle(case, sink, name):
    out, lse = run_cuda(case, sink)
    K.synchronize()
    out64, lse64 = run_oracle(case, sink, torch.float64)
    out_lp, lse_lp = run_oracle(case, sink, torch.bfloat16)
    helpers.check_close(out, out64, out_lp, f"{name} out")
    helpers.check_close(lse, lse64, lse_lp, f"{name} lse")
    return out, lse


def _sink(hq, kind):
    return None if kind is None else helpers.sinks_like(hq, kind).to(K.device)


# (b, s_q, hq, topk, num_tokens, extra, sink kind): Hq 1..128, topk 1..2048, s_q 1 and 2, batch 1..64.
SHAPES = [
    (1, 1, 64, 640, 4096, False, "dsv4"),     # the latency target shape: many splits
    (1, 2, 128, 2048, 8192, False, "dsv4"),   # two head blocks, 64 tiles split over the SMs
    (2, 1, 1, 1, 100, False, "dsv4"),         # one key, one head
    (4, 2, 16, 17, 300, False, None),         # partial tile, no sink
    (3, 2, 8, 64, 500, True, "mixed"),        # extra pool, -inf/+inf/finite sinks per head
    (7, 2, 1, 2048, 3000, False, "large"),
    (33, 1, 16, 17, 200, False, "dsv4"),
    (64, 1, 64, 64, 2048, False, "dsv4"),     # 64 CTAs -> 2 splits
    (16, 1, 64, 640, 4096, True, None),
    (64, 2, 128, 640, 4096, True, "dsv4"),    # 256 CTAs -> single pass
]


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_sq{}_h{}_k{}_n{}_x{}_{}".format(*s))
def test_matches_oracle(layout, shape):
    b, s_q, hq, topk, n_tok, extra, sink_kind = shape
    case = _make_case(b, s_q, hq, layout, topk, n_tok, extra=extra)
    check_against_oracle(case, _sink(hq, sink_kind), f"{layout} {shape}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("block_size,spare_rows", [(16, 2), (64, 1), (1, 0)])
def test_block_strides(layout, block_size, spare_rows):
    # Small blocks with spare rows: block_stride far from block_size * bytes_per_token.
    case = _make_case(2, 2, 16, layout, 100, 700, extra=True, block_size=block_size, spare_rows=spare_rows)
    check_against_oracle(case, _sink(16, "dsv4"), f"{layout} bs{block_size} spare{spare_rows}")


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("b", [2, 40])  # split and single-pass paths
def test_topk_length_and_extra_pool(layout, b):
    topk = 200
    case = _make_case(b, 2, 64, layout, topk, 2000, extra=True)
    b = case["q"].shape[0]  # the emulator scales the batch
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    tl = torch.randint(0, topk + 1, (b,), generator=g, dtype=torch.int32)
    etl = torch.randint(0, case["extra_indices"].shape[-1] + 1, (b,), generator=g, dtype=torch.int32)
    tl[0], etl[0] = 0, 0            # row sees no key at all
    tl[1], etl[1] = 0, 5            # extra pool only
    case["topk_length"], case["extra_topk_length"] = tl.to(K.device), etl.to(K.device)
    out, lse = check_against_oracle(case, _sink(64, "dsv4"), f"{layout} b{b} topk_length")
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.isposinf(lse[0]).all()


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("b", [1, 64])
def test_all_invalid_rows(layout, b):
    case = _make_case(b, 2, 16, layout, 64, 500)
    n_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    case["indices"][0, 0] = -1                       # all -1
    case["indices"][0, 1] = n_slots + torch.arange(64, device=K.device, dtype=torch.int32)  # all out of range
    for kind in (None, "dsv4", "posinf", "neginf"):
        out, lse = check_against_oracle(case, _sink(16, kind), f"{layout} all-invalid sink={kind}")
        assert torch.equal(out[0], torch.zeros_like(out[0])), "empty rows must be exactly 0"
        assert torch.isposinf(lse[0]).all(), "empty rows have lse = +inf"


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("b", [1, 64])
def test_sink_edges(layout, b):
    hq = 64
    case = _make_case(b, 1, hq, layout, 300, 2000, extra=True)
    out_none, lse_none = run_cuda(case, None)
    out_neg, lse_neg = run_cuda(case, _sink(hq, "neginf"))
    out_pos, lse_pos = run_cuda(case, _sink(hq, "posinf"))
    assert torch.equal(out_neg, out_none) and torch.equal(lse_neg, lse_none), "-inf sink must be a bitwise no-op"
    assert torch.equal(out_pos, torch.zeros_like(out_pos)), "+inf sink must give all-zero rows"
    assert torch.equal(lse_pos, lse_none), "lse excludes the sink"
    assert torch.isfinite(lse_pos).all()
    check_against_oracle(case, _sink(hq, "large"), f"{layout} large sinks")


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_non_contiguous_q_and_indices(layout):
    b, s_q, hq, topk = 3, 2, 16, 90
    case = _make_case(b, s_q, hq, layout, topk, 800, extra=True)
    b, d = case["q"].shape[0], case["q"].shape[-1]  # the emulator scales the batch
    # q as [b, hq, s_q, d + 64] storage, transposed and narrowed: every stride differs from dense.
    q_store = torch.randn(b, hq, s_q, d + 64, device=K.device).to(torch.bfloat16)
    q_store[..., :d] = case["q"].transpose(1, 2)
    q_nc = q_store[..., :d].transpose(1, 2)
    idx_store = torch.full((b, s_q + 1, topk + 7), -1, dtype=torch.int32, device=K.device)
    idx_store[:, :s_q, :topk] = case["indices"]
    idx_nc = idx_store[:, :s_q, :topk]
    assert not q_nc.is_contiguous() and not idx_nc.is_contiguous()
    sink = _sink(hq, "dsv4")
    out_dense, lse_dense = check_against_oracle(case, sink, f"{layout} dense")
    out, lse = run_cuda(case, sink, q=q_nc, indices=idx_nc)
    assert torch.equal(out, out_dense) and torch.equal(lse, lse_dense), "strided inputs must give identical bits"


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("b", [1, 128])
def test_deterministic(layout, b):
    case = _make_case(b, 2, 64, layout, 640, 4096, extra=True)
    sink = _sink(64, "dsv4")
    out1, lse1 = run_cuda(case, sink)
    out2, lse2 = run_cuda(case, sink)
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)


@pytest.mark.parametrize("layout", ["v4", "v32"])
@GPU_ONLY
def test_cuda_graph_capture_and_replay(layout):
    b, s_q, hq, topk = 2, 2, 64, 640
    case = _make_case(b, s_q, hq, layout, topk, 4096, extra=True)
    sink = _sink(hq, "dsv4")
    fwd = _cuda_fwd()
    q, idx = case["q"].clone(), case["indices"].clone()
    out = helpers.nan_like((b, s_q, hq, 512), torch.bfloat16, K.device)
    lse = helpers.nan_like((b, hq, s_q), torch.float32, K.device)

    def launch():
        fwd(q, case["kv_cache"], idx, _scale(case), sink, None, layout, case["extra_kv_cache"],
            case["extra_indices"], None, out, lse)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()  # warm up outside capture (first-call attribute setup)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    # New data in the static buffers, then replay: must equal an eager run on that data.
    fresh = _make_case(b, s_q, hq, layout, topk, 4096)
    q.copy_(fresh["q"])
    idx.copy_(torch.remainder(fresh["indices"], 4096))
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    graph.replay()
    K.synchronize()
    eager_case = dict(case, q=q.clone(), indices=idx.clone())
    out_e, lse_e = run_cuda(eager_case, sink)
    assert torch.equal(out, out_e) and torch.equal(lse, lse_e)
    out64, lse64 = run_oracle(eager_case, sink, torch.float64)
    out_lp, lse_lp = run_oracle(eager_case, sink, torch.bfloat16)
    helpers.check_close(out, out64, out_lp, f"{layout} graph out")
    helpers.check_close(lse, lse64, lse_lp, f"{layout} graph lse")


def test_rejects_wrong_head_dim():
    case = _make_case(1, 1, 8, "v4", 16, 100)
    bad = dict(case, layout="v32")  # v32 needs d_qk 576, q has 512
    with pytest.raises(RuntimeError, match="d_qk"):
        run_cuda(bad, None)
