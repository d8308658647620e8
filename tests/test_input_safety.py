"""No value of a device-side input may make a kernel read or write out of bounds (docs/DESIGN.md §2):
any int32 in cu_seqlens (negative, decreasing, past the end), indices and topk_length. Segment
bounds are clamped to the packed tensors, a decreasing segment is empty, an index outside the
pool is an invalid key, topk_length is clamped to [0, topk]. Every target runs these with the
CPU-side value checks switched off (so the kernels see the bad values); on the GPU,
tools/sanitize_cases.py runs the same inputs under compute-sanitizer memcheck. The opt-in checked
mode (SINKOPS_CHECK_INPUTS=1) raises the CPU path's ValueError for device tensors too.
"""
import pytest
import torch

import sinkops
from helpers import (check_close, make_sparse_decode_case, make_sparse_prefill_case, make_window_case, run_decode,
                     run_prefill, run_window, sinks_like, window_oracle, prefill_oracle, decode_oracle)
from targets import params

I32_MIN, I32_MAX = -2**31, 2**31 - 1


@pytest.fixture
def no_value_checks(monkeypatch):
    """Let bad index values reach the kernels on CPU targets too (the ops check them there)."""
    for mod in ("window", "prefill", "decode"):
        monkeypatch.setattr(f"sinkops.ops.{mod}.check_values", lambda device: False)


def _cu(values, device):
    return torch.tensor(values, dtype=torch.int32, device=device)


@pytest.mark.parametrize("target", params(op="window"))
def test_window_clamped_segments_match_the_oracle(target, no_value_checks):
    # T = 25: segments [0, 12), [12, 25) (30 clamped to 25), then two decreasing (empty) ones.
    case = make_window_case([25], hq=4, hk=2, d=64, device=target.device)
    cu = _cu([-7, 12, 30, 20, 5], target.device)
    case = dict(case, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=13, max_seqlen_k=13)
    sinks = sinks_like(4, "mimo")
    for mode in ("key0", "null"):
        out, lse = run_window(target, case, (4, 4), sinks, mode)
        ref_out, ref_lse = window_oracle(case, (4, 4), sinks, mode)
        check_close(out, ref_out, None, name=f"{target} clamped {mode}")
        check_close(lse, ref_lse, None, name=f"{target} clamped {mode} lse", rel_cap=1e-5)


# Any int32 values: overlapping or past-the-end segments give unspecified (but finite) rows; the
# point is that nothing reads or writes outside the tensors (memcheck on the GPU says so).
WILD_CU = [[I32_MIN, I32_MAX], [0, -1, 5, -100, 40], [5, 3, I32_MAX, 0, 17], [40, 40, 40], [I32_MAX, I32_MIN, 7]]


@pytest.mark.parametrize("target", params(op="window"))
@pytest.mark.parametrize("cu_values", WILD_CU, ids=lambda v: "_".join(map(str, v)))
def test_window_any_cu_seqlens_values(target, cu_values, no_value_checks):
    case = make_window_case([40], hq=4, hk=2, d=64, device=target.device)
    cu = _cu(cu_values, target.device)
    case = dict(case, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=40, max_seqlen_k=40)
    out, lse = run_window(target, case, (8, 8), sinks_like(4, "dsv4"), "null")
    if target.device == "cuda":
        torch.cuda.synchronize()  # an illegal access would surface here
    written = ~torch.isnan(lse[0])
    assert torch.isfinite(out[written].float()).all()


@pytest.mark.parametrize("target", params(op="mla"))
def test_prefill_any_index_and_topk_length_values(target, no_value_checks):
    case = make_sparse_prefill_case(6, 300, 16, 512, 40, device=target.device)
    idx = case["indices"].clone()
    idx[0, 0, :4] = torch.tensor([I32_MIN, I32_MAX, -1, 300], dtype=torch.int32)
    idx[1] = I32_MAX
    case = dict(case, indices=idx)
    tl = _cu([40, I32_MAX, -5, I32_MIN, 0, 17], target.device)
    sink = sinks_like(16, "dsv4")
    got = run_prefill(target, case, 0.05, sink, tl)
    oracle = prefill_oracle(case, 0.05, sink, tl)
    for name, a, o in zip(("out", "max_logits", "lse"), got, oracle):
        check_close(a, o, None, name=f"{target} wild {name}", rel_cap=3e-3 if name == "out" else 1e-5)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_decode_any_slot_and_topk_length_values(target, layout, no_value_checks):
    case = make_sparse_decode_case(3, 2, 16, layout, 40, 300, device=target.device, extra=True)
    n_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    case["indices"][0, 0, :4] = torch.tensor([I32_MIN, I32_MAX, -1, n_slots], dtype=torch.int32)
    case["extra_indices"][1] = I32_MAX
    case["topk_length"] = _cu([I32_MAX, -3, 40], target.device)
    case["extra_topk_length"] = _cu([I32_MIN, 5, I32_MAX], target.device)
    sink = sinks_like(16, "dsv4")
    out, lse = run_decode(target, case, 0.05, sink)
    ref_out, ref_lse = decode_oracle(case, 0.05, sink)
    check_close(out, ref_out, None, name=f"{target} wild out")
    check_close(lse, ref_lse, None, name=f"{target} wild lse", rel_cap=1e-5)


# ---------------------------------------------------------------- the values the CPU path (and checked mode) refuse

def _bad_calls(device):
    case = make_window_case([10, 20], hq=4, hk=2, d=16, device=device, dtype=torch.float32)
    q, k, v = case["q"], case["k"], case["v"]
    p = make_sparse_prefill_case(3, 50, 4, 512, 8, device=device)
    d = make_sparse_decode_case(2, 1, 4, "v4", 8, 100, device=device)
    return [
        (lambda: sinkops.window_attention(q, k, v, _cu([0, 20, 10], device), None, 20), "non-decreasing"),
        (lambda: sinkops.window_attention(q, k, v, _cu([-1, 10, 30], device), None, 20), "must lie in"),
        (lambda: sinkops.window_attention(q, k, v, _cu([0, 10, 31], device), None, 21), "must lie in"),
        (lambda: sinkops.window_attention(q, k, v, case["cu_seqlens_q"], None, 15), "max_seqlen_q: 15 is smaller"),
        (lambda: sinkops.sparse_mla_prefill(p["q"], p["kv"], p["indices"], 0.1,
                                            topk_length=_cu([1, 9, 2], device)), "topk_length: values must lie"),
        (lambda: sinkops.sparse_mla_decode(d["q"], d["kv_cache"], d["indices"], 0.1,
                                           topk_length=_cu([-1, 2], device)), "topk_length: values must lie"),
    ]


@pytest.mark.parametrize("i", range(6))
def test_cpu_path_refuses_bad_values(i):
    call, match = _bad_calls("cpu")[i]
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(6))
def test_checked_mode_refuses_bad_device_values(i):
    call, match = _bad_calls("cuda")[i]
    sinkops.set_input_checks(True)
    try:
        with pytest.raises(ValueError, match=match):
            call()
    finally:
        sinkops.set_input_checks(False)
    call()  # unchecked: runs (the values are clamped), no error
    torch.cuda.synchronize()
