"""What only one backend has: the SYCL kernel bundle and its disk cache, the Triton decode's
top-k split, the CUDA launcher's own refusals, and which backend `auto` picks where."""
import os

import pytest
import torch

import helpers
import sinkops
from sinkops import backends
from targets import BY_NAME, TARGETS, params

SYCL = BY_NAME["sycl"] in TARGETS


@pytest.mark.skipif(not SYCL, reason="sinkops._sycl is not built")
def test_every_sycl_kernel_is_in_the_built_bundle():
    from sinkops.sycl import _sycl

    names = _sycl.kernel_names()
    assert len(names) == 6
    for name in names:
        assert _sycl.has_kernel(name), f"{name} missing from the SYCL bundle (silently dropped?)"
    assert not _sycl.has_kernel("sinkops_no_such_kernel")


@pytest.mark.skipif(not SYCL, reason="sinkops._sycl is not built")
def test_sycl_bundle_is_persisted_on_disk():
    from sinkops.sycl import _sycl

    cache_dir = _sycl.cache_dir()
    if not cache_dir:
        pytest.skip("on-disk cache disabled (SINKOPS_SYCL_CACHE=0)")
    assert _sycl.has_kernel("sinkops_sparse_mla_decode_fwd_v4")
    assert [f for f in os.listdir(cache_dir) if f.endswith(".syclbin")], f"no SYCLBIN written to {cache_dir}"


def test_sycl_is_built_when_ci_says_so():
    """CI installs the SYCL runtime: a build that silently drops the core must fail there."""
    if os.environ.get("SINKOPS_REQUIRE_SYCL") != "1":
        pytest.skip("SINKOPS_REQUIRE_SYCL is not set (CI sets it)")
    assert SYCL, backends.why_unavailable("sycl", torch.device("cpu"))


@pytest.mark.parametrize("target", params([BY_NAME["triton"], BY_NAME.get("triton-interp")] if "triton-interp" in
                                          [t.name for t in TARGETS] else [BY_NAME["triton"]], op="mla"))
@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_triton_decode_split_topk(target, layout):
    """The top-k split over 3 programs + the combine kernel: the same answer, the sink once."""
    from sinkops.ops.decode import SparseMlaDecodeArgs
    from sinkops import kv_layout
    from sinkops.triton import sparse_mla

    hq, topk = 3, 70
    case = helpers.make_sparse_decode_case(2, 2, hq, layout, topk, num_tokens=120, block_size=16,
                                           device=target.device, extra=True)
    case["indices"][1, 1] = -1
    case["extra_indices"][1, 1] = -1             # row (1, 1) sees nothing at all
    case["topk_length"] = torch.tensor([topk, 40], dtype=torch.int32, device=target.device)
    case["extra_topk_length"] = torch.tensor([36, 5], dtype=torch.int32, device=target.device)
    for kind in ("dsv4", "mixed"):
        sink = helpers.sinks_like(hq, kind).to(target.device)
        out = helpers.nan_like((2, 2, hq, 512), torch.bfloat16, target.device)
        lse = helpers.nan_like((2, hq, 2), torch.float32, target.device)
        a = SparseMlaDecodeArgs(case["q"], case["kv_cache"], case["indices"], case["topk_length"],
                                case["extra_kv_cache"], case["extra_indices"], case["extra_topk_length"], sink,
                                out, lse, 2, 0.04, kv_layout.get(layout))
        sparse_mla.prepare_decode(a, num_splits=3)(a)
        ref_out, ref_lse = helpers.decode_oracle(case, 0.04, sink)
        helpers.check_close(out, ref_out, None, name=f"split {layout} {kind} out")
        helpers.check_close(lse, ref_lse, None, name=f"split {layout} {kind} lse", rel_cap=1e-5)
        assert torch.all(out[1, 1] == 0) and torch.isposinf(lse[1, :, 1]).all()


@pytest.mark.parametrize("target", params([BY_NAME["cuda"], BY_NAME["cuda-emu"]], op="mla"))
def test_cuda_refuses_what_it_cannot_run(target):
    case = helpers.make_window_case([10], hq=2, hk=1, d=16, dtype=torch.float32, device=target.device)
    with pytest.raises(ValueError, match="no CUDA kernel"):
        sinkops.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"], None, 10,
                                 backend=target.backend)


def test_auto_on_cpu_is_sycl_or_torch_never_the_oracle():
    case = helpers.make_window_case([10], hq=2, hk=1, d=16)
    want = "sycl" if SYCL else "torch"
    assert backends.auto_choice(torch.device("cpu"), "window_attention") == want
    from sinkops.ops import window

    window._PLANS.clear()
    sinkops.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"], None, 10)
    assert {p.backend.name for p in window._PLANS.values()} == {want}


def test_float64_goes_to_the_torch_backend():
    case = helpers.make_window_case([10, 3], hq=2, hk=1, d=16, dtype=torch.float64)
    from sinkops.ops import window

    window._PLANS.clear()
    out = sinkops.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"], None, 10,
                                   window_size=(2, 2), sinks=torch.rand(2), sink_mode="key0")
    assert {p.backend.name for p in window._PLANS.values()} == {"torch"}
    assert out.dtype == torch.float64 and not torch.isnan(out).any()


def test_auto_moves_a_preferring_backend_first(monkeypatch):
    """A backend whose prefers(args) is true goes ahead of AUTO_ORDER (the CUDA sm_90a prefill on
    Hopper); without args, or when it declines, the order stays as listed."""
    import types

    class Fake:
        ops = backends.FORWARD_OPS

        def __init__(self, wants):
            self.wants = wants

        def why_unavailable(self, device):
            return ""

        def supports(self, a):
            return ""

        def prefers(self, a):
            return self.wants

    monkeypatch.setitem(backends._REGISTERED, "fake-yes", Fake(True))
    monkeypatch.setitem(backends._REGISTERED, "fake-no", Fake(False))
    monkeypatch.setitem(backends.AUTO_ORDER, "cpu", ("torch", "fake-no", "fake-yes"))
    args = types.SimpleNamespace(op="sparse_mla_prefill", q=torch.empty(1))
    assert list(backends._auto_order("cpu", "sparse_mla_prefill", args)) == ["fake-yes", "torch", "fake-no"]
    assert list(backends._auto_order("cpu", "sparse_mla_prefill")) == ["torch", "fake-no", "fake-yes"]
    assert backends.resolve("auto", args).wants is True


@pytest.mark.gpu
@pytest.mark.parametrize("h_q", [8, 16, 24, 32, 64, 128])
def test_auto_prefill_on_the_gpu(h_q):
    """On a Hopper GPU with the sm_90a kernels built, auto takes CUDA at every head count: above 32
    heads the 64-head kernel (2x Triton), at <= 32 the few-heads kernel (1.36-1.63x); elsewhere Triton."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops.cuda import _C
    from sinkops.ops import prefill

    case = helpers.make_sparse_prefill_case(2, 500, h_q, 512, 64, device="cuda")
    prefill._PLANS.clear()
    sinkops.sparse_mla_prefill(case["q"], case["kv"], case["indices"], 0.05)
    from sinkops import _build_info

    hopper = torch.cuda.get_device_capability() == (9, 0) and "with the sm_90a" in _build_info.CORES["cuda"]
    want = "cuda" if (hopper and _C is not None) else "triton"
    assert {p.backend.name for p in prefill._PLANS.values()} == {want}
