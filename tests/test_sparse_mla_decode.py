"""sparse_mla_decode over the byte-exact FP8 paged caches on every backend (tests/targets.py),
against the float64 oracle.

Caches come from sinkops.pack_kv_cache through helpers.make_sparse_decode_case (v32 with spare
rows, v4 with padded blocks), so kernels read through a padded block stride. out and lse are
NaN-poisoned. Small batches take the CUDA kernel's split-k + combine path, large ones its single
pass (the emulator models 16 SMs, so it runs 1/8 of the batch for the same paths).
"""
from __future__ import annotations

import math
import os

import pytest
import torch

import helpers
from targets import BY_NAME, params

LAYOUTS = ["v4", "v32"]


def _make_case(target, b, s_q, hq, layout, topk, num_tokens, extra=False, block_size=64, **kw):
    if target.batch_divisor > 1 and b > 8:  # the emulator: the same split plans on 1/8 of the SMs
        b //= target.batch_divisor
    elif target.max_size != "large":  # CPU targets: the batch only multiplies the work
        b = min(b, 4 if target.max_size == "tiny" else 16)
    return helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, num_tokens, block_size=block_size,
                                           device=target.device, extra=extra, **kw)


def _scale(case):
    return 1.0 / math.sqrt(case["q"].shape[-1])


def check_against_oracle(target, case, sink, name, scale=None):
    scale = _scale(case) if scale is None else scale
    out, lse = helpers.run_decode(target, case, scale, sink)
    out64, lse64 = helpers.decode_oracle(case, scale, sink)
    out_lp, lse_lp = helpers.decode_oracle(case, scale, sink, compute_dtype=torch.bfloat16)
    helpers.check_close(out, out64, out_lp, f"{target} {name} out")
    helpers.check_close(lse, lse64, lse_lp, f"{target} {name} lse")
    return out, lse


def _sink(hq, kind):
    return None if kind is None else helpers.sinks_like(hq, kind)


# (b, s_q, hq, topk, num_tokens, extra, sink kind): Hq 1..128, topk 1..2048, s_q 1 and 2, batch 1..64.
SHAPES = [
    (2, 1, 1, 1, 100, False, "dsv4", "tiny"),         # one key, one head
    (4, 2, 16, 17, 300, False, None, "tiny"),         # partial tile, no sink
    (3, 2, 8, 64, 500, True, "mixed", "tiny"),        # extra pool, -inf/+inf/finite sinks per head
    (1, 1, 64, 640, 4096, False, "dsv4", "small"),    # the latency target shape: many splits
    (7, 2, 1, 2048, 3000, False, "large", "small"),
    (33, 1, 16, 17, 200, False, "dsv4", "small"),
    (64, 1, 64, 64, 2048, False, "dsv4", "small"),    # 64 CTAs -> 2 splits on 132 SMs
    (1, 2, 128, 2048, 8192, False, "dsv4", "large"),  # two head blocks, 64 tiles split over the SMs
    (16, 1, 64, 640, 4096, True, None, "large"),
    (64, 2, 128, 640, 4096, True, "dsv4", "large"),   # 256 CTAs -> single pass
]


def _shape_cases():
    return [dict(layout=lay, shape=s[:7], size=s[7]) for lay in LAYOUTS for s in SHAPES]


@pytest.mark.parametrize("target,c", params(cases=_shape_cases(), op="mla", case_id=lambda c: "{}_b{}_sq{}_h{}_k{}_n{}_x{}_{}".format(c["layout"], *c["shape"])))
def test_matches_oracle(target, c):
    b, s_q, hq, topk, n_tok, extra, sink_kind = c["shape"]
    case = _make_case(target, b, s_q, hq, c["layout"], topk, n_tok, extra=extra)
    check_against_oracle(target, case, _sink(hq, sink_kind), str(c["shape"]))


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("block_size,spare_rows", [(16, 2), (64, 1), (1, 0)])
def test_block_strides(target, layout, block_size, spare_rows):
    case = _make_case(target, 2, 2, 16, layout, 40, 300, block_size=block_size, spare_rows=spare_rows, extra=True)
    check_against_oracle(target, case, _sink(16, "dsv4"), f"{layout} bs{block_size} spare{spare_rows}")


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b", [2, 40])  # split and single-pass paths of the CUDA kernel
def test_topk_length_and_extra_pool(target, layout, b):
    topk = 200 if target.max_size != "tiny" else 40
    case = _make_case(target, b, 2, 64 if target.max_size != "tiny" else 16, layout, topk, 2000, extra=True)
    b, hq = case["q"].shape[0], case["q"].shape[2]
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    tl = torch.randint(0, topk + 1, (b,), generator=g, dtype=torch.int32)
    etl = torch.randint(0, case["extra_indices"].shape[-1] + 1, (b,), generator=g, dtype=torch.int32)
    tl[0], etl[0] = 0, 0            # row sees no key at all
    tl[1], etl[1] = 0, 5            # extra pool only
    case["topk_length"], case["extra_topk_length"] = tl.to(target.device), etl.to(target.device)
    out, lse = check_against_oracle(target, case, _sink(hq, "dsv4"), f"{layout} b{b} topk_length")
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.isposinf(lse[0]).all()


@pytest.mark.parametrize("target,c", params(cases=[dict(layout=lay, size="large") for lay in LAYOUTS], op="mla",
                                            case_id=lambda c: c["layout"]))
def test_many_items_per_cta(target, c):
    """~600 (head block, row) items, so a persistent kernel runs ~5 per CTA: rows that see no key,
    only the extra pool or a prefix of the main one, in every order. 600 + 301 keys = 15 blocks
    per item, so consecutive items start on other buffers and phases (a multiple of 4 would not)."""
    case = _make_case(target, 150, 2, 128, c["layout"], 600, 4096, extra=True)
    assert (case["indices"].shape[-1] + case["extra_indices"].shape[-1] + 63) // 64 % 4 != 0
    b = case["q"].shape[0]
    tl = torch.randint(0, 601, (b,), dtype=torch.int32)
    etl = torch.randint(0, case["extra_indices"].shape[-1] + 1, (b,), dtype=torch.int32)
    tl[::5], etl[::5] = 0, 0   # rows with no key between the others
    tl[1::7] = 0               # extra pool only
    case["topk_length"], case["extra_topk_length"] = tl.to(target.device), etl.to(target.device)
    out, lse = check_against_oracle(target, case, _sink(128, "dsv4"), f"{c['layout']} many items")
    assert torch.equal(out[0], torch.zeros_like(out[0]))


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b", [1, 64])
def test_all_invalid_rows(target, layout, b):
    case = _make_case(target, b, 2, 16, layout, 64, 500)
    n_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    case["indices"][0, 0] = -1                       # all -1
    case["indices"][0, 1] = n_slots + torch.arange(64, device=target.device, dtype=torch.int32)  # all out of range
    for kind in (None, "dsv4", "posinf", "neginf"):
        out, lse = check_against_oracle(target, case, _sink(16, kind), f"{layout} all-invalid sink={kind}")
        assert torch.equal(out[0], torch.zeros_like(out[0])), "empty rows must be exactly 0"
        assert torch.isposinf(lse[0]).all(), "empty rows have lse = +inf"


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b", [1, 64])
def test_sink_edges(target, layout, b):
    hq = 64 if target.max_size != "tiny" else 16
    case = _make_case(target, b, 1, hq, layout, 300 if target.max_size != "tiny" else 40, 2000, extra=True)
    out_none, lse_none = helpers.run_decode(target, case, _scale(case), None)
    out_neg, lse_neg = helpers.run_decode(target, case, _scale(case), _sink(hq, "neginf"))
    out_pos, lse_pos = helpers.run_decode(target, case, _scale(case), _sink(hq, "posinf"))
    assert torch.equal(out_neg, out_none) and torch.equal(lse_neg, lse_none), "-inf sink must be a bitwise no-op"
    assert torch.equal(out_pos, torch.zeros_like(out_pos)), "+inf sink must give all-zero rows"
    assert torch.equal(lse_pos, lse_none), "lse excludes the sink"
    assert torch.isfinite(lse_pos).all()
    check_against_oracle(target, case, _sink(hq, "large"), f"{layout} large sinks")


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b", [1, 64])
@pytest.mark.parametrize("scale", [1.0, 0.0, -0.05])
def test_large_and_non_positive_scales(target, layout, b, scale):
    """Scale 1: a row's max grows by more than the sm90 kernel's lazy-rescale threshold (8 log2
    units) in later blocks as well as by less (split and single-pass paths); 0 and negative scales
    run the mma.sync kernel on Hopper."""
    hq, topk = {"large": (128, 1152), "small": (64, 640)}.get(target.max_size, (16, 40))
    case = _make_case(target, b, 1, hq, layout, topk, 4096)
    check_against_oracle(target, case, _sink(hq, "dsv4"), f"{layout} scale {scale}", scale)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_q_and_indices(target, layout):
    b, s_q, hq, topk = 3, 2, 16, 40
    case = _make_case(target, b, s_q, hq, layout, topk, 800, extra=True)
    dev, d = target.device, case["q"].shape[-1]
    # q as [b, hq, s_q, d + 64] storage, transposed and narrowed: every stride differs from dense.
    q_store = torch.randn(b, hq, s_q, d + 64, device=dev).to(torch.bfloat16)
    q_store[..., :d] = case["q"].transpose(1, 2)
    q_nc = q_store[..., :d].transpose(1, 2)
    idx_store = torch.full((b, s_q + 1, topk + 7), -1, dtype=torch.int32, device=dev)
    idx_store[:, :s_q, :topk] = case["indices"]
    idx_nc = idx_store[:, :s_q, :topk]
    assert not q_nc.is_contiguous() and not idx_nc.is_contiguous()
    sink = _sink(hq, "dsv4")
    out_dense, lse_dense = check_against_oracle(target, case, sink, f"{layout} dense")
    out, lse = helpers.run_decode(target, dict(case, q=q_nc, indices=idx_nc), _scale(case), sink)
    assert torch.equal(out, out_dense) and torch.equal(lse, lse_dense), "strided inputs must give identical bits"


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b", [1, 128])
def test_deterministic(target, layout, b):
    hq, topk = (64, 640) if target.max_size != "tiny" else (16, 64)
    case = _make_case(target, b, 2, hq, layout, topk, 4096, extra=True)
    sink = _sink(hq, "dsv4")
    out1, lse1 = helpers.run_decode(target, case, _scale(case), sink)
    out2, lse2 = helpers.run_decode(target, case, _scale(case), sink)
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)


@pytest.mark.parametrize("target", params([BY_NAME["cuda"], BY_NAME["triton"]], op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_graph_capture_and_replay(target, layout):
    b, s_q, hq, topk = 2, 2, 64, 640
    case = _make_case(target, b, s_q, hq, layout, topk, 4096, extra=True)
    sink = _sink(hq, "dsv4").cuda()
    q, idx = case["q"].clone(), case["indices"].clone()
    out = helpers.nan_like((b, s_q, hq, 512), torch.bfloat16, "cuda")
    lse = helpers.nan_like((b, hq, s_q), torch.float32, "cuda")

    def launch():
        torch.ops.sinkops.sparse_mla_decode_out(q, case["kv_cache"], idx, _scale(case), sink, None, layout,
                                                case["extra_kv_cache"], case["extra_indices"], None, target.backend,
                                                out=out, lse=lse)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()  # warm up outside capture (first-call attribute setup, Triton compiles)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    # New data in the static buffers, then replay: must equal an eager run on that data.
    fresh = _make_case(target, b, s_q, hq, layout, topk, 4096)
    q.copy_(fresh["q"])
    idx.copy_(torch.remainder(fresh["indices"], 4096))
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    eager_case = dict(case, q=q.clone(), indices=idx.clone())
    out_e, lse_e = helpers.run_decode(target, eager_case, _scale(case), sink)
    assert torch.equal(out, out_e) and torch.equal(lse, lse_e)


def _wide_range_latent(num_tokens, layout, g):
    """bf16 latent whose FP8 groups hold e4m3 subnormals and zeros (values down to 2^-20 of the
    group's largest) and, on every 4th token, scales above 2^7 (values near 2^20)."""
    d = helpers.token_dim(layout)
    mant = 1 + torch.randint(0, 8, (num_tokens, d), generator=g).float() / 8
    sign = torch.where(torch.rand(num_tokens, d, generator=g) < 0.5, -1.0, 1.0)
    x = sign * mant * torch.exp2(-torch.randint(0, 21, (num_tokens, d), generator=g).float())
    x[:, ::64] = 1.0  # each group's amax: the rest spans 2^0 .. 2^-20 of it
    x[::4] *= 2.0 ** 20
    return x.to(torch.bfloat16)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_single_key_rows_are_the_exact_dequantized_values(target, layout):
    """With one valid key and no sink the output row is that key's values, so it must equal the
    cache's dequantization bit for bit: checks the FP8 conversion itself (e4m3 subnormals, zeros,
    scales past 2^7), not only the attention within a tolerance."""
    from sinkops import pack_kv_cache, unpack_kv_cache

    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    n_tok, b, hq = 256, 3, 16
    cache = pack_kv_cache(_wide_range_latent(n_tok, layout, g), layout, 64).to(target.device)
    d = helpers.token_dim(layout)
    # s_q 0 of each row reads a token with scales above 2^7, s_q 1 one below: both of v4's conversion
    # paths (two multiplies, or one where a warp's scales are <= 2^7) run in every draw.
    big = torch.randperm(n_tok // 4, generator=g)[:b] * 4
    small = torch.randperm(n_tok // 4, generator=g)[:b] * 4 + 1 + torch.randint(0, 3, (b,), generator=g)
    slots = torch.stack([big, small], 1).to(torch.int32).reshape(b, 2, 1)
    case = dict(q=torch.randn(b, 2, hq, d, generator=g).to(target.device, torch.bfloat16), kv_cache=cache,
                layout=layout, topk_length=None, indices=slots.to(target.device), extra_kv_cache=None,
                extra_indices=None, extra_topk_length=None)
    out, lse = helpers.run_decode(target, case, _scale(case), None)
    want = unpack_kv_cache(cache, layout)[slots.reshape(-1).long().to(cache.device), :512].reshape(b, 2, 1, 512)
    assert torch.equal(out, want.expand(b, 2, hq, 512).to(out.dtype)), "dequantized values differ"
    assert torch.isfinite(lse).all()


@pytest.mark.parametrize("target", params(op="mla"))
def test_misaligned_out_is_a_value_error(target):
    case = _make_case(target, 2, 1, 16, "v4", 40, 300)
    store = torch.empty(2 * 16 * 512 + 8, dtype=torch.bfloat16, device=target.device)
    out = store[1:1 + 2 * 16 * 512].view(2, 1, 16, 512)  # contiguous, 2 bytes past a 16-byte boundary
    lse = torch.empty(2, 16, 1, dtype=torch.float32, device=target.device)
    with pytest.raises(ValueError, match="out: must be 16-byte aligned"):
        torch.ops.sinkops.sparse_mla_decode_out(case["q"], case["kv_cache"], case["indices"], 0.05, None, None, "v4",
                                                None, None, None, target.backend, out=out, lse=lse)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 1, 64, 640, False), (16, 1, 64, 640, True), (3, 2, 8, 64, True),
                                   (2, 2, 128, 1152, False), (128, 1, 64, 640, True)],
                         ids=lambda s: "b{}_sq{}_h{}_k{}_x{}".format(*s))
def test_cuda_sm80_path_on_hopper(monkeypatch, layout, shape):
    """SINKOPS_CUDA_SM80=1 keeps the mma.sync kernel on Hopper (what A100-class GPUs run; its split
    plan counts 32-key tiles, the sm_90a kernel's 64-key blocks). Both match the oracle and each other."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops.ops import decode as decode_op

    target = BY_NAME["cuda"]
    b, s_q, hq, topk, extra = shape
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, 4096, device="cuda", extra=extra)
    sink = _sink(hq, "dsv4")
    decode_op._PLANS.clear()
    fast, lse_fast = check_against_oracle(target, case, sink, f"{layout} {shape} default path")
    monkeypatch.setenv("SINKOPS_CUDA_SM80", "1")
    decode_op._PLANS.clear()
    portable, lse_portable = check_against_oracle(target, case, sink, f"{layout} {shape} sm80 path")
    decode_op._PLANS.clear()
    assert helpers.rel_l2(fast.float(), portable.float()) < 5e-3
    assert torch.allclose(lse_fast, lse_portable, rtol=1e-4, atol=1e-4)


# (b, s_q, hq, topk, num_tokens, extra, sink kind): the few-heads kernel's N = 8 and 16, split
# (the combine) and single-pass (b * s_q >= CTAs per SM x 132 SMs) plans, partial blocks, both
# pools; 17 heads: the first count the 64-head kernel takes.
FEW_HEADS_SHAPES = [
    (64, 1, 8, 640, 4096, False, "dsv4"),    # V4-Flash at TP-8
    (400, 1, 8, 128, 2048, True, "mixed"),   # single pass (3 CTAs per SM for v4, 2 for v32)
    (1, 1, 1, 1, 100, False, "dsv4"),        # one key, one head
    (3, 2, 5, 64, 500, True, "mixed"),
    (16, 2, 16, 1152, 8192, True, "dsv4"),   # V4-Pro at TP-8
    (1, 1, 16, 2048, 8192, False, "large"),  # 32 splits of one block
    (7, 1, 12, 640, 4096, False, "mixed"),
    (200, 2, 16, 64, 1000, False, None),     # single pass at N = 16
    (5, 1, 17, 100, 1000, True, "dsv4"),     # 17 heads and more: the 64-head kernel by default
    (2, 1, 64, 640, 4096, False, "mixed"),   # ... and the few-heads kernel in 8-head blocks when forced
    (1, 1, 64, 640, 4096, True, "dsv4"),     # batch 1: 8-head blocks by default (the other kernel idles SMs)
    (1, 2, 128, 2048, 8192, True, "dsv4"),
]


def _cut_rows(case, b, topk, extra):
    """Random topk_length (and extra_topk_length) on a GPU decode case, row 0 cut to no key at all."""
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    tl = torch.randint(0, topk + 1, (b,), generator=g, dtype=torch.int32)
    tl[0] = 0
    case["topk_length"] = tl.cuda()
    if extra:
        etl = torch.randint(0, case["extra_indices"].shape[-1] + 1, (b,), generator=g, dtype=torch.int32)
        etl[0] = 0
        case["extra_topk_length"] = etl.cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", FEW_HEADS_SHAPES, ids=lambda s: "b{}_sq{}_h{}_k{}_n{}_x{}_{}".format(*s))
def test_cuda_few_heads_kernel_on_hopper(monkeypatch, layout, shape):
    """On Hopper at most 16 heads take the few-heads kernel (keys in the MMA's M, heads in N: no
    padding to 64 heads); SINKOPS_DECODE_FEW_HEADS=0 gives the 64-head kernel, =1 the few-heads one
    for any head count (8-head blocks above 16). All match the oracle and each other, with rows cut by
    topk_length (row 0 sees no key at all)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops.ops import decode as decode_op

    target = BY_NAME["cuda"]
    b, s_q, hq, topk, n_tok, extra, kind = shape
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, n_tok, device="cuda", extra=extra)
    if b >= 3:
        _cut_rows(case, b, topk, extra)
    sink = _sink(hq, kind)
    decode_op._PLANS.clear()
    default, lse_default = check_against_oracle(target, case, sink, f"{layout} {shape} default kernel")
    runs = [("0", "64-head kernel")] + ([("1", "few-heads kernel, 8-head blocks")] if hq > 16 else [])
    for setting, name in runs:
        monkeypatch.setenv("SINKOPS_DECODE_FEW_HEADS", setting)
        decode_op._PLANS.clear()
        other, lse_other = check_against_oracle(target, case, sink, f"{layout} {shape} {name}")
        decode_op._PLANS.clear()
        assert helpers.rel_l2(default.float(), other.float()) < 5e-3
        assert torch.allclose(lse_default, lse_other, rtol=1e-4, atol=1e-4)
    if b >= 3:
        assert torch.equal(default[0], torch.zeros_like(default[0])) and torch.isposinf(lse_default[0]).all()


def _skip_unless_sm90():
    """Skips unless this is Hopper and the build has the sm_90a kernels (else every run of a test
    that compares sm90 variants takes the sm80 kernel)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops import _build_info
    if torch.cuda.get_device_capability() != (9, 0) or "with the sm_90a" not in _build_info.CORES["cuda"]:
        pytest.skip("needs Hopper and a build with the sm_90a kernels")


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,loads", [((64, 2, 128, 640, True), "tma"), ((64, 2, 128, 640, True), "cp.async"),
                                         ((3, 1, 128, 2048, False), "tma"), ((70, 2, 100, 300, True), "tma"),
                                         ((5, 1, 256, 640, False), "tma"), ((9, 1, 192, 640, True), "tma")],
                         ids=["h128_single_pass", "h128_single_pass_no_tma", "h128_split", "h100", "h256_split",
                              "h192_alone"])
def test_cuda_sm90_row_pairs(monkeypatch, layout, shape, loads):
    """SINKOPS_DECODE_PAIR=1 runs the 64-head sm_90a decode's two head blocks of a row as a 2-CTA
    cluster where the head blocks pair up (each CTA gathers and converts half of every key block and
    sends it to its peer's buffer); 192 heads (three blocks) stay unpaired. With rows cut by
    topk_length (row 0 sees no key), +-inf and finite sinks, single-pass plans (the output staged in the last KV buffer,
    several items a CTA) and split ones, Q by TMA or cp.async: both match the oracle and agree with
    the default kernel to the bit (the same conversion and MMAs over the same bytes)."""
    _skip_unless_sm90()
    from sinkops.ops import decode as decode_op

    target = BY_NAME["cuda"]
    b, s_q, hq, topk, extra = shape
    monkeypatch.setenv("SINKOPS_WA90_TMA", "1" if loads == "tma" else "0")
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, 4096, device="cuda", extra=extra)
    _cut_rows(case, b, topk, extra)
    sink = _sink(hq, "mixed")  # -inf, +inf and finite sinks across the heads of both blocks
    decode_op._PLANS.clear()
    alone = check_against_oracle(target, case, sink, f"{layout} {shape} unpaired")
    monkeypatch.setenv("SINKOPS_DECODE_PAIR", "1")
    pairs = check_against_oracle(target, case, sink, f"{layout} {shape} pairs")
    decode_op._PLANS.clear()
    for a, b_ in zip(alone, pairs):
        assert torch.equal(a, b_)
    assert torch.equal(pairs[0][0], torch.zeros_like(pairs[0][0])) and torch.isposinf(pairs[1][0]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,strided_q", [((64, 2, 128, 640, True), False), ((70, 2, 48, 300, False), True),
                                             ((1, 1, 64, 640, True), True)],
                         ids=["single_pass_h128", "single_pass_h48_strided_q", "split_b1_strided_q"])
def test_cuda_sm90_without_tma(monkeypatch, layout, shape, strided_q):
    """The 64-head sm_90a decode (forced for batch 1, which would take the few-heads kernel) loads Q
    by TMA (a 4-D map over q's strides, evict_first in L2) and, on single-pass plans, stores the
    output by TMA (48 heads: 64-head boxes over a 48-head map);
    SINKOPS_WA90_TMA=0 turns the maps off: the producer's cp.async loads Q, the threads store. Both
    forms match the oracle and agree to the bit (the same MMAs, only the copies differ)."""
    _skip_unless_sm90()
    from sinkops.ops import decode as decode_op

    target = BY_NAME["cuda"]
    b, s_q, hq, topk, extra = shape
    monkeypatch.setenv("SINKOPS_DECODE_FEW_HEADS", "0")  # (batch 1 would take the few-heads kernel, which has no maps)
    decode_op._PLANS.clear()
    case = helpers.make_sparse_decode_case(b, s_q, hq, layout, topk, 4096, device="cuda", extra=extra)
    if strided_q:  # q as [b, hq, s_q, d + 64] storage, transposed and narrowed
        d = case["q"].shape[-1]
        store = torch.randn(b, hq, s_q, d + 64, device="cuda").to(torch.bfloat16)
        store[..., :d] = case["q"].transpose(1, 2)
        case["q"] = store[..., :d].transpose(1, 2)
    sink = _sink(hq, "dsv4")
    by_tma = check_against_oracle(target, case, sink, f"{layout} {shape} by TMA")
    monkeypatch.setenv("SINKOPS_WA90_TMA", "0")
    by_threads = check_against_oracle(target, case, sink, f"{layout} {shape} without TMA")
    decode_op._PLANS.clear()
    for a, b_ in zip(by_tma, by_threads):
        assert torch.equal(a, b_)
