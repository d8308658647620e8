"""Backward passes (docs/DESIGN.md §6): window attention (dq, dk, dv, dsinks) and sparse MLA prefill
(dq, dkv, d attn_sink), through torch autograd on every target with backward kernels
(tests/targets.py: cuda (window attention, sm_90a), triton, torch-gpu, triton-interp, torch).

Three layers:
1. the oracle's backward (sinkops.reference.*_backward, float64) equals torch autograd through an
   independent dense formulation (tests/dense_attention.py) for finite and -inf sinks;
2. every backend's gradients (loss = <out, g> + <lse, g_lse>, so the lse gradient is exercised)
   against that oracle with the tolerance rule for gradients (docs/DESIGN.md §4): err <= 2 x the
   error of the same math done by torch in the input dtype + 1e-5, and under the dtype's cap;
3. the edge values stated in §6 exactly (+-inf sinks, empty rows, rows in no segment), determinism,
   and torch.compile(fullgraph=True) of a training step.
"""
import contextlib
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import dense_attention as dense
import sinkops
from helpers import _random_indices, make_sparse_prefill_case, make_window_case, rel_l2, sinks_like
from sinkops import reference
from targets import (BY_NAME, MLA_BACKWARD_TARGETS, WINDOW_BACKWARD_TARGETS, cuda_window_backward_takes,
                     params)

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
_GRAD_CAP = {BF16: 1e-2, F16: 5e-3, F32: 1e-4, torch.float64: 1e-6}


def check_grad(actual, oracle, baseline, name, dtype, inherent=None):
    """Gradient tolerance: no NaN; err <= 2 err(baseline) + 1e-5 and err < the dtype's cap. The sink
    gradient (float32, a sum over rows whose terms cancel, so both errors are noisy) passes the
    looser of the two: err <= max(2 err(baseline) + 1e-5, cap of the inputs' dtype); `inherent`, when
    given, is a second baseline for it: the null sink's formula evaluated exactly from the saved
    (rounded) out, whose error every (out, lse) backward inherits (docs/DESIGN.md §6)."""
    assert actual is not None, f"{name}: no gradient"
    assert not torch.isnan(actual).any(), f"{name}: NaN in the gradient"
    err, base = rel_l2(actual, oracle), rel_l2(baseline, oracle)
    if inherent is not None:  # ... and the backend must compute that formula itself (to float32 rounding)
        own = rel_l2(actual, inherent)
        assert own <= 1e-3, f"{name}: err {own:.3e} against the formula from the saved out"
        base = max(base, rel_l2(inherent, oracle))
    if name.startswith("dsink"):
        bound = max(2 * base + 1e-5, _GRAD_CAP[dtype])
        assert err <= bound, f"{name}: err {err:.3e} > {bound:.3e} (baseline {base:.3e})"
        return err
    assert err <= 2 * base + 1e-5, f"{name}: err {err:.3e} > 2 x baseline {base:.3e} + 1e-5"
    cap = _GRAD_CAP[actual.dtype]
    assert err < cap, f"{name}: err {err:.3e} >= cap {cap:.0e} for {actual.dtype}"
    return err


def null_sink_inherent(sink, lse, g_out, out):
    """dsink of the null sink, -sum_rows p_sink <dout, out>, in float64 from the saved (rounded) out and
    lse (lse [rows, heads], out and g_out [rows, heads, Dv]): the formula of docs/DESIGN.md §6 whose
    error every (out, lse) backward inherits; check_grad's `inherent`."""
    seen = torch.isfinite(lse)
    p_sink = torch.where(seen, torch.sigmoid(sink.double()[None, :] - lse.double()), 0.0)
    d_row = (g_out.double() * out.double()).sum(-1)
    return -(p_sink * d_row).sum(0).cpu()


class _RanOn:
    """For a target whose backward auto picks (a CUDA forward's: docs/DECISIONS.md; auto takes the
    CUDA kernels wherever they run the call): checks that every window backward of the block ran on the
    target's own backend, not on a fallback."""

    def __init__(self, target):
        from sinkops.ops import window_backward
        self.plans, self.name = window_backward._PLANS, target.backend

    def __enter__(self):
        self.plans.clear()

    def __exit__(self, *exc):
        if exc[0] is None and self.name == "cuda":
            ran = {p.backend.name for p in self.plans.values()}
            assert ran == {"cuda"}, f"the window backward ran on {ran}, not on the CUDA kernels"


def _cuda_accepts(target, c):
    return target.backend != "cuda" or cuda_window_backward_takes(c["hq"], c["hk"], c["d"], c["dv"], c["dtype"])


def _loss_grads(outputs, g_out, g_lse):
    """<out, g_out> + <lse, g_lse> over finite lse entries."""
    out, lse = outputs
    finite = torch.isfinite(lse)
    return (out.float() * g_out.float()).sum() + (torch.where(finite, lse, 0.0) * g_lse).sum()


# ------------------------------------------------------------------------------ 1. the oracle itself

ORACLE_WINDOW = [  # (lens_q, lens_k, hq, hk, d, dv, window, mode, sinks kind)
    ([5, 0, 9, 1, 7], None, 4, 2, 16, 8, (-1, -1), "key0", "dsv4"),
    ([5, 0, 9, 1, 7], None, 4, 2, 16, 8, (3, 0), "key0", "neginf"),
    ([6, 11], [9, 4], 6, 3, 8, 8, (2, 5), "key0", "dsv4"),
    ([5, 0, 9, 1, 7], None, 4, 4, 16, 16, (-1, -1), "null", "dsv4"),
    ([6, 11], [9, 4], 4, 1, 8, 12, (-1, 2), "null", "neginf"),
    ([12], None, 2, 1, 8, 8, (4, 4), "none", None),
]


@pytest.mark.parametrize("case", ORACLE_WINDOW, ids=lambda c: f"{c[7]}-{c[8]}-w{c[6][0]}_{c[6][1]}")
def test_window_oracle_backward_equals_dense_autograd(case):
    lq, lk, hq, hk, d, dv, window, mode, kind = case
    c = make_window_case(lq, lk, hq, hk, d, dv, dtype=torch.float64)
    sinks = None if kind is None else sinks_like(hq, kind).double()
    if kind == "neginf":
        sinks[1:] = torch.linspace(-1, 1, hq - 1, dtype=torch.float64)  # -inf on one head, finite elsewhere
    q, k, v = (c[n].clone().requires_grad_() for n in ("q", "k", "v"))
    s = None if sinks is None else sinks.clone().requires_grad_()
    scale = d ** -0.5
    out, lse = dense.window_attention(q, k, v, c["cu_seqlens_q"], c["cu_seqlens_k"], window, scale, s, mode)
    g_out, g_lse = torch.randn_like(out), torch.randn_like(lse)
    finite = torch.isfinite(lse)
    loss = (out * g_out).sum() + (torch.where(finite, lse, 0.0) * g_lse).sum()
    want = torch.autograd.grad(loss, [q, k, v] + ([s] if s is not None else []))
    got = reference.window_attention_backward(g_out, c["q"], c["k"], c["v"], c["cu_seqlens_q"], c["cu_seqlens_k"],
                                              window, False, scale, sinks, mode, dlse=torch.where(finite, g_lse, 0.0))
    for name, a, b in zip(("dq", "dk", "dv", "dsinks"), got, want):
        assert rel_l2(a, b) < 1e-10, f"{name}: {rel_l2(a, b):.3e}"
    if s is not None and kind == "neginf":
        assert got[3][0] == 0, "a -inf sink gets exactly 0"


@pytest.mark.parametrize("d_qk", [512, 576])
@pytest.mark.parametrize("with_sink", [True, False])
def test_sparse_oracle_backward_equals_dense_autograd(d_qk, with_sink):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    sq, hq, skv, topk = 6, 3, 20, 9
    q = torch.randn(sq, hq, d_qk, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(skv, 1, d_qk, dtype=torch.float64, requires_grad=True)
    idx = _random_indices(g, (sq, 1, topk), skv, 0.2, True)
    idx[2] = -1  # a row with no valid index
    topk_length = torch.tensor([9, 3, 9, 0, 5, 9], dtype=torch.int32)
    sink = torch.tensor([-math.inf, 0.7, -1.5], dtype=torch.float64)
    s = sink.clone().requires_grad_() if with_sink else None
    out, lse = dense.sparse_mla_prefill(q, kv, idx, 0.05, 512, s, topk_length)
    g_out, g_lse = torch.randn_like(out), torch.randn_like(lse)
    finite = torch.isfinite(lse)
    loss = (out * g_out).sum() + (torch.where(finite, lse, 0.0) * g_lse).sum()
    want = torch.autograd.grad(loss, [q, kv] + ([s] if with_sink else []))
    got = reference.sparse_mla_prefill_backward(g_out, q.detach(), kv.detach(), idx, 0.05, 512,
                                                sink if with_sink else None, topk_length,
                                                dlse=torch.where(finite, g_lse, 0.0))
    for name, a, b in zip(("dq", "dkv", "d_attn_sink"), got, want):
        assert rel_l2(a, b) < 1e-10, f"{name}: {rel_l2(a, b):.3e}"
    if with_sink:
        assert got[2][0] == 0, "a -inf sink gets exactly 0"


# ------------------------------------------------------------------------------ 2. every backend vs the oracle

def _wcase(hq, hk, d, dv, lq, lk, window, mode, kind, dtype, size):
    return dict(hq=hq, hk=hk, d=d, dv=dv, lq=lq, lk=lk, window=window, mode=mode, kind=kind, dtype=dtype,
                size=size, head_dim=max(d, dv))


WINDOW_CASES = [
    _wcase(4, 2, 32, 32, [0, 1, 5, 40], None, (8, 8), "key0", "mimo", BF16, "tiny"),
    _wcase(4, 1, 16, 16, [9, 30], None, (-1, -1), "null", "dsv4", BF16, "tiny"),
    _wcase(2, 2, 16, 16, [12, 30], [30, 12], (4, 0), "key0", "mixed", F16, "tiny"),
    _wcase(6, 2, 32, 16, [20, 5], None, (3, 7), "null", "mixed", BF16, "tiny"),
    _wcase(2, 1, 17, 5, [11, 3], None, (-1, 0), "none", None, F32, "tiny"),
    _wcase(32, 8, 64, 64, [1024, 1, 0, 300], None, (64, 64), "key0", "mimo", BF16, "small"),
    _wcase(16, 16, 80, 80, [400, 3], None, (64, 64), "null", "dsv4", BF16, "small"),
    _wcase(8, 2, 128, 128, [300, 40], [200, 90], (-1, -1), "key0", "dsv4", BF16, "small"),
    _wcase(4, 1, 96, 96, [257, 0, 33], None, (-1, 0), "null", "mixed", F16, "small"),
    _wcase(6, 3, 64, 64, [129, 60], None, (32, 16), "key0", "posinf", BF16, "small"),
    _wcase(8, 8, 192, 128, [200], None, (-1, 0), "key0", "mimo", BF16, "small"),
    _wcase(32, 8, 64, 64, [4096], None, (64, 64), "key0", "mimo", BF16, "large"),
    _wcase(16, 16, 128, 128, [2048, 1000], None, (-1, -1), "null", "dsv4", BF16, "large"),
]


def _wid(c):
    return f"h{c['hq']}-{c['hk']}-d{c['d']}-{c['mode']}-{c['kind']}-w{c['window'][0]}_{c['window'][1]}-{str(c['dtype'])[6:]}"


@pytest.mark.parametrize("target, c", params(WINDOW_BACKWARD_TARGETS, WINDOW_CASES, case_id=_wid, accept=_cuda_accepts))
def test_window_backward(target, c):
    _check_window_backward(target, c)


@pytest.mark.parametrize("steps,loads", [(2, "tma"), (3, "tma"), (2, "cp.async")])
@pytest.mark.parametrize("target, c", params([t for t in WINDOW_BACKWARD_TARGETS if t.backend == "cuda"],
                                             [c for c in WINDOW_CASES if c["window"][0] >= 0 and c["window"][1] >= 0],
                                             case_id=_wid, accept=_cuda_accepts))
def test_window_backward_dq_runs_of_steps(target, c, steps, loads, monkeypatch):
    """The CUDA dq kernel computes runs of consecutive steps per CTA where they share K/V tiles (both
    window sides bounded); at these sizes its launcher gives each CTA one step, so SINKOPS_WA90_STEPS
    forces 2 and 3 (runs then end mid-segment and segments end mid-run). Its whole K/V tiles come by
    TMA (the default) or, with SINKOPS_WA90_TMA=0, every tile by cp.async."""
    monkeypatch.setenv("SINKOPS_WA90_STEPS", str(steps))
    monkeypatch.setenv("SINKOPS_WA90_TMA", "1" if loads == "tma" else "0")
    _check_window_backward(target, c)


@pytest.mark.parametrize("window", [(-1, -1), (16, 16)])
@pytest.mark.parametrize("target", params(WINDOW_BACKWARD_TARGETS))
def test_window_backward_keys_outside_a_segment_never_reach_it(target, window):
    """The backward twin of the forward's test: NaN in another segment's q, k, v, out, dO, dlse and in
    the padding rows after cu_seqlens[-1] leaves the other segments' dq, dk, dv exact (the sm_90a
    kernels load by TMA only K/V tiles and Q/dO blocks that lie inside their segment)."""
    lens, pad, hq, d = [70, 30, 131], 20, 4, 64
    case = make_window_case(lens + [pad], hq=hq, hk=2, d=d, device=target.device)
    cu = torch.tensor([0, 70, 100, 231], dtype=torch.int32, device=target.device)
    sinks = sinks_like(hq, "mimo").to(target.device)
    q, k, v = case["q"], case["k"], case["v"]
    for t in (q, k, v):
        t[70:100] = float("nan")
        t[231:] = float("nan")
    out, lse = sinkops.window_attention(q, k, v, cu, cu, 131, 131, window_size=window, sinks=sinks, sink_mode="key0",
                                        return_lse=True, backend=target.backend)
    g_out = torch.randn_like(out)
    dlse = torch.where(torch.isfinite(lse), torch.randn_like(lse), 0.0)
    g_out[70:100], g_out[231:], dlse[:, 70:100] = float("nan"), float("nan"), float("nan")
    got = torch.ops.sinkops.window_attention_backward(g_out, dlse, q, k, v, out, lse, cu, cu, 131, 131, window[0],
                                                      window[1], d ** -0.5, sinks, "key0", False, target.backend)
    rows = torch.cat([torch.arange(70), torch.arange(100, 231)]).to(q.device)
    two = torch.tensor([0, 70, 201], dtype=torch.int32, device=q.device)
    args = (two, two, window, False, d ** -0.5, sinks, "key0")
    clean = [t[rows] for t in (g_out, q, k, v)]
    want = reference.window_attention_backward(*(t.double() for t in clean), *args, dlse=dlse[:, rows].double())
    base = reference.window_attention_backward(*clean, *args, dlse=dlse[:, rows], compute_dtype=q.dtype)
    for name, a, w, b in zip(("dq", "dk", "dv"), got, want, base):
        check_grad(a[rows], w, b, f"{target} {name} beside NaN segments", q.dtype)


def _check_window_backward(target, c):
    """The target's gradients of one WINDOW_CASES case against the float64 oracle (check_grad)."""
    case = make_window_case(c["lq"], c["lk"], c["hq"], c["hk"], c["d"], c["dv"], dtype=c["dtype"], device=target.device)
    sinks = None if c["kind"] is None else sinks_like(c["hq"], c["kind"]).to(target.device)
    mode = c["mode"] if sinks is not None else "key0"
    q, k, v = (case[n].clone().requires_grad_() for n in ("q", "k", "v"))
    s = None if sinks is None else sinks.clone().requires_grad_()
    out, lse = sinkops.window_attention(q, k, v, case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"],
                                        case["max_seqlen_k"], window_size=c["window"], sinks=s, sink_mode=mode,
                                        return_lse=True, backend=target.backend)
    g_out = torch.randn_like(out)
    g_lse = torch.randn_like(lse)
    if target.backend == "cuda":  # the CUDA kernels, called by name (auto would take them too)
        left, right = c["window"]
        got = torch.ops.sinkops.window_attention_backward(
            g_out, torch.where(torch.isfinite(lse), g_lse, 0.0), *(t.detach() for t in (q, k, v, out, lse)),
            case["cu_seqlens_q"], case["cu_seqlens_k"], case["max_seqlen_q"], case["max_seqlen_k"], left, right,
            c["d"] ** -0.5, sinks, mode if sinks is not None else "none", False, "cuda")
        got = got if sinks is not None else got[:3]
    else:
        got = torch.autograd.grad(_loss_grads((out, lse), g_out, g_lse), [q, k, v] + ([s] if s is not None else []))
    args = (case["cu_seqlens_q"], case["cu_seqlens_k"], c["window"], False, c["d"] ** -0.5, sinks, mode)
    dlse = torch.where(torch.isfinite(lse), g_lse, 0.0)
    want = reference.window_attention_backward(g_out.double(), case["q"].double(), case["k"].double(),
                                               case["v"].double(), *args, dlse=dlse.double())
    base = reference.window_attention_backward(g_out, case["q"], case["k"], case["v"], *args, dlse=dlse,
                                               compute_dtype=c["dtype"])
    inherent = None
    if mode == "null" and sinks is not None:
        inherent = null_sink_inherent(sinks, lse.detach().t(), g_out, out.detach())  # lse is [Hq, Tq]
    for name, a, w, b in zip(("dq", "dk", "dv", "dsinks"), got, want, base):
        check_grad(a, w, b, name, c["dtype"], inherent if name == "dsinks" else None)


def _pcase(sq, skv, hq, d_qk, topk, sink, topk_len, size):
    return dict(sq=sq, skv=skv, hq=hq, d_qk=d_qk, topk=topk, sink=sink, topk_len=topk_len, size=size)


PREFILL_CASES = [
    _pcase(4, 40, 3, 512, 40, "dsv4", True, "tiny"),
    _pcase(3, 30, 16, 576, 20, "mixed", False, "tiny"),
    _pcase(5, 64, 2, 512, 33, None, False, "tiny"),
    _pcase(64, 512, 64, 512, 128, "dsv4", True, "small"),
    _pcase(40, 300, 8, 576, 200, "mixed", False, "small"),
    _pcase(33, 1000, 128, 512, 64, None, True, "small"),
    _pcase(512, 8192, 16, 512, 640, "dsv4", True, "large"),
    # 128 heads, d 576, 3 CUDA dkv blocks a query: both warpgroups, the RoPE chunk, two sum buffers
    _pcase(24, 2000, 128, 576, 300, "mixed", True, "large"),
]


def _pid(c):
    return f"q{c['sq']}-h{c['hq']}-d{c['d_qk']}-k{c['topk']}-{c['sink']}-{'len' if c['topk_len'] else 'full'}"


def _prefill_grads(target, case, sink, topk_length, g_out, g_lse, scale):
    if target.backend == "cuda":  # by name, so this target runs exactly the CUDA backward
        return _cuda_prefill_grads(case, sink, topk_length, g_out, g_lse, scale)
    q = case["q"].clone().requires_grad_()
    kv = case["kv"].clone().requires_grad_()
    s = None if sink is None else sink.clone().requires_grad_()
    out, _, lse = sinkops.sparse_mla_prefill(q, kv, case["indices"], scale, attn_sink=s, topk_length=topk_length,
                                             backend=target.backend)
    return torch.autograd.grad(_loss_grads((out, lse), g_out, g_lse), [q, kv] + ([s] if s is not None else [])), lse


def _cuda_prefill_grads(case, sink, topk_length, g_out, g_lse, scale):
    """_prefill_grads through the CUDA backward op itself: (dq, dkv[, dsink]) of the loss
    _loss_grads takes (dout = g_out, dlse = g_lse where lse is finite), and lse."""
    out, _, lse = sinkops.sparse_mla_prefill(case["q"], case["kv"], case["indices"], scale, attn_sink=sink,
                                             topk_length=topk_length, backend="cuda")
    dlse = torch.where(torch.isfinite(lse), g_lse, 0.0)
    dq, dkv, ds = torch.ops.sinkops.sparse_mla_prefill_backward(
        g_out, dlse, case["q"], case["kv"], case["indices"], out, lse, scale, 512, sink, topk_length,
        torch.are_deterministic_algorithms_enabled(), "cuda")
    return (dq, dkv) + ((ds,) if sink is not None else ()), lse


@pytest.mark.parametrize("target, c", params(MLA_BACKWARD_TARGETS, PREFILL_CASES, op="mla", case_id=_pid))
def test_sparse_prefill_backward(target, c):
    dev = target.device
    case = make_sparse_prefill_case(c["sq"], c["skv"], c["hq"], c["d_qk"], c["topk"], device=dev)
    sink = None if c["sink"] is None else sinks_like(c["hq"], c["sink"]).to(dev)
    topk_length = torch.randint(0, c["topk"] + 1, (c["sq"],), dtype=torch.int32).to(dev) if c["topk_len"] else None
    scale = c["d_qk"] ** -0.5
    g_out = torch.randn(c["sq"], c["hq"], 512, device=dev).to(BF16)
    g_lse = torch.randn(c["sq"], c["hq"], device=dev)
    got, lse = _prefill_grads(target, case, sink, topk_length, g_out, g_lse, scale)
    dlse = torch.where(torch.isfinite(lse), g_lse, 0.0)
    want = reference.sparse_mla_prefill_backward(g_out.double(), case["q"].double(), case["kv"].double(),
                                                 case["indices"], scale, 512, sink, topk_length, dlse=dlse.double())
    base = reference.sparse_mla_prefill_backward(g_out, case["q"], case["kv"], case["indices"], scale, 512, sink,
                                                 topk_length, dlse=dlse, compute_dtype=BF16)
    inherent = None
    if sink is not None:  # from the saved bf16 out and lse
        out, _, _ = sinkops.sparse_mla_prefill(case["q"], case["kv"], case["indices"], scale, attn_sink=sink,
                                               topk_length=topk_length, backend=target.backend)
        inherent = null_sink_inherent(sink, lse, g_out, out)
    for name, a, w, b in zip(("dq", "dkv", "dsink"), got, want, base):
        check_grad(a, w, b, name, BF16, inherent if name == "dsink" else None)


# ------------------------------------------------------------------------------ 3. edge values, determinism, compile

@pytest.mark.parametrize("target", params(WINDOW_BACKWARD_TARGETS))
def test_window_backward_edge_values(target):
    """key0 +inf: rows that see key 0 give dv_0 their dout and nothing else; -inf: dsink exactly 0;
    null +inf: zero rows, dsink exactly 0; rows in no segment and empty segments: zero gradients."""
    dev = target.device
    case = make_window_case([7, 0, 5], [7, 0, 5], hq=4, hk=2, d=16, dv=16, dtype=BF16, device=dev)
    tq = case["q"].shape[0]
    pad = 3  # rows past cu_seqlens[-1]: in no segment
    q, k, v = (torch.cat([case[n], torch.randn(pad, *case[n].shape[1:], device=dev).to(BF16)]).requires_grad_()
               for n in ("q", "k", "v"))
    for mode, sinks in (("key0", [math.inf, -math.inf, 0.3, math.inf]), ("null", [math.inf, -math.inf, 0.3, -1.0])):
        s = torch.tensor(sinks, device=dev).requires_grad_()
        out, lse = sinkops.window_attention(q, k, v, case["cu_seqlens_q"], case["cu_seqlens_k"], 7, 7,
                                            window_size=(2, 1), sinks=s, sink_mode=mode, return_lse=True,
                                            backend=target.backend)
        g_out = torch.randn_like(out)
        with _RanOn(target):
            dq, dk, dv, ds = torch.autograd.grad(_loss_grads((out, lse), g_out, torch.randn_like(lse)), [q, k, v, s])
        for name, g in (("dq", dq), ("dk", dk), ("dv", dv), ("dsinks", ds)):
            assert not torch.isnan(g).any(), f"{mode}: NaN in {name}"
        for g in (dq, dk, dv):
            assert (g[tq:] == 0).all(), f"{mode}: rows in no segment got a gradient"
        assert ds[1] == 0, f"{mode}: a -inf sink gets exactly 0"
        if mode == "null":
            assert ds[0] == 0, "null +inf: the rows are exactly 0, so is the sink's gradient"
        else:
            assert ds[0] == 0 and ds[3] == 0, "key0 +inf: a saturated softmax has no sink gradient"
            # KV head 0 serves query heads 0 (+inf) and 1 (-inf: key 0 masked). Rows 0..2 of segment 0
            # see key 0 (window left 2): head 0 outputs v_0 there, so their dq is 0 and v_0 takes their dout
            assert (dq[0:3, 0] == 0).all()
            assert rel_l2(dv[0, 0], g_out[0:3, 0].float().sum(0)) < 1e-2


@pytest.mark.parametrize("target", params([t for t in WINDOW_BACKWARD_TARGETS if t.device == "cuda" and t.backend != "torch"]))
def test_window_backward_more_segments_than_grid_z(target):
    """70000 segments of 1-3 tokens (the CUDA kernels loop over the segments past grid z, 65535)
    against the torch backend's backward on the same inputs."""
    lens = [1 + i % 3 for i in range(70000)]
    case = make_window_case(lens, hq=4, hk=2, d=64, dtype=BF16, device="cuda")
    sinks = sinks_like(4, "mimo").to("cuda")
    g_out = torch.randn(case["q"].shape, device="cuda").to(BF16)
    grads = {}
    for backend in (target.backend, "torch"):
        q, k, v = (case[n].clone().requires_grad_() for n in ("q", "k", "v"))
        s = sinks.clone().requires_grad_()
        out = sinkops.window_attention(q, k, v, case["cu_seqlens_q"], max_seqlen_q=3, window_size=(1, 1), sinks=s,
                                       backend=backend)
        with _RanOn(target) if backend == target.backend else contextlib.nullcontext():
            grads[backend] = torch.autograd.grad((out.float() * g_out.float()).sum(), [q, k, v, s])
    for name, a, b in zip(("dq", "dk", "dv", "dsinks"), grads[target.backend], grads["torch"]):
        assert not torch.isnan(a).any(), name
        assert rel_l2(a, b) < 1e-2, f"{name}: {rel_l2(a, b):.3e}"


@pytest.mark.parametrize("target", params(MLA_BACKWARD_TARGETS))
def test_sparse_backward_edge_values(target):
    """Rows with no valid index, a -inf sink (exactly 0) and a +inf sink (zero rows: 0 too), no NaN."""
    dev = target.device
    case = make_sparse_prefill_case(4, 32, 3, 512, 16, device=dev)
    case["indices"][1] = -1
    sink = torch.tensor([-math.inf, math.inf, 0.5], device=dev)
    g_out = torch.randn(4, 3, 512, device=dev).to(BF16)
    (dq, dkv, ds), _ = _prefill_grads(target, case, sink, None, g_out, torch.randn(4, 3, device=dev), 512 ** -0.5)
    assert not any(torch.isnan(g).any() for g in (dq, dkv, ds))
    assert (dq[1] == 0).all(), "a row with no valid index has no gradient"
    assert ds[0] == 0 and ds[1] == 0


@pytest.mark.parametrize("target", params(WINDOW_BACKWARD_TARGETS))
def test_backward_deterministic(target):
    """Same inputs -> same bits: window attention always; sparse prefill's dkv (duplicate indices)
    under torch.use_deterministic_algorithms(True)."""
    dev = target.device
    case = make_window_case([40, 9], hq=4, hk=2, d=32, dtype=BF16, device=dev)
    sinks = sinks_like(4, "mimo").to(dev)

    def window_grads():
        q, k, v = (case[n].clone().requires_grad_() for n in ("q", "k", "v"))
        s = sinks.clone().requires_grad_()
        out = sinkops.window_attention(q, k, v, case["cu_seqlens_q"], max_seqlen_q=40, window_size=(4, 4), sinks=s,
                                       backend=target.backend)
        return torch.autograd.grad((out.float() * 1.5).sum(), [q, k, v, s])

    with _RanOn(target):
        first, second = window_grads(), window_grads()
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    if "mla" not in target.backward:
        return
    pc = make_sparse_prefill_case(6, 8, 16, 512, 32, device=dev, invalid_frac=0.0)  # 8 rows: many duplicates
    g_out = torch.randn(6, 16, 512, device=dev).to(BF16)
    g_lse = torch.randn(6, 16, device=dev)
    torch.use_deterministic_algorithms(True)
    try:
        first, _ = _prefill_grads(target, pc, None, None, g_out, g_lse, 0.04)
        second, _ = _prefill_grads(target, pc, None, None, g_out, g_lse, 0.04)
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("target", params([t for t in MLA_BACKWARD_TARGETS if t.backend in ("triton", "cuda")]))
@pytest.mark.parametrize("deterministic", [False, True])
def test_sparse_backward_in_query_chunks(target, deterministic, monkeypatch):
    """The Triton and CUDA backwards stage P and dX per chunk of queries: chunks of 2 queries (3
    launches each of the dq and dkv kernels here) give the single-chunk result."""
    import sinkops.ops.prefill_backward as bwd
    dev = target.device
    pc = make_sparse_prefill_case(5, 24, 16, 576, 20, device=dev)
    sink = sinks_like(16, "dsv4").to(dev)
    topk_length = torch.tensor([20, 0, 7, 13, 20], dtype=torch.int32, device=dev)
    g_out = torch.randn(5, 16, 512, device=dev).to(BF16)
    g_lse = torch.randn(5, 16, device=dev)
    torch.use_deterministic_algorithms(deterministic)
    try:
        whole, _ = _prefill_grads(target, pc, sink, topk_length, g_out, g_lse, 0.04)
        monkeypatch.setattr(bwd, "STAGE_BYTES", 2 * 20 * 16 * 4)
        monkeypatch.setattr(bwd, "STAGE_DET_BYTES", 2 * 20 * 576 * 4)
        chunked, _ = _prefill_grads(target, pc, sink, topk_length, g_out, g_lse, 0.04)
    finally:
        torch.use_deterministic_algorithms(False)
    for name, a, b in zip(("dq", "dkv", "dsink"), chunked, whole):
        assert not torch.isnan(a).any(), name
        if deterministic or name != "dkv":
            assert torch.equal(a, b), name
        else:  # float32 atomics: the order of the adds may differ
            torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    assert whole[1].abs().sum() > 0


def test_sorted_indices_put_the_valid_ones_first_in_order():
    """The GPU backwards read each query's indices sorted; invalid entries (negative, >= s_kv, past
    topk_length) become 2^31 - 1 after the valid ones."""
    import sinkops.ops.prefill_backward as bwd
    big = 2**31 - 1
    idx = torch.tensor([[[5, -1, 3, 9, 3, 40]], [[7, 2, 1, 0, 8, 6]]], dtype=torch.int32)
    got = bwd.sorted_indices(idx, torch.tensor([6, 3], dtype=torch.int32), 10)
    assert got.dtype == torch.int32 and got.is_contiguous()
    assert got.tolist() == [[[3, 3, 5, 9, big, big]], [[1, 2, 7, big, big, big]]]
    assert bwd.sorted_indices(idx, None, 10).tolist() == [[[3, 3, 5, 9, big, big]], [[0, 1, 2, 6, 7, 8]]]


@pytest.mark.parametrize("target", params([t for t in MLA_BACKWARD_TARGETS if t.backend in ("triton", "cuda")]))
@pytest.mark.parametrize("deterministic", [False, True])
def test_sparse_backward_sorted_indices_and_query_groups(target, deterministic, monkeypatch):
    """The Triton and CUDA backwards take each query's indices sorted (invalid ones as 2^31 - 1) and
    run their dkv kernels' blocks in groups of queries: every group size (1, one that leaves a short
    last group, more than the queries) and the unsorted indices give the same gradients (dkv bit for
    bit in deterministic mode; float32 atomics otherwise)."""
    import sinkops.ops.prefill_backward as bwd
    dev = target.device
    topk = 300 if dev == "cuda" else 72  # the CUDA dkv CTA takes 128 positions: 3 blocks a query
    pc = make_sparse_prefill_case(7, 400, 16, 576, topk, device=dev)
    sink = sinks_like(16, "dsv4").to(dev)
    topk_length = torch.tensor([topk, 0, 7, topk - 7, topk, 40, topk - 1], dtype=torch.int32, device=dev)
    g_out = torch.randn(7, 16, 512, device=dev).to(BF16)
    g_lse = torch.randn(7, 16, device=dev)
    torch.use_deterministic_algorithms(deterministic)
    runs = {}
    try:
        for name, sort, group, presorted in (("default", True, 0, False), ("unsorted", False, 0, False),
                                             ("presorted", False, 0, True), ("group1", True, 1, False),
                                             ("group3", True, 3, False)):
            monkeypatch.setattr(bwd, "SORT_INDICES", sort)
            monkeypatch.setattr(bwd, "DKV_QUERY_GROUP", group)
            case = dict(pc, indices=bwd.sorted_indices(pc["indices"], topk_length, 400)) if presorted else pc
            runs[name], _ = _prefill_grads(target, case, sink, topk_length, g_out, g_lse, 0.04)
    finally:
        torch.use_deterministic_algorithms(False)
    whole = runs.pop("default")
    assert whole[1].abs().sum() > 0
    for run, got in runs.items():
        for name, a, b in zip(("dq", "dkv", "dsink"), got, whole):
            assert not torch.isnan(a).any(), (run, name)
            if run.startswith("group") and (deterministic or name != "dkv"):  # the same dq kernel
                assert torch.equal(a, b), (run, name)
            else:  # a query's keys in another order: float rounding; float32 atomics
                torch.testing.assert_close(a.float(), b.float(), rtol=1e-2, atol=1e-2, msg=f"{run} {name}")


@pytest.mark.parametrize("target", [BY_NAME["torch"]], ids=["torch"])
def test_training_step_compiles_fullgraph(target):
    """torch.compile(fullgraph=True) of forward + backward: the backward op is traced through its fake."""
    case = make_window_case([20, 12], hq=4, hk=2, d=16, dtype=torch.float32)
    pc = make_sparse_prefill_case(5, 20, 2, 512, 8)

    def loss_fn(q, k, v, s, pq, pkv, ps):
        out = sinkops.window_attention(q, k, v, case["cu_seqlens_q"], max_seqlen_q=20, window_size=(3, 3), sinks=s,
                                       backend="torch")
        pout, _, plse = sinkops.sparse_mla_prefill(pq, pkv, pc["indices"], 0.05, attn_sink=ps, backend="torch")
        return out.square().sum() + pout.float().square().sum() + torch.where(torch.isfinite(plse), plse, 0).sum()

    inputs = [case["q"], case["k"], case["v"], sinks_like(4, "mimo"), pc["q"], pc["kv"], sinks_like(2, "dsv4")]
    grads = []
    for fn in (loss_fn, torch.compile(loss_fn, fullgraph=True, backend="aot_eager")):
        leaves = [t.clone().requires_grad_() for t in inputs]
        grads.append(torch.autograd.grad(fn(*leaves), leaves))  # the compiled backward graph runs here
    for a, b in zip(*grads):
        assert torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6)


def test_window_backward_gradients_are_dense():
    """dq, dk, dv are allocated dense whatever the inputs' strides: a backend's per-signature template
    (the CUDA one) keeps their strides, and zeros_like keeps a one-token view's (T = 1 then T = 5 of
    q, k, v split from one qkv tensor share a signature)."""
    h, d = 2, 16
    for t in (1, 5):
        qkv = torch.randn(t, 3 * h, d)
        q, k, v = qkv.split(h, 1)
        cu = torch.tensor([0, t], dtype=torch.int32)
        out, lse = torch.ops.sinkops.window_attention(q, k, v, cu, cu, t, t, -1, -1, 0.25, None, "none", "torch")
        grads = torch.ops.sinkops.window_attention_backward(torch.randn_like(out), None, q, k, v, out, lse, cu, cu, t,
                                                            t, -1, -1, 0.25, None, "none", False, "torch")
        assert all(g.stride() == torch.empty(g.shape).stride() for g in grads[:3])  # (is_contiguous() ignores T = 1)


def test_out_argument_refuses_gradients():
    c = make_window_case([8], hq=2, hk=1, d=16, dtype=torch.float32)
    q = c["q"].requires_grad_()
    with pytest.raises(ValueError, match="out"):
        sinkops.window_attention(q, c["k"], c["v"], c["cu_seqlens_q"], max_seqlen_q=8, out=torch.empty_like(q))


class _PassThroughMode(TorchDispatchMode):
    """Makes a call non-plain (what tracing does), so torch.ops takes torch's generated autograd
    kernel instead of our shortcut to the eager autograd.Function; it records the ops it sees."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


# "eager": the public function's autograd.Function; "ops": torch.ops.sinkops.* on plain tensors
# (the Autograd kernel's shortcut to it); "generated": torch.ops under a dispatch mode (torch's
# register_autograd kernel, what torch.compile traces)
AUTOGRAD_PATHS = ("eager", "ops", "generated")


def test_dispatcher_and_eager_autograd_paths_agree():
    """torch.ops.sinkops.* with inputs that require grad (the registered formula, what servers and
    torch.compile use), on plain tensors and under a dispatch mode, and the public functions'
    eager autograd.Function give the same gradients."""
    c = make_window_case([13, 6], hq=4, hk=2, d=16, dtype=torch.float32)
    sinks = sinks_like(4, "dsv4")
    grads = []
    for path in AUTOGRAD_PATHS:
        q, k, v, s = (t.clone().requires_grad_() for t in (c["q"], c["k"], c["v"], sinks))
        mode = _PassThroughMode() if path == "generated" else contextlib.nullcontext()
        with mode:
            if path == "eager":
                out, lse = sinkops.window_attention(q, k, v, c["cu_seqlens_q"], max_seqlen_q=13, window_size=(3, 3),
                                                    softmax_scale=0.25, sinks=s, sink_mode="null", return_lse=True,
                                                    backend="torch")
            else:
                out, lse = torch.ops.sinkops.window_attention(q, k, v, c["cu_seqlens_q"], c["cu_seqlens_q"], 13, 13,
                                                              3, 3, 0.25, s, "null", "torch")
            # which kernel ran: ours (the eager autograd.Function) or torch's generated one
            owner = "window_attention_autograd" if path != "generated" else "GeneratedBackwardFor_sinkops_window"
            assert type(out.grad_fn).__name__.startswith(owner), type(out.grad_fn).__name__
            grads.append(torch.autograd.grad(out.sum() + lse.sum(), [q, k, v, s]))
        if path == "generated":  # the mode saw the forward and the backward op: the generated kernel ran
            assert "sinkops.window_attention.default" in mode.seen
            assert "sinkops.window_attention_backward.default" in mode.seen
    for g in grads[1:]:
        for a, b in zip(grads[0], g):
            assert torch.equal(a, b)
    pc = make_sparse_prefill_case(4, 16, 2, 512, 8)
    pgrads = []
    for path in AUTOGRAD_PATHS:
        q, kv = pc["q"].clone().requires_grad_(), pc["kv"].clone().requires_grad_()
        with _PassThroughMode() if path == "generated" else contextlib.nullcontext():
            if path != "eager":
                out, max_logits, lse = torch.ops.sinkops.sparse_mla_prefill(q, kv, pc["indices"], 0.05, 512, None,
                                                                            None, "torch")
            else:
                out, max_logits, lse = sinkops.sparse_mla_prefill(q, kv, pc["indices"], 0.05, backend="torch")
            assert not max_logits.requires_grad
            pgrads.append(torch.autograd.grad(out.float().sum(), [q, kv]))
    for g in pgrads[1:]:
        for a, b in zip(pgrads[0], g):
            assert torch.equal(a, b)


@pytest.mark.parametrize("target", params(WINDOW_BACKWARD_TARGETS))
def test_backward_writes_every_gradient_element(target):
    """NaN poisoning for the backward: under torch's deterministic mode every torch.empty (the
    gradients, the row terms, the deterministic staging) starts as NaN, so an element a kernel
    forgets to write surfaces as NaN. Rows in no segment before the first (cu_seqlens[0] = 2) and
    after the last, empty segments, +-inf sinks, invalid indices."""
    import torch.utils.deterministic as det

    assert det.fill_uninitialized_memory, "torch no longer poisons empty memory in deterministic mode"
    dev = target.device
    case = make_window_case([9, 0, 30, 1], hq=4, hk=2, d=32, dtype=BF16, device=dev)
    pad = torch.randn(5, 4, 32, device=dev).to(BF16)
    lead = 2  # rows before cu_seqlens[0]
    cu = case["cu_seqlens_q"] + lead
    torch.use_deterministic_algorithms(True)
    try:
        for mode in ("key0", "null", "none"):
            q = torch.cat([pad[:lead], case["q"], pad]).requires_grad_()
            k = torch.cat([pad[:lead, :2], case["k"], pad[:, :2]]).requires_grad_()
            v = torch.cat([pad[:lead, :2], case["v"], pad[:, :2]]).requires_grad_()
            s = torch.tensor([math.inf, -math.inf, 0.4, -1.0], device=dev).requires_grad_()
            sinks = None if mode == "none" else s
            out, lse = sinkops.window_attention(q, k, v, cu, max_seqlen_q=30, window_size=(4, 2),
                                                sinks=sinks, sink_mode=mode if sinks is not None else "key0",
                                                return_lse=True, backend=target.backend)
            with _RanOn(target):
                grads = torch.autograd.grad(_loss_grads((out, lse), torch.randn_like(out), torch.randn_like(lse)),
                                            [q, k, v] + ([] if sinks is None else [s]))
            for name, g in zip(("dq", "dk", "dv", "dsinks"), grads):
                assert not torch.isnan(g).any(), f"{mode}: {name} has unwritten (NaN) elements"
            assert all((g[-5:] == 0).all() and (g[:lead] == 0).all() for g in grads[:3]), \
                f"{mode}: rows in no segment got a gradient"
        if "mla" not in target.backward:
            return
        pc = make_sparse_prefill_case(5, 40, 3, 576, 24, device=dev)
        pc["indices"][2] = -1
        sink = torch.tensor([math.inf, -math.inf, 0.3], device=dev)
        (dq, dkv, ds), _ = _prefill_grads(target, pc, sink, None, torch.randn(5, 3, 512, device=dev).to(BF16),
                                          torch.randn(5, 3, device=dev), 0.04)
        for name, g in (("dq", dq), ("dkv", dkv), ("d_attn_sink", ds)):
            assert not torch.isnan(g).any(), f"sparse: {name} has unwritten (NaN) elements"
    finally:
        torch.use_deterministic_algorithms(False)


def test_triton_sparse_backward_declines_past_its_head_limit():
    """More heads than the dkv kernel's tile holds: the Triton backend says no (naming q), so auto
    falls back instead of failing at launch."""
    from types import SimpleNamespace

    from sinkops.triton import MAX_BACKWARD_HEADS, backend as triton_backend
    for hq, ok in ((MAX_BACKWARD_HEADS, True), (MAX_BACKWARD_HEADS + 1, False)):
        a = SimpleNamespace(op="sparse_mla_prefill_backward", q=torch.empty(1, hq, 576, dtype=BF16))
        why = triton_backend.supports(a)
        assert (why == "") == ok and (ok or why.startswith("q:")), why


def test_backward_ops_validate_inputs():
    """The public backward ops name the bad argument before any launch."""
    c = make_window_case([8], hq=2, hk=1, d=16, dtype=torch.float32)
    out, lse = torch.ops.sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], c["cu_seqlens_q"], 8, 8,
                                                  -1, -1, 0.25, None, "none", "torch")
    args = lambda dout, dlse: (dout, dlse, c["q"], c["k"], c["v"], out, lse, c["cu_seqlens_q"],  # noqa: E731
                               c["cu_seqlens_q"], 8, 8, -1, -1, 0.25, None, "none", False, "torch")
    with pytest.raises(ValueError, match="dout"):
        torch.ops.sinkops.window_attention_backward(*args(out[:, :1], None))
    with pytest.raises(ValueError, match="dout"):
        torch.ops.sinkops.window_attention_backward(*args(out.double(), None))
    with pytest.raises(ValueError, match="dlse"):
        torch.ops.sinkops.window_attention_backward(*args(out, lse.double()))
    pc = make_sparse_prefill_case(3, 10, 2, 512, 4)
    pout, _, plse = torch.ops.sinkops.sparse_mla_prefill(pc["q"], pc["kv"], pc["indices"], 0.05, 512, None, None,
                                                         "torch")
    with pytest.raises(ValueError, match="dout"):
        torch.ops.sinkops.sparse_mla_prefill_backward(pout.float(), None, pc["q"], pc["kv"], pc["indices"], pout,
                                                      plse, 0.05, 512, None, None, False, "torch")
    with pytest.raises(ValueError, match="lse"):
        torch.ops.sinkops.sparse_mla_prefill_backward(pout, None, pc["q"], pc["kv"], pc["indices"], pout,
                                                      plse[:, :1], 0.05, 512, None, None, False, "torch")
