"""Triton window attention vs the float64 oracle (DESIGN.md §1, §4).

On CPU the kernel runs under the Triton interpreter with small shapes; `gpu` tests use MiMo-like
shapes on the H200. Every output is NaN-poisoned first, so an unwritten element fails check_close.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton

import pytest  # noqa: E402

from helpers import check_close, make_window_case, nan_like, run_window_backend, sinks_like, window_oracle  # noqa: E402
from sinkops.triton.window_attention import (window_attention_fwd,  # noqa: E402
                                             window_attention_tile)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INF = float("inf")


def _run(case, window, sinks, sink_mode, scale=None, out=None):
    return run_window_backend(window_attention_fwd, case, window, sinks, sink_mode, scale, out)

_oracle = window_oracle

def _check_against_oracle(case, window, sinks, sink_mode, name):
    out, lse = _run(case, window, sinks, sink_mode)
    ref_out, ref_lse = _oracle(case, window, sinks, sink_mode)
    dtype = case["q"].dtype
    base_out = None
    if dtype != torch.float32:
        base_out, _ = _oracle(case, window, sinks, sink_mode, compute_dtype=dtype)
    else:
        base_out, _ = _oracle(case, window, sinks, sink_mode, compute_dtype=torch.float32)
    check_close(out, ref_out, base_out, name=f"{name} out")
    # lse is float32 in every dtype; its error is set by the q.k products, not by the dtype cap
    check_close(lse, ref_lse, None, name=f"{name} lse", rel_cap=1e-5)
    return out, lse


# (hq, hk, d, seqlens_q, seqlens_k, window, sink_mode, sink_kind, dtype)
# segments of length 0, 1, < window, >> window; windows (-1,-1), (w,0), (w,w), asymmetric;
# Sq != Sk; GQA 1, 2, 3, 4, 8, 16; D 64, 80 and odd small; every sink kind.
BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
CASES = [
    (4, 1, 64, [0, 1, 5, 40], None, (8, 8), "key0", "mimo", BF16),
    (4, 2, 80, [1, 40, 3], None, (8, 8), "null", "dsv4", BF16),
    (2, 2, 64, [33, 0, 6], None, (-1, -1), "key0", "large", BF16),
    (8, 1, 64, [40, 2], None, (6, 0), "null", "mixed", BF16),
    (16, 1, 32, [17, 1], None, (4, 4), "key0", "mixed", BF16),
    (6, 2, 48, [20, 5], None, (3, 7), "key0", "posinf", BF16),
    (4, 4, 64, [25, 0, 9], None, (5, 5), "key0", "neginf", BF16),
    (4, 2, 64, [12, 30], [30, 12], (4, 4), "key0", "mimo", BF16),       # Sq != Sk
    (4, 2, 64, [12, 30], [30, 12], (-1, 0), "null", "dsv4", BF16),      # causal, bottom-right
    (4, 2, 80, [9, 0, 3], [0, 4, 20], (2, 2), "null", "posinf", BF16),  # Sk = 0 with Sq > 0
    (4, 1, 64, [37], None, (-1, -1), "none", None, BF16),
    (2, 1, 80, [28, 3], None, (10, 10), "none", None, F16),
    (4, 2, 64, [30, 1], None, (7, 7), "key0", "mimo", F32),
    (8, 2, 80, [21, 4], [5, 30], (-1, 3), "null", "large", F32),
    (3, 1, 24, [15], None, (0, 0), "key0", "neginf", F32),               # rows that see only key 0
]


@pytest.mark.parametrize("hq,hk,d,seqlens_q,seqlens_k,window,sink_mode,sink_kind,dtype", CASES)
def test_matches_oracle(hq, hk, d, seqlens_q, seqlens_k, window, sink_mode, sink_kind, dtype):
    case = make_window_case(seqlens_q, seqlens_k, hq=hq, hk=hk, d=d, dtype=dtype, device=DEVICE)
    sinks = None if sink_mode == "none" else sinks_like(hq, sink_kind)
    _check_against_oracle(case, window, sinks, sink_mode, f"{sink_mode}/{sink_kind} w{window}")


def test_value_head_dim_differs_and_many_heads_per_kv_head():
    # Dv != D, and 128 query heads per KV head (more than one program's head chunk)
    case = make_window_case([5, 2], hq=128, hk=1, d=32, dv=16, dtype=BF16, device=DEVICE)
    _check_against_oracle(case, (2, 2), sinks_like(128, "mimo"), "key0", "dv16 g128")


def test_empty_rows_are_zero_with_infinite_lse():
    # segment 0 has keys 0..3 but queries bottom-right aligned far before them see nothing;
    # segment 1 has no key at all
    case = make_window_case([10, 4], [3, 0], hq=4, hk=2, d=64, dtype=BF16, device=DEVICE)
    for mode, kind in (("key0", "posinf"), ("null", "posinf"), ("null", "neginf"), ("none", None)):
        sinks = None if kind is None else sinks_like(4, kind)
        out, lse = _run(case, (1, 0), sinks, mode)
        # query i of segment 0 sees keys [i - 8, i - 7]: rows 0..6 see none
        empty = torch.cat([torch.arange(7), torch.arange(10, 14)]).to(DEVICE)
        assert torch.equal(out[empty], torch.zeros_like(out[empty])), mode
        assert torch.isposinf(lse[:, empty]).all(), mode
        assert torch.isfinite(lse[:, 7:10]).all() or kind == "posinf", mode


def test_null_sink_neginf_is_bitwise_noop():
    case = make_window_case([1, 29, 40], hq=8, hk=2, d=80, dtype=BF16, device=DEVICE)
    plain_out, plain_lse = _run(case, (6, 6), None, "none")
    out, lse = _run(case, (6, 6), sinks_like(8, "neginf"), "null")
    assert torch.equal(out, plain_out) and torch.equal(lse, plain_lse)
    # heads whose sink is -inf in a mixed vector match the no-sink run bitwise too
    mixed = sinks_like(8, "mixed")
    out, lse = _run(case, (6, 6), mixed, "null")
    neg = torch.isneginf(mixed).to(DEVICE)
    assert torch.equal(out[:, neg], plain_out[:, neg]) and torch.equal(lse, plain_lse)


def test_null_sink_posinf_gives_zero_rows_and_unchanged_lse():
    case = make_window_case([3, 26], hq=4, hk=4, d=64, dtype=BF16, device=DEVICE)
    _, plain_lse = _run(case, (4, 4), None, "none")
    out, lse = _run(case, (4, 4), sinks_like(4, "posinf"), "null")
    assert (out == 0).all() and torch.equal(lse, plain_lse) and torch.isfinite(lse).all()


def test_key0_posinf_outputs_exactly_v0():
    case = make_window_case([20, 7], hq=4, hk=2, d=80, dtype=BF16, device=DEVICE)
    out, lse = _run(case, (5, 5), sinks_like(4, "posinf"), "key0")
    for seg, (q0, k0, sq) in enumerate(((0, 0, 20), (20, 20, 7))):
        sees = torch.arange(sq) <= 5  # key 0 visible to the first window_left + 1 queries
        for h in range(4):
            v0 = case["v"][k0, h // 2]
            rows = out[q0:q0 + sq, h][sees.to(DEVICE)]
            assert torch.equal(rows, v0.expand_as(rows)), (seg, h)
            assert torch.isposinf(lse[h, q0:q0 + sq][sees.to(DEVICE)]).all()
            assert torch.isfinite(lse[h, q0:q0 + sq][~sees.to(DEVICE)]).all()


def test_deterministic():
    case = make_window_case([31, 1, 17], hq=8, hk=2, d=64, dtype=BF16, device=DEVICE)
    sinks = sinks_like(8, "mimo")
    a = _run(case, (4, 4), sinks, "key0")
    b = _run(case, (4, 4), sinks, "key0")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_strided_inputs_and_output():
    # q, k, v as views of one packed qkv buffer (row stride > Hq * D), out with padded head stride
    hq, hk, d = 4, 2, 64
    base = make_window_case([13, 22], hq=hq + 2 * hk, hk=1, d=d, dtype=BF16, device=DEVICE)
    qkv = base["q"]
    case = dict(base, q=qkv[:, :hq], k=qkv[:, hq:hq + hk], v=qkv[:, hq + hk:])
    assert not case["q"].is_contiguous()
    out_buf = nan_like((qkv.shape[0], hq, d + 16), BF16, DEVICE)
    # the strided run must equal the same data made contiguous, bit for bit
    dense = dict(case, q=case["q"].contiguous(), k=case["k"].contiguous(), v=case["v"].contiguous())
    sinks = sinks_like(hq, "mimo")
    out, lse = _run(case, (3, 3), sinks, "key0", out=out_buf[..., :d])
    out_dense, lse_dense = _run(dense, (3, 3), sinks, "key0")
    assert torch.equal(out, out_dense) and torch.equal(lse, lse_dense)
    assert torch.isnan(out_buf[..., d:]).all()  # padding untouched


def test_no_queries_is_a_noop():
    case = make_window_case([0, 0], [3, 0], hq=2, hk=1, d=16, dtype=BF16, device=DEVICE)
    out, lse = _run(case, (2, 2), sinks_like(2, "mimo"), "key0")
    assert out.shape == (0, 2, 16) and lse.shape == (2, 0)


@pytest.mark.parametrize("d,group,window,on_gpu", [(64, 4, (64, 64), True), (80, 1, (-1, -1), True),
                                                   (256, 16, (128, 0), True), (200, 3, (8, 8), False),
                                                   (16, 128, (-1, -1), True)])
def test_tile_choice(d, group, window, on_gpu):
    t = window_attention_tile(d, d, group, window[0], window[1], on_gpu)
    for size in (t.block_q, t.heads, t.block_n, t.block_d, t.block_dv):
        assert size & (size - 1) == 0, t  # tl.arange needs powers of two
    assert t.block_d >= d and t.block_d >= 16 and t.heads <= 64
    assert t.heads >= min(group, 64)  # one program serves the whole group when it fits
    if on_gpu:
        assert t.block_q * t.heads >= 16  # tl.dot's minimum M


# ------------------------------------------------------------------ H200 (bigger shapes)

@pytest.mark.gpu
@pytest.mark.parametrize("sink_mode,kind", [("key0", "mimo"), ("null", "dsv4"), ("none", None),
                                            ("key0", "mixed"), ("null", "mixed")])
def test_mimo_like_gpu(sink_mode, kind):
    case = make_window_case([1024, 1, 0, 300, 2048, 63], hq=32, hk=8, d=64, dtype=BF16, device="cuda")
    sinks = None if kind is None else sinks_like(32, kind)
    _check_against_oracle(case, (64, 64), sinks, sink_mode, f"mimo {sink_mode}/{kind}")


@pytest.mark.gpu
@pytest.mark.parametrize("hq,hk,d,window,dtype", [(16, 16, 80, (64, 64), BF16), (16, 4, 128, (256, 256), F16),
                                                  (8, 1, 256, (-1, 0), BF16), (12, 4, 96, (-1, -1), BF16),
                                                  (16, 2, 64, (128, 128), F32)])
def test_head_dims_and_windows_gpu(hq, hk, d, window, dtype):
    case = make_window_case([700, 1500, 0, 1], [900, 1400, 5, 1], hq=hq, hk=hk, d=d, dtype=dtype, device="cuda")
    _check_against_oracle(case, window, sinks_like(hq, "mimo"), "key0", f"d{d} {window}")


@pytest.mark.gpu
def test_deterministic_gpu():
    case = make_window_case([4096, 1024], hq=32, hk=8, d=64, dtype=BF16, device="cuda")
    sinks = sinks_like(32, "mimo")
    a = _run(case, (64, 64), sinks, "key0")
    b = _run(case, (64, 64), sinks, "key0")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.gpu
def test_offsets_past_2_31_elements_gpu():
    # k/v of 2^25 + 64 tokens x 64 channels > 2^31 elements: segment 1's keys sit past element
    # 2^31 while segment 0 has keys but no queries; then the same for q / out / lse rows.
    d, n_big = 64, (1 << 25) + 64
    small = make_window_case([40], [50], hq=1, hk=1, d=d, dtype=BF16, device="cuda")
    sinks = sinks_like(1, "mimo")
    want, want_lse = _run(small, (8, 8), sinks, "key0")

    def cu(*lens):
        return torch.tensor([0, lens[0], lens[0] + lens[1]], dtype=torch.int32, device="cuda")

    big_kv = lambda src: torch.cat([torch.zeros(n_big, 1, d, dtype=BF16, device="cuda"), src])  # noqa: E731
    case = dict(q=small["q"], k=big_kv(small["k"]), v=big_kv(small["v"]), cu_seqlens_q=cu(0, 40),
                cu_seqlens_k=cu(n_big, 50), max_seqlen_q=40, max_seqlen_k=n_big)
    out, lse = _run(case, (8, 8), sinks, "key0")
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    del case

    q = torch.cat([torch.zeros(n_big, 1, d, dtype=BF16, device="cuda"), small["q"]])
    case = dict(q=q, k=small["k"], v=small["v"], cu_seqlens_q=cu(n_big, 40), cu_seqlens_k=cu(0, 50),
                max_seqlen_q=n_big, max_seqlen_k=50)
    out, lse = _run(case, (8, 8), sinks, "key0")
    assert torch.equal(out[n_big:], want) and torch.equal(lse[:, n_big:], want_lse)
    assert (out[:n_big] == 0).all() and torch.isposinf(lse[:, :n_big]).all()
