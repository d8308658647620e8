"""The public API: validation errors, out=, backend choice, torch.ops registration,
torch.compile(fullgraph=True), and CUDA-graph capture on the GPU."""

import pytest
import torch

import sinkops
from sinkops import reference
from helpers import make_sparse_decode_case, make_sparse_prefill_case, make_window_case, nan_like

# ------------------------------------------------------------------ window_attention


def _window_case(dtype=torch.float32, device="cpu"):
    return make_window_case([5, 0, 9], hq=4, hk=2, d=16, dtype=dtype, device=device)


def test_window_out_is_written_and_matches_reference():
    c = _window_case()
    sinks = torch.randn(4)
    out = nan_like((c["q"].shape[0], 4, 16), torch.float32, "cpu")
    got, lse = sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None,
                                        c["max_seqlen_q"], window_size=(2, 1), sinks=sinks,
                                        return_lse=True, out=out, backend="torch")
    assert got is out and not torch.isnan(out).any()
    ref, ref_lse = reference.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"],
                                              window_size=(2, 1), sinks=sinks)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, ref_lse.float(), rtol=1e-5, atol=1e-5)


def test_window_torch_ops_registered():
    c = _window_case()
    out, lse = torch.ops.sinkops.window_attention(
        c["q"], c["k"], c["v"], c["cu_seqlens_q"], c["cu_seqlens_q"], c["max_seqlen_q"],
        c["max_seqlen_q"], -1, -1, 0.25, None, "none", "torch")
    assert out.shape == c["q"].shape and lse.shape == (4, c["q"].shape[0])


def test_window_empty_k_gives_zero_and_inf_lse():
    q = torch.randn(3, 2, 8)
    k = torch.randn(0, 2, 8)
    cu_q = torch.tensor([0, 3], dtype=torch.int32)
    cu_k = torch.tensor([0, 0], dtype=torch.int32)
    out, lse = sinkops.window_attention(q, k, k, cu_q, cu_k, 3, 0, return_lse=True,
                                        sinks=torch.zeros(2), sink_mode="null")
    assert (out == 0).all() and torch.isinf(lse).all() and (lse > 0).all()


@pytest.mark.parametrize("mutate, match", [
    (lambda a: a.update(q=a["q"].to(torch.int32)), "q: dtype"),
    (lambda a: a.update(k=a["k"].double()), "k: dtype"),
    (lambda a: a.update(q=a["q"][0]), "q: expected 3 dims"),
    (lambda a: a.update(k=a["k"].new_zeros(a["k"].shape[0], 3, 16),
                        v=a["v"].new_zeros(a["v"].shape[0], 3, 16)), "Hq=4 must be a positive multiple of Hk=3"),
    (lambda a: a.update(v=a["v"][:-1]), "v: expected shape"),
    (lambda a: a.update(cu_seqlens_q=a["cu_seqlens_q"].long()), "cu_seqlens_q: dtype"),
    (lambda a: a.update(cu_seqlens_q=a["cu_seqlens_q"].flip(0)), "cu_seqlens_q: must be non-decreasing"),
    (lambda a: a.update(cu_seqlens_q=a["cu_seqlens_q"] + 1), r"cu_seqlens_q: values must lie in"),
    (lambda a: a.update(cu_seqlens_k=a["cu_seqlens_q"][:2]), "cu_seqlens_k: expected shape"),
    (lambda a: a.update(max_seqlen_q=None), "max_seqlen_q: required"),
    (lambda a: a.update(max_seqlen_q=-1), r"max_seqlen_q: must be in \[0, "),
    (lambda a: a.update(window_size=(-2, 0)), "window_size"),
    (lambda a: a.update(sinks=torch.zeros(4, dtype=torch.float64)), "sinks: dtype"),
    (lambda a: a.update(sinks=torch.zeros(3)), "sinks: expected shape"),
    (lambda a: a.update(sink_mode="bias"), "sink_mode"),
    (lambda a: a.update(out=torch.empty(1, 4, 16)), "out: expected shape"),
    (lambda a: a.update(backend="tpu"), "backend"),
    (lambda a: a.update(q=a["q"].new_empty(a["q"].shape[0], 4, 300),
                        k=a["k"].new_empty(a["k"].shape[0], 2, 300),
                        v=a["v"].new_empty(a["v"].shape[0], 2, 300)), "head dim"),
])
def test_window_validation(mutate, match):
    c = _window_case()
    args = dict(q=c["q"], k=c["k"], v=c["v"], cu_seqlens_q=c["cu_seqlens_q"], cu_seqlens_k=None,
                max_seqlen_q=c["max_seqlen_q"], sinks=torch.zeros(4))
    mutate(args)
    with pytest.raises((ValueError, TypeError), match=match):
        sinkops.window_attention(**args)


def test_forced_missing_backend_names_what_is_missing():
    c = _window_case()
    with pytest.raises(RuntimeError, match="backend='cuda' is not available"):
        sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None,
                                 c["max_seqlen_q"], backend="cuda")


def test_window_compile_fullgraph():
    c = _window_case()
    sinks = torch.randn(4)

    def f(q, k, v, cu, s):
        return sinkops.window_attention(q, k, v, cu, None, 9, window_size=(3, 3), sinks=s,
                                        sink_mode="key0", return_lse=True, backend="torch")

    out, lse = torch.compile(f, fullgraph=True, backend="aot_eager")(
        c["q"], c["k"], c["v"], c["cu_seqlens_q"], sinks)
    ref, ref_lse = f(c["q"], c["k"], c["v"], c["cu_seqlens_q"], sinks)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(lse, ref_lse)


# ------------------------------------------------------------------ sparse MLA


def test_prefill_out_and_validation():
    c = make_sparse_prefill_case(4, 40, 3, 512, 8)
    sink = torch.randn(3)
    out = nan_like((4, 3, 512), torch.bfloat16, "cpu")
    got = sinkops.sparse_mla_prefill(c["q"], c["kv"], c["indices"], 0.05, attn_sink=sink, out=out)
    assert got[0] is out and not torch.isnan(out.float()).any()
    ref = reference.sparse_mla_prefill(c["q"].double(), c["kv"].double(), c["indices"], 0.05, attn_sink=sink)
    torch.testing.assert_close(out, ref[0].to(out.dtype), rtol=2e-2, atol=2e-2)
    for kw, match in [(dict(q=c["q"][..., :500]), "head dim 500"),
                      (dict(indices=c["indices"].long()), "indices: dtype"),
                      (dict(indices=c["indices"][:, :, :0]), "indices: expected shape"),
                      (dict(kv=c["kv"][:, :, :511]), "kv: expected shape"),
                      (dict(d_v=256), "d_v"),
                      (dict(topk_length=torch.ones(3, dtype=torch.int32)), "topk_length: expected shape"),
                      (dict(attn_sink=torch.zeros(2)), "attn_sink: expected shape")]:
        args = dict(q=c["q"], kv=c["kv"], indices=c["indices"], sm_scale=0.05)
        args.update(kw)
        with pytest.raises((ValueError, TypeError), match=match):
            sinkops.sparse_mla_prefill(**args)


def test_prefill_compile_fullgraph():
    c = make_sparse_prefill_case(3, 20, 2, 576, 5)

    def f(q, kv, idx):
        return sinkops.sparse_mla_prefill(q, kv, idx, 0.04, attn_sink=torch.full((2,), 0.5),
                                          backend="torch")

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(c["q"], c["kv"], c["indices"])
    for a, b in zip(got, f(c["q"], c["kv"], c["indices"])):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_validation_and_compile(layout):
    c = make_sparse_decode_case(2, 1, 2, layout, 6, num_tokens=40, block_size=16)
    args = dict(q=c["q"], kv_cache=c["kv_cache"], indices=c["indices"], sm_scale=0.04, layout=layout)

    def f(q, cache, idx):
        return sinkops.sparse_mla_decode(q, cache, idx, 0.04, layout=layout, backend="torch")

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(c["q"], c["kv_cache"], c["indices"])
    for a, b in zip(got, f(c["q"], c["kv_cache"], c["indices"])):
        torch.testing.assert_close(a, b)
    other = "v32" if layout == "v4" else "v4"
    for kw, match in [(dict(layout=other), "does not match layout|expected shape"),
                      (dict(layout="v5"), "layout"),
                      (dict(kv_cache=c["kv_cache"][..., :100]), "kv_cache: expected shape"),
                      (dict(indices=c["indices"][:1]), "indices: expected 2 rows"),
                      (dict(extra_indices=c["indices"]), "pass both or neither"),
                      (dict(topk_length=torch.ones(2)), "topk_length: dtype")]:
        a = dict(args)
        a.update(kw)
        with pytest.raises((ValueError, TypeError), match=match):
            sinkops.sparse_mla_decode(**a)


# ------------------------------------------------------------------ CUDA graphs (GPU)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_cuda_graph_capture_and_replay(backend):
    dev = "cuda"
    c = make_window_case([100, 37, 0, 64], hq=8, hk=2, d=64, dtype=torch.bfloat16, device=dev)
    sinks = torch.rand(8, device=dev) - 0.1
    d = make_sparse_decode_case(4, 2, 16, "v4", 64, num_tokens=500, device=dev)
    p = make_sparse_prefill_case(8, 300, 16, 512, 64, device=dev)
    psink = torch.randn(16, device=dev)

    def run():
        w = sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None, 100,
                                     window_size=(16, 16), sinks=sinks, backend=backend)
        pr = sinkops.sparse_mla_prefill(p["q"], p["kv"], p["indices"], 0.04, attn_sink=psink,
                                        backend=backend)
        de = sinkops.sparse_mla_decode(d["q"], d["kv_cache"], d["indices"], 0.04, attn_sink=psink,
                                       layout="v4", backend=backend)
        return w, pr[0], de[0]

    eager = run()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run()  # warm up (Triton compiles outside the capture)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        captured = run()
    for t, fresh in ((c["q"], None), (p["q"], None), (d["q"], None)):
        t.copy_(torch.randn_like(t))
    g.replay()
    torch.cuda.synchronize()
    again = run()
    for a, b, e in zip(captured, again, eager):
        assert torch.equal(a, b), "graph replay differs from eager on the new inputs"
        assert not torch.equal(a, e), "replay did not read the new inputs"


# ------------------------------------------------------------------ the two call paths and the plans


def _all_three(backend, device="cpu"):
    c = make_window_case([20, 0, 9], hq=4, hk=2, d=64, device=device)
    p = make_sparse_prefill_case(4, 60, 8, 576, 16, device=device)
    d = make_sparse_decode_case(2, 2, 8, "v4", 16, 100, device=device, extra=True)
    s = torch.randn(8, device=device)
    return [
        (lambda: sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None, 20, window_size=(4, 4),
                                          sinks=s[:4], sink_mode="key0", return_lse=True, backend=backend),
         lambda: torch.ops.sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], c["cu_seqlens_q"], 20,
                                                    20, 4, 4, 64 ** -0.5, s[:4], "key0", backend)),
        (lambda: sinkops.sparse_mla_prefill(p["q"], p["kv"], p["indices"], 0.04, attn_sink=s, backend=backend),
         lambda: torch.ops.sinkops.sparse_mla_prefill(p["q"], p["kv"], p["indices"], 0.04, 512, s, None, backend)),
        (lambda: sinkops.sparse_mla_decode(d["q"], d["kv_cache"], d["indices"], 0.04, attn_sink=s, layout="v4",
                                           extra_kv_cache=d["extra_kv_cache"], extra_indices=d["extra_indices"],
                                           backend=backend),
         lambda: torch.ops.sinkops.sparse_mla_decode(d["q"], d["kv_cache"], d["indices"], 0.04, s, None, "v4",
                                                     d["extra_kv_cache"], d["extra_indices"], None, backend)),
    ]


@pytest.mark.parametrize("op", range(3))
def test_eager_path_equals_torch_ops_bitwise(op):
    eager, via_dispatcher = _all_three("torch")[op]
    for a, b in zip(eager(), via_dispatcher()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("op", range(3))
def test_a_signature_is_validated_once(op, monkeypatch):
    """The second call with the same signature (other token counts, other data) reuses the plan."""
    from sinkops.ops import decode, prefill, window

    mod = (window, prefill, decode)[op]
    mod._PLANS.clear()
    eager, _ = _all_three("torch")[op]
    eager()
    made = []
    real = mod._plan
    monkeypatch.setattr(mod, "_plan", lambda *a: made.append(1) or real(*a))
    eager()
    eager()
    assert made == [] and len(mod._PLANS) == 1
    again, _ = _all_three("torch")[op]  # fresh tensors of the same signature
    again()
    assert made == []


def test_window_plan_follows_the_signature_not_the_token_count():
    from sinkops.ops import window

    window._PLANS.clear()
    for n in (5, 17, 40):
        c = make_window_case([n], hq=4, hk=2, d=64)
        sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None, n, backend="torch")
    assert len(window._PLANS) == 1
    c = make_window_case([9], hq=4, hk=4, d=64)  # another head count: another signature
    sinkops.window_attention(c["q"], c["k"], c["v"], c["cu_seqlens_q"], None, 9, backend="torch")
    assert len(window._PLANS) == 2


def test_requires_grad_goes_through_the_dispatcher():
    c = make_window_case([6], hq=2, hk=1, d=16, dtype=torch.float32)
    q = c["q"].requires_grad_()
    out = sinkops.window_attention(q, c["k"], c["v"], c["cu_seqlens_q"], None, 6, backend="torch")
    assert out.shape == q.shape


@pytest.mark.parametrize("op", range(3))
def test_compile_fullgraph_every_op(op):
    eager, _ = _all_three("torch")[op]
    got = torch.compile(eager, fullgraph=True, backend="aot_eager")()
    for a, b in zip(got, eager()):
        torch.testing.assert_close(a, b)
