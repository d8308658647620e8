"""window_attention on every backend (tests/targets.py) against the float64 oracle.

docs/DESIGN.md §4: err(ours) <= 2 x err(torch in the same dtype) and bf16 rel L2 < 3e-3; out and lse
are NaN-poisoned, data is fresh and random every run; the edge values of §1 hold exactly.
"""
import math

import pytest
import torch

from helpers import check_close, make_window_case, nan_like, rel_l2, run_window, sinks_like, window_oracle
from targets import BY_NAME, params

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


def _case(hq, hk, d, dv, lq, lk, window, mode, kind, dtype, size):
    return dict(hq=hq, hk=hk, d=d, dv=dv, lq=lq, lk=lk, window=window, mode=mode, kind=kind, dtype=dtype,
                size=size, head_dim=max(d, dv))


# GQA 1, 2, 3, 4, 8, 16, 20, 32; head dims 64, 80, 96, 128, 192, 256 (the CUDA instantiations) and padded ones
# (33 = the unaligned element-load path, 40, 72/48, 160, 17/5); segments 0, 1, < window, >> window;
# Sq != Sk; windows unbounded, causal, (w, w), asymmetric, (0, 0); every sink kind; bf16, fp16, fp32.
CASES = [
    # tiny: every target, the Triton interpreter included
    _case(4, 1, 64, 64, [0, 1, 5, 40], None, (8, 8), "key0", "mimo", BF16, "tiny"),
    _case(4, 2, 80, 80, [1, 40, 3], None, (8, 8), "null", "dsv4", BF16, "tiny"),
    _case(2, 2, 64, 64, [33, 0, 6], None, (-1, -1), "key0", "large", BF16, "tiny"),
    _case(8, 1, 64, 64, [40, 2], None, (6, 0), "null", "mixed", BF16, "tiny"),
    _case(16, 1, 32, 32, [17, 1], None, (4, 4), "key0", "mixed", BF16, "tiny"),
    _case(6, 2, 48, 48, [20, 5], None, (3, 7), "key0", "posinf", F16, "tiny"),
    _case(4, 4, 64, 64, [25, 0, 9], None, (5, 5), "key0", "neginf", BF16, "tiny"),
    _case(4, 2, 64, 64, [12, 30], [30, 12], (4, 4), "key0", "mimo", BF16, "tiny"),
    _case(4, 2, 64, 64, [12, 30], [30, 12], (-1, 0), "null", "dsv4", BF16, "tiny"),
    _case(4, 2, 80, 80, [9, 0, 3], [0, 4, 20], (2, 2), "null", "posinf", BF16, "tiny"),
    _case(4, 1, 64, 64, [37], None, (-1, -1), "none", None, BF16, "tiny"),
    _case(2, 1, 80, 80, [28, 3], None, (10, 10), "none", None, F16, "tiny"),
    _case(4, 2, 64, 64, [30, 1], None, (7, 7), "key0", "mimo", F32, "tiny"),
    _case(2, 1, 17, 5, [11, 3], None, (2, 3), "null", "dsv4", BF16, "tiny"),
    _case(2, 1, 33, 33, [50, 20], None, (5, 5), "key0", "mimo", BF16, "tiny"),
    _case(2, 1, 192, 128, [20, 3], None, (-1, 0), "key0", "mimo", BF16, "tiny"),  # 192 / 128: DeepSeek MLA prefill
    # small: every target but the interpreter
    _case(32, 8, 64, 64, [1024, 1, 0, 300, 63], None, (64, 64), "key0", "mimo", BF16, "small"),
    _case(32, 8, 64, 64, [777, 5], None, (64, 64), "null", "dsv4", F16, "small"),
    _case(4, 4, 80, 80, [500, 7, 0, 129], None, (64, 64), "null", "dsv4", BF16, "small"),
    _case(16, 16, 80, 80, [400, 3], None, (64, 64), "key0", "mixed", F16, "small"),
    _case(6, 2, 96, 96, [333, 17], [200, 400], (32, 16), "key0", "large", F16, "small"),
    _case(16, 1, 128, 128, [500, 5], None, (-1, -1), "null", "mixed", BF16, "small"),
    _case(16, 16, 128, 128, [257, 2], None, (128, 0), "key0", "mixed", F16, "small"),
    _case(8, 1, 256, 256, [300, 40], None, (50, 50), "key0", "mimo", BF16, "small"),
    _case(12, 4, 40, 40, [100, 70], None, (10, 10), "null", "dsv4", BF16, "small"),
    _case(4, 2, 72, 48, [90], [130], (-1, 0), "key0", "mimo", F16, "small"),
    _case(32, 2, 64, 64, [200], None, (7, 7), "none", None, BF16, "small"),
    _case(3, 1, 160, 160, [64, 90], [90, 0], (20, 20), "null", "posinf", BF16, "small"),
    _case(8, 8, 64, 64, [600], None, (-1, -1), "key0", "neginf", BF16, "small"),
    _case(4, 2, 64, 64, [40, 10], [10, 40], (0, 0), "key0", "mimo", BF16, "small"),
    _case(8, 2, 128, 128, [600, 1, 33], [20, 1, 700], (-1, 3), "null", "large", BF16, "small"),
    _case(4, 1, 96, 96, [129, 130], None, (200, 200), "key0", "posinf", BF16, "small"),
    _case(16, 2, 64, 64, [300, 200], None, (128, 128), "key0", "mimo", F32, "small"),
    _case(16, 16, 192, 128, [300, 7], None, (-1, 0), "null", "dsv4", BF16, "small"),
    _case(20, 1, 64, 64, [80, 33], None, (16, 16), "key0", "mimo", BF16, "small"),  # group 20: not a power of two
    _case(48, 3, 64, 64, [50], None, (8, 8), "null", "mixed", F16, "small"),
    # large: the GPU targets only
    _case(2, 1, 64, 64, [5000], None, (64, 64), "key0", "mimo", BF16, "large"),
    _case(8, 8, 64, 64, [2048], None, (-1, -1), "key0", "neginf", BF16, "large"),
    _case(16, 1, 128, 128, [700, 5], None, (-1, -1), "null", "mixed", BF16, "large"),
    _case(32, 8, 64, 64, [1024, 1, 0, 300, 2048, 63], None, (64, 64), "key0", "mixed", BF16, "large"),
    _case(12, 4, 96, 96, [700, 1500, 0, 1], [900, 1400, 5, 1], (-1, -1), "key0", "mimo", BF16, "large"),
    _case(8, 1, 256, 256, [700, 1500], None, (-1, 0), "null", "dsv4", BF16, "large"),
    _case(16, 16, 192, 128, [2048, 1000], None, (-1, 0), "key0", "mimo", BF16, "large"),
]


def _cid(c):
    return f"h{c['hq']}-{c['hk']}_d{c['d']}-{c['dv']}_w{c['window'][0]}.{c['window'][1]}_{c['mode']}-{c['kind']}_" \
           f"{str(c['dtype'])[6:]}"


def _check(target, case, window, sinks, mode, name="", scale=None):
    out, lse = run_window(target, case, window, sinks, mode, scale=scale)
    ref_out, ref_lse = window_oracle(case, window, sinks, mode, scale=scale)
    base_out, _ = window_oracle(case, window, sinks, mode, compute_dtype=case["q"].dtype, scale=scale)
    check_close(out, ref_out, base_out, name=f"{target} {name} out")
    # lse is float32 whatever the dtype: its error comes from the fp32 q.k sums only.
    check_close(lse, ref_lse, None, name=f"{target} {name} lse", rel_cap=1e-5)
    return out, lse


@pytest.mark.parametrize("target,c", params(cases=CASES, op="window", case_id=_cid))
def test_matches_oracle(target, c):
    case = make_window_case(c["lq"], c["lk"], hq=c["hq"], hk=c["hk"], d=c["d"], dv=c["dv"], dtype=c["dtype"],
                            device=target.device)
    sinks = None if c["mode"] == "none" else sinks_like(c["hq"], c["kind"])
    _check(target, case, c["window"], sinks, c["mode"], _cid(c))


@pytest.mark.parametrize("target", params(op="window"))
def test_null_sink_neginf_is_bitwise_noop(target):
    case = make_window_case([1, 90, 40], hq=8, hk=2, d=80, device=target.device)
    plain_out, plain_lse = run_window(target, case, (6, 6), None, "none")
    out, lse = run_window(target, case, (6, 6), sinks_like(8, "neginf"), "null")
    assert torch.equal(out, plain_out) and torch.equal(lse, plain_lse)
    mixed = sinks_like(8, "mixed")
    out, lse = run_window(target, case, (6, 6), mixed, "null")
    neg = torch.isneginf(mixed).to(target.device)
    assert torch.equal(out[:, neg], plain_out[:, neg]) and torch.equal(lse, plain_lse)


@pytest.mark.parametrize("target", params(op="window"))
def test_null_sink_posinf_gives_zero_rows_and_unchanged_lse(target):
    case = make_window_case([3, 60], hq=4, hk=4, d=64, device=target.device)
    _, plain_lse = run_window(target, case, (40, 4), None, "none")
    out, lse = run_window(target, case, (40, 4), sinks_like(4, "posinf"), "null")
    assert (out == 0).all() and torch.equal(lse, plain_lse) and torch.isfinite(lse).all()


@pytest.mark.parametrize("target", params(op="window"))
def test_key0_posinf_outputs_exactly_v0(target):
    case = make_window_case([50, 7], hq=4, hk=2, d=80, device=target.device)
    out, lse = run_window(target, case, (5, 5), sinks_like(4, "posinf"), "key0")
    for q0, sq in ((0, 50), (50, 7)):
        sees = (torch.arange(sq) <= 5).to(target.device)  # key 0 is visible to the first window_left + 1 queries
        for h in range(4):
            v0 = case["v"][q0, h // 2]
            rows = out[q0:q0 + sq, h][sees]
            assert torch.equal(rows, v0.expand_as(rows)), h
            assert torch.isposinf(lse[h, q0:q0 + sq][sees]).all()
            assert torch.isfinite(lse[h, q0:q0 + sq][~sees]).all()


@pytest.mark.parametrize("target", params(op="window"))
def test_key0_neginf_masks_key0_and_empty_rows(target):
    # window (0, 0) on Sq == Sk: row 0 sees only key 0 -> empty once key 0 is masked.
    case = make_window_case([30, 1, 0], [30, 1, 5], hq=4, hk=1, d=64, device=target.device)
    out, lse = run_window(target, case, (0, 0), sinks_like(4, "neginf"), "key0")
    for row in (0, 30):
        assert (out[row] == 0).all() and torch.isposinf(lse[:, row]).all()
    _check(target, case, (0, 0), sinks_like(4, "neginf"), "key0", "key0 -inf diag")


@pytest.mark.parametrize("target", params([BY_NAME["triton"], BY_NAME["triton-interp"]], op="window"))
@pytest.mark.parametrize("window,kind", [((5, 5), "mixed"), ((-1, 0), "mimo"), ((3, 40), "posinf")])
def test_triton_key0_bias_in_every_block(target, window, kind):
    """The Triton kernel adds the key0 bias by a select in every key block (no peeled first block):
    segments of several blocks, the bias only where the key is 0, against the oracle."""
    case = make_window_case([70, 1, 33], hq=8, hk=2, d=64, device=target.device)
    _check(target, case, window, sinks_like(8, kind), "key0", f"key0 {window} {kind}")


@pytest.mark.parametrize("target", params(op="window"))
def test_rows_that_see_no_key(target):
    # segment 0: queries bottom-right aligned far before its 3 keys; segment 1: no key at all.
    case = make_window_case([40, 20], [3, 0], hq=4, hk=2, d=64, device=target.device)
    for mode, kind in (("key0", "posinf"), ("null", "posinf"), ("null", "neginf"), ("key0", "mimo"), ("none", None)):
        sinks = None if kind is None else sinks_like(4, kind)
        out, lse = run_window(target, case, (1, 0), sinks, mode)
        empty = torch.cat([torch.arange(37), torch.arange(40, 60)]).to(target.device)
        assert torch.equal(out[empty], torch.zeros_like(out[empty])), mode
        assert torch.isposinf(lse[:, empty]).all(), mode
        assert not torch.isnan(out).any() and not torch.isnan(lse).any()


@pytest.mark.parametrize("target", params(op="window"))
def test_no_queries_and_no_keys(target):
    case = make_window_case([0, 0], [3, 0], hq=2, hk=1, d=16, device=target.device)
    out, lse = run_window(target, case, (2, 2), sinks_like(2, "mimo"), "key0")
    assert out.shape == (0, 2, 16) and lse.shape == (2, 0)
    case = make_window_case([4, 2], [0, 0], hq=2, hk=1, d=16, device=target.device)
    out, lse = run_window(target, case, (2, 2), sinks_like(2, "dsv4"), "null")
    assert (out == 0).all() and torch.isposinf(lse).all()


@pytest.mark.parametrize("target", params(op="window"))
def test_deterministic(target):
    lens = [300, 1, 117] if target.max_size != "tiny" else [40, 1, 17]
    case = make_window_case(lens, hq=8, hk=2, d=64, device=target.device)
    sinks = sinks_like(8, "mimo")
    for mode in ("key0", "null"):
        a = run_window(target, case, (64, 64), sinks, mode)
        b = run_window(target, case, (64, 64), sinks, mode)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), mode


@pytest.mark.parametrize("target", params(op="window"))
def test_strided_inputs_and_output(target):
    # q, k, v as views of one packed qkv buffer; out with a padded head stride, the padding untouched.
    hq, hk, d = 8, 2, 64
    base = make_window_case([30, 50], hq=hq + 2 * hk, hk=1, d=d, device=target.device)
    qkv = base["q"]
    case = dict(base, q=qkv[:, :hq], k=qkv[:, hq:hq + hk], v=qkv[:, hq + hk:])
    dense = dict(case, q=case["q"].contiguous(), k=case["k"].contiguous(), v=case["v"].contiguous())
    out_buf = nan_like((qkv.shape[0], hq, d + 16), BF16, target.device)
    sinks = sinks_like(hq, "mimo")
    out, lse = run_window(target, case, (10, 10), sinks, "key0", out=out_buf[..., :d])
    out_dense, lse_dense = run_window(target, dense, (10, 10), sinks, "key0")
    assert torch.equal(out, out_dense) and torch.equal(lse, lse_dense)
    assert torch.isnan(out_buf[..., d:]).all()


@pytest.mark.parametrize("target", params(op="window"))
def test_sink_is_never_scaled(target):
    # A large softmax scale must not touch the sink: key0 bias and null sink are natural-log logits.
    case = make_window_case([100], hq=4, hk=2, d=64, device=target.device)
    for mode in ("key0", "null"):
        sinks = sinks_like(4, "dsv4")
        out, lse = run_window(target, case, (16, 16), sinks, mode, scale=0.5)
        from sinkops import reference

        c = case
        ref_out, ref_lse = reference.window_attention(c["q"].double(), c["k"].double(), c["v"].double(),
                                                      c["cu_seqlens_q"], c["cu_seqlens_k"], window_size=(16, 16),
                                                      softmax_scale=0.5, sinks=sinks.to(target.device),
                                                      sink_mode=mode)
        assert rel_l2(out, ref_out) < 1e-2 and rel_l2(lse, ref_lse) < 1e-5, mode
        assert math.isfinite(rel_l2(out, ref_out))


@pytest.mark.parametrize("target", params(op="window"))
def test_mimo_accuracy_table(target):
    """Upstream MiMo fix: bf16 rel. error 8.7e-3 with sinks dropped, 1.9e-3 with sinks fused."""
    segs = [256, 512, 128, 1024, 64, 256] if target.max_size != "tiny" else [64, 32]
    case = make_window_case(segs, hq=32 if target.max_size != "tiny" else 8, hk=8 if target.max_size != "tiny" else 2,
                            d=64, device=target.device)
    hq = case["q"].shape[1]
    sinks = -0.10 + 0.69 * torch.rand(hq)
    window = (64, 64) if target.max_size != "tiny" else (16, 16)
    ref_out, _ = window_oracle(case, window, sinks, "key0")
    fused, _ = run_window(target, case, window, sinks, "key0")
    dropped, _ = run_window(target, case, window, None, "none")
    base, _ = window_oracle(case, window, sinks, "key0", compute_dtype=BF16)
    e_fused, e_dropped, e_base = rel_l2(fused, ref_out), rel_l2(dropped, ref_out), rel_l2(base, ref_out)
    print(f"\nMiMo-like key0 accuracy on {target} (bf16 rel L2 vs float64), segments {segs}: dropped "
          f"{e_dropped:.2e} (upstream 8.7e-3), fused {e_fused:.2e} (upstream 1.9e-3), torch bf16 {e_base:.2e}")
    assert e_fused < 3e-3 and e_fused <= 2 * e_base + 1e-5
    if target.max_size != "tiny":
        assert e_dropped > 3e-3


# ---------------------------------------------------------------------------- GPU only

CUDA = [BY_NAME["cuda"], BY_NAME["triton"]]


@pytest.mark.parametrize("target", params(CUDA, op="window"))
def test_more_segments_than_grid_z(target):
    _more_segments_than_grid_z(target)


@pytest.mark.gpu
def test_more_segments_than_grid_z_wide_window_kernel(monkeypatch):
    """The same through the sm_90a wide-window kernel (forced: window (0, 0) is narrow), whose CTAs
    carry their K/V stream and Q-barrier phase from one segment to the next."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_WIDE", "1")
    _more_segments_than_grid_z(BY_NAME["cuda"])


def _more_segments_than_grid_z(target):
    # 70000 one-token segments (> 65535, the grid's z limit: the kernels loop over the batch).
    # With window (0, 0) each query sees only its own key: out == v bit for bit, lse = x + sink.
    n, h, d = 70000, 2, 64
    g = torch.Generator(device="cuda").manual_seed(1234)
    q = torch.randn(n, h, d, device="cuda", generator=g).to(BF16)
    k = torch.randn(n, h, d, device="cuda", generator=g).to(BF16)
    v = torch.randn(n, h, d, device="cuda", generator=g).to(BF16)
    cu = torch.arange(n + 1, dtype=torch.int32, device="cuda")
    case = dict(q=q, k=k, v=v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=1, max_seqlen_k=1)
    sinks = sinks_like(h, "mimo")
    out, lse = run_window(target, case, (0, 0), sinks, "key0")
    assert torch.equal(out, v)
    x = (q.double() * k.double()).sum(-1).T * d ** -0.5 + sinks.to("cuda").double()[:, None]
    assert torch.allclose(lse.double(), x, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("window", [(-1, -1), (16, 16)])
@pytest.mark.parametrize("target", params(op="window"))
def test_keys_outside_a_segment_never_reach_it(target, window):
    """K / V rows of other segments and the padding rows after cu_seqlens_k[-1] (uninitialized
    memory in a server's buffers) are never read into a segment: NaN there leaves the other
    segments exact. (The sm_90a kernels load by TMA only tiles that lie inside their segment; a tile
    that crosses the segment's end is copied with its tail zero-filled: a masked key still multiplies
    its V row by 0 in the MMA. Segments 0 and 2 end inside a 64- and a 128-key tile.)"""
    lens, pad = [70, 30, 131], 20
    case = make_window_case(lens + [pad], hq=4, hk=2, d=64, device=target.device)
    cu = torch.tensor([0, 70, 100, 231], dtype=torch.int32, device=target.device)
    case.update(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=131, max_seqlen_k=131)
    clean = {n: torch.cat([case[n][:70], case[n][100:231]]) for n in ("q", "k", "v")}
    two = torch.tensor([0, 70, 201], dtype=torch.int32, device=target.device)
    clean.update(cu_seqlens_q=two, cu_seqlens_k=two, max_seqlen_q=131, max_seqlen_k=131)
    for n in ("k", "v"):
        case[n][70:100] = float("nan")
        case[n][231:] = float("nan")
    sinks = sinks_like(4, "mimo")
    out, lse = run_window(target, case, window, sinks, "key0")
    ref_out, ref_lse = window_oracle(clean, window, sinks, "key0")
    base_out, _ = window_oracle(clean, window, sinks, "key0", compute_dtype=BF16)
    rows = torch.cat([torch.arange(70), torch.arange(100, 231)]).to(out.device)
    check_close(out[rows], ref_out, base_out, name=f"{target} out beside NaN segments")
    check_close(lse[:, rows], ref_lse, None, name=f"{target} lse beside NaN segments", rel_cap=1e-5)


@pytest.mark.parametrize("target", params(CUDA, op="window"))
def test_tensor_over_2_pow_31_elements(target):
    _over_2_pow_31_elements(target)


@pytest.mark.gpu
def test_tensor_over_2_pow_31_elements_wide_window_kernel(monkeypatch):
    """The same through the sm_90a wide-window kernel (forced: its default is wide windows)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_WIDE", "1")
    _over_2_pow_31_elements(BY_NAME["cuda"])


def _over_2_pow_31_elements(target):
    # k and v are views of one [Tk, 2, Hk, D] buffer of > 2^31 elements (~4.3 GB bf16); only the last
    # segment has queries, so every K/V element read sits past element 2^31.
    hk, hq, d, tail = 8, 16, 128, 300
    tk = (1 << 31) // (2 * hk * d) + 2048
    kv = torch.empty(tk, 2, hk, d, dtype=BF16, device="cuda")
    kv[-tail - 8:].normal_()
    k, v = kv[:, 0], kv[:, 1]
    assert (tk - tail) * k.stride(0) > 2**31
    q = torch.randn(tail, hq, d, device="cuda").to(BF16)
    cu_q = torch.tensor([0, 0, tail], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, tk - tail, tk], dtype=torch.int32, device="cuda")
    case = dict(q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=tail, max_seqlen_k=tk - tail)
    sinks = sinks_like(hq, "mimo")
    out, lse = run_window(target, case, (64, 64), sinks, "key0")
    small = dict(q=q, k=k[-tail:].contiguous(), v=v[-tail:].contiguous(),
                 cu_seqlens_q=torch.tensor([0, tail], dtype=torch.int32, device="cuda"),
                 cu_seqlens_k=torch.tensor([0, tail], dtype=torch.int32, device="cuda"))
    ref_out, ref_lse = window_oracle(small, (64, 64), sinks, "key0")
    base_out, _ = window_oracle(small, (64, 64), sinks, "key0", compute_dtype=BF16)
    check_close(out, ref_out, base_out, name="2^31 out")
    check_close(lse, ref_lse, None, name="2^31 lse", rel_cap=1e-5)
    del kv


# Cases of the suite that the sm_90a kernel takes on Hopper (d, d_v <= 128, multiples of 8): GQA 1-16,
# d 64 / 80 / 96 / 128 / 72-48, every window kind, every sink kind, Sq != Sk, empty segments.
SM90_CASES = [c for c in CASES if c["size"] != "tiny" and max(c["d"], c["dv"]) <= 128 and c["d"] % 8 == 0
              and c["dv"] % 8 == 0 and c["dtype"] != F32]


@pytest.mark.gpu
@pytest.mark.parametrize("c", SM90_CASES, ids=_cid)
def test_cuda_sm80_path_on_hopper(monkeypatch, c):
    """SINKOPS_CUDA_SM80=1 keeps the mma.sync kernel on Hopper (what A100-class GPUs run); the
    default path takes the sm_90a kernel there. Both match the oracle, and each other closely."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    target = BY_NAME["cuda"]
    case = make_window_case(c["lq"], c["lk"], hq=c["hq"], hk=c["hk"], d=c["d"], dv=c["dv"], dtype=c["dtype"],
                            device="cuda")
    sinks = None if c["mode"] == "none" else sinks_like(c["hq"], c["kind"])
    fast, _ = _check(target, case, c["window"], sinks, c["mode"], "default path")
    monkeypatch.setenv("SINKOPS_CUDA_SM80", "1")
    portable, _ = _check(target, case, c["window"], sinks, c["mode"], "sm80 path")
    seen = torch.isfinite(fast)
    assert torch.equal(seen, torch.isfinite(portable))
    assert rel_l2(fast[seen], portable[seen]) < 5e-3


@pytest.mark.gpu
@pytest.mark.parametrize("loads", ["tma", "cp.async"])
@pytest.mark.parametrize("kernel", ["wide", "narrow"])
@pytest.mark.parametrize("c", SM90_CASES, ids=_cid)
def test_cuda_sm90_wide_and_narrow_kernels(monkeypatch, c, kernel, loads):
    """The sm_90a path has two kernels: the wide-window one (128-key tiles, each tile's MMAs
    overlapped with the softmax) for windows whose blocks of rows cannot share key tiles (full,
    causal, wide), the narrow one (streaming steps of 16-64-key chunks) for the rest.
    SINKOPS_WA90_WIDE=1 / 0 forces either for every window: both match the oracle, with their
    whole K/V tiles loaded by TMA (the default) and with every tile copied by cp.async
    (SINKOPS_WA90_TMA=0)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_WIDE", "1" if kernel == "wide" else "0")
    monkeypatch.setenv("SINKOPS_WA90_TMA", "1" if loads == "tma" else "0")
    case = make_window_case(c["lq"], c["lk"], hq=c["hq"], hk=c["hk"], d=c["d"], dv=c["dv"], dtype=c["dtype"],
                            device="cuda")
    sinks = None if c["mode"] == "none" else sinks_like(c["hq"], c["kind"])
    _check(BY_NAME["cuda"], case, c["window"], sinks, c["mode"], f"{kernel} kernel")


@pytest.mark.gpu
@pytest.mark.parametrize("loads", ["tma", "cp.async"])
@pytest.mark.parametrize("kernel", ["wide", "narrow"])
@pytest.mark.parametrize("mode", ["key0", "null"])
@pytest.mark.parametrize("d", [64, 128])
def test_cuda_sm90_without_lse(monkeypatch, d, mode, kernel, loads):
    """Inference asks for no lse (the kernels then skip its log): the output is bit for bit the one
    of the same call with lse, in both sm_90a kernels, with the maps (K/V tiles, and Q and the
    output where a warpgroup's rows lie in their segment and the kernel's kQoTma is on: the narrow
    kernel at d 128, the wide one at d 64) and without (SINKOPS_WA90_TMA=0; every segment's last
    partial block). The NaN-poisoned output shows every row was stored."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    import sinkops
    monkeypatch.setenv("SINKOPS_WA90_WIDE", "1" if kernel == "wide" else "0")
    monkeypatch.setenv("SINKOPS_WA90_TMA", "1" if loads == "tma" else "0")
    case = make_window_case([1024, 1, 0, 300, 63, 777], hq=32, hk=8, d=d, device="cuda")
    sinks = sinks_like(32, "mimo")
    with_lse, _ = run_window(BY_NAME["cuda"], case, (64, 64), sinks, mode)
    out = nan_like(with_lse.shape, with_lse.dtype, "cuda")
    sinkops.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"], None, case["max_seqlen_q"],
                             window_size=(64, 64), sinks=sinks.cuda(), sink_mode=mode, out=out, backend="cuda")
    assert torch.equal(out, with_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("steps", [2, 3, 1 << 20])
@pytest.mark.parametrize("c", SM90_CASES, ids=_cid)
def test_cuda_sm90_steps_per_cta(monkeypatch, c, steps):
    """Where consecutive blocks of positions can share their key tiles (bounded windows that fit
    the ring), a CTA of the sm_90a kernel computes a run of them (prefetching the next block's Q
    and K/V); the size picks how many (one wave of CTAs), so small cases run one block a CTA.
    SINKOPS_WA90_STEPS forces 2, 3 or all of a segment's blocks into one CTA (other windows keep
    one): every case still matches the oracle."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_STEPS", str(steps))
    case = make_window_case(c["lq"], c["lk"], hq=c["hq"], hk=c["hk"], d=c["d"], dv=c["dv"], dtype=c["dtype"],
                            device="cuda")
    sinks = None if c["mode"] == "none" else sinks_like(c["hq"], c["kind"])
    _check(BY_NAME["cuda"], case, c["window"], sinks, c["mode"], f"{steps} steps per CTA")


@pytest.mark.gpu
def test_cuda_sm90_steps_per_cta_across_grid_z(monkeypatch):
    """Runs of several steps per CTA while the CTAs also loop over more segments than the grid's z
    limit (each CTA carries its K/V stream and Q-buffer phases from one segment to the next): 70000
    segments of 9 tokens, 64 query heads on one kv head (4 warpgroups of one position: 4 positions
    a step, 3 steps a segment, the last partial), window (0, 0), so out == v bit for bit and lse ==
    the scaled q.k."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_STEPS", "3")
    n_seg, seg, hq, d = 70000, 9, 64, 64
    n = n_seg * seg
    g = torch.Generator(device="cuda").manual_seed(4321)
    q = torch.randn(n, hq, d, device="cuda", generator=g, dtype=BF16)
    k = torch.randn(n, 1, d, device="cuda", generator=g, dtype=BF16)
    v = torch.randn(n, 1, d, device="cuda", generator=g, dtype=BF16)
    cu = torch.arange(0, n + 1, seg, dtype=torch.int32, device="cuda")
    case = dict(q=q, k=k, v=v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=seg, max_seqlen_k=seg)
    out, lse = run_window(BY_NAME["cuda"], case, (0, 0), None, "none")
    assert torch.equal(out, v.expand(n, hq, d))
    x = torch.einsum("thd,td->ht", q.float(), k[:, 0].float()) * d ** -0.5
    assert torch.allclose(lse, x, atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["wide", "narrow"])
@pytest.mark.parametrize("window", [(-1, -1), (-1, 0), (64, 64), (300, 0)])
@pytest.mark.parametrize("mode", ["key0", "null", "none"])
def test_cuda_sm90_large_logits(monkeypatch, kernel, window, mode):
    """Scale 1 at d 64 spreads the logits over ~+-40 log2 units, so a row's running max grows by
    more than the sm_90a kernels' lazy-rescale threshold (8 log2 units, lazy_rescale.cuh) in later
    key tiles as well as by less; both kernels must still match the oracle."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("SINKOPS_WA90_WIDE", "1" if kernel == "wide" else "0")
    case = make_window_case([1000, 37, 600], hq=8, hk=2, d=64, device="cuda")
    sinks = None if mode == "none" else sinks_like(8, "mimo")
    _check(BY_NAME["cuda"], case, window, sinks, mode, f"{kernel} scale 1", scale=1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("scale", [0.0, -0.3, 1e-30])
def test_cuda_window_scale_edge_values(scale):
    """The sm_90a kernel keeps the row max on raw logits (scale > 0 enters the exponent), so a zero
    or negative scale takes the mma.sync kernel; a tiny positive one stays (the key0 bias becomes
    huge in raw units, and so does the lazy-rescale threshold). All match the float64 oracle."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops import reference

    case = make_window_case([300, 77], hq=8, hk=2, d=64, device="cuda")
    for mode in ("key0", "null"):
        sinks = sinks_like(8, "mimo")
        out, lse = run_window(BY_NAME["cuda"], case, (64, 64), sinks, mode, scale=scale)
        c = case
        ref_out, ref_lse = reference.window_attention(c["q"].double(), c["k"].double(), c["v"].double(),
                                                      c["cu_seqlens_q"], c["cu_seqlens_k"], window_size=(64, 64),
                                                      softmax_scale=scale, sinks=sinks.to("cuda"), sink_mode=mode)
        assert rel_l2(out, ref_out) < 1e-2 and rel_l2(lse, ref_lse) < 1e-5, (mode, scale)


@pytest.mark.gpu
@pytest.mark.parametrize("d,hq,hk,window,sm90", [(64, 32, 8, (64, 64), True), (64, 32, 8, (-1, -1), True),
                                                (80, 16, 16, (64, 64), True), (128, 32, 8, (-1, -1), True),
                                                (256, 8, 1, (64, 64), False)])
def test_auto_window_on_the_gpu(d, hq, hk, window, sm90):
    """On a Hopper GPU with the sm_90a kernels built, auto takes CUDA (its sm_90a kernels) for
    d <= 128 (since window v9 also full attention at d 64) and Triton otherwise (d 256: no sm_90a
    kernel); elsewhere Triton (the mma.sync kernel is slower than Triton)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops import _build_info
    from sinkops.cuda import _C
    from sinkops.ops import window as window_op

    import sinkops

    case = make_window_case([300, 5], hq=hq, hk=hk, d=d, device="cuda")
    window_op._PLANS.clear()
    sinkops.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"], None, 300, window_size=window)
    hopper = torch.cuda.get_device_capability() == (9, 0) and "with the sm_90a" in _build_info.CORES["cuda"]
    want = "cuda" if (hopper and sm90 and _C is not None) else "triton"
    assert {p.backend.name for p in window_op._PLANS.values()} == {want}


def test_triton_tile_choice():
    from sinkops.triton.window_attention import window_attention_tile

    for d, group, window, on_gpu in [(64, 4, (64, 64), True), (80, 1, (-1, -1), True), (256, 16, (128, 0), True),
                                     (200, 3, (8, 8), False), (16, 128, (-1, -1), True)]:
        t = window_attention_tile(d, d, group, window[0], window[1], on_gpu)
        for size in (t.block_q, t.heads, t.block_n, t.block_d, t.block_dv):
            assert size & (size - 1) == 0, t  # tl.arange needs powers of two
        assert t.block_d >= d and t.block_d >= 16 and t.heads <= 64
        assert t.heads >= min(group, 64)  # one program serves the whole group when it fits
        if on_gpu:
            assert t.block_q * t.heads >= 16  # tl.dot's minimum M
