"""sparse_mla_prefill on every backend (tests/targets.py) against the float64 oracle.

docs/DESIGN.md §4 via helpers.check_close (the low-precision baseline is the oracle computed in
bf16); out, max_logits and lse are NaN-poisoned, data is fresh and random every run.
"""
from __future__ import annotations

import math

import pytest
import torch

from helpers import (check_close, make_sparse_prefill_case, nan_like, prefill_oracle, rel_l2, run_prefill,
                     sinks_like)
from targets import BY_NAME, params


def check_against_oracle(got, case, scale, sink=None, topk_length=None):
    oracle = prefill_oracle(case, scale, sink, topk_length)
    lowp = prefill_oracle(case, scale, sink, topk_length, compute_dtype=torch.bfloat16)
    for name, a, o, b in zip(("out", "max_logits", "lse"), got, oracle, lowp):
        check_close(a, o, b, name)


def random_topk_length(s_q, topk, device):
    """Row 0 reads everything, row 1 nothing (an empty row), the rest a random prefix."""
    tl = torch.randint(0, topk + 1, (s_q,), dtype=torch.int32)
    tl[0] = topk
    if s_q > 1:
        tl[1] = 0
    return tl.to(device)


def dsv4_sinks_with_infs(h_q):
    s = sinks_like(h_q, "dsv4")
    if h_q >= 8:  # padded heads (-inf) and a fully absorbed head (+inf) beside finite ones
        s[0], s[-1] = float("-inf"), float("inf")
    return s


def _grid():
    """Hq 1..128 (any head count: 8 and 16 are the TP-8 shapes), topk 1..2048, both Dqk."""
    cases = []
    for d_qk in (512, 576):
        for h_q in (1, 8, 16, 24, 64, 128):
            for topk in (1, 17, 64, 640, 2048):
                work = h_q * topk
                size = "tiny" if work <= 16 * 64 else ("small" if work <= 64 * 640 else "large")
                cases.append(dict(d_qk=d_qk, h_q=h_q, topk=topk, size=size))
    return cases


@pytest.mark.parametrize("target,c", params(cases=_grid(), op="mla",
                                            case_id=lambda c: f"d{c['d_qk']}_h{c['h_q']}_k{c['topk']}"))
def test_grid_vs_oracle(target, c):
    s_q = 6 if c["h_q"] * c["topk"] <= 64 * 640 else 3
    case = make_sparse_prefill_case(s_q, 3000, c["h_q"], c["d_qk"], c["topk"], device=target.device)
    scale = c["d_qk"] ** -0.5
    sink = dsv4_sinks_with_infs(c["h_q"])
    tl = random_topk_length(s_q, c["topk"], target.device)
    check_against_oracle(run_prefill(target, case, scale, sink, tl), case, scale, sink, tl)


@pytest.mark.parametrize("target,c", params(cases=[dict(d_qk=d, h_q=h, size="large") for d in (512, 576)
                                                   for h in (128, 100)],
                                            op="mla", case_id=lambda c: f"d{c['d_qk']}_h{c['h_q']}"))
def test_many_rows_per_cta(target, c):
    """More (row, head block) items than a GPU has SMs (many waves of CTAs; a persistent kernel, as
    tried in bench/NOTES.md "Prefill v1.4", would run ~10 items per CTA): rows of 0, 1 and 2 steps in every order, runs of empty rows between them, a partial head
    block (100 heads)."""
    s_q, topk = 640, 256
    case = make_sparse_prefill_case(s_q, 5000, c["h_q"], c["d_qk"], topk, device=target.device)
    scale = c["d_qk"] ** -0.5
    sink = dsv4_sinks_with_infs(c["h_q"])
    tl = torch.randint(1, topk + 1, (s_q,), dtype=torch.int32)
    tl[torch.arange(s_q) // 3 % 4 == 0] = 0  # runs of three empty rows
    tl[torch.arange(s_q) % 11 == 5] = 1      # one key: one step with a single valid key
    check_against_oracle(run_prefill(target, case, scale, sink, tl.to(target.device)), case, scale, sink,
                         tl.to(target.device))


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("d_qk", [512, 576])
@pytest.mark.parametrize("scale", [1.0, 0.0, -0.05])
def test_large_and_non_positive_scales(target, d_qk, scale):
    """Scale 1 spreads the logits over ~+-100 log2 units, so a row's max grows by more than the sm90
    kernels' lazy-rescale threshold (8) in later blocks as well as by less, in either consumer
    (max_logits must still be the true max); 0 and negative scales (the max of the raw logits is no
    longer the max) run the sm80 kernel on Hopper."""
    h_q, topk = {"large": (128, 1152), "small": (64, 640)}.get(target.max_size, (16, 64))
    case = make_sparse_prefill_case(3, 3000, h_q, d_qk, topk, device=target.device)
    sink = dsv4_sinks_with_infs(h_q)
    tl = random_topk_length(3, topk, target.device)
    check_against_oracle(run_prefill(target, case, scale, sink, tl), case, scale, sink, tl)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q", [8, 96, 200])
def test_no_sink_no_topk_length(target, h_q):
    topk = 200 if target.max_size != "tiny" else 32
    case = make_sparse_prefill_case(3, 2000, h_q, 512, topk, device=target.device)
    check_against_oracle(run_prefill(target, case, 0.05), case, 0.05)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q", [16, 64, 100])  # 64, 100: the sm_90a kernel on Hopper
def test_non_contiguous_inputs(target, h_q):
    s_q, d_qk, topk, s_kv = 5, 576, 40, 1500
    dev = target.device
    q = torch.randn(h_q, s_q, d_qk, device=dev).to(torch.bfloat16).transpose(0, 1)  # head-major storage
    kv = torch.randn(s_kv, 1, d_qk + 64, device=dev).to(torch.bfloat16)[..., :d_qk]  # padded rows
    idx = torch.randint(-5, s_kv + 5, (s_q, 1, 2 * topk), dtype=torch.int32, device=dev)[..., :topk]
    assert not q.is_contiguous() and not kv.is_contiguous() and not idx.is_contiguous()
    case = dict(q=q, kv=kv, indices=idx)
    sink = sinks_like(h_q, "dsv4")
    check_against_oracle(run_prefill(target, case, d_qk ** -0.5, sink), case, d_qk ** -0.5, sink)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q,pad", [(64, 8), (100, 8), (128, 4), (64, 0)])
def test_strided_out(target, h_q, pad):
    """out= as a view into wider rows: a head stride of 512 + pad elements (pad 8: 16-byte aligned
    strides, which the sm90 kernel may store by TMA; pad 4: not, the threads store) and a row
    stride of h_q x that; the padding columns stay as they were (NaN) and the heads past a
    partial 64-head block are not written past h_q."""
    s_q, d_qk, topk = 5, 512, 200
    case = make_sparse_prefill_case(s_q, 1000, h_q, d_qk, topk, device=target.device)
    scale, sink = d_qk ** -0.5, sinks_like(h_q, "dsv4")
    tl = random_topk_length(s_q, topk, target.device)
    wide = nan_like((s_q, h_q, 512 + pad), torch.bfloat16, target.device)
    out = wide[..., :512]
    max_logits = nan_like((s_q, h_q), torch.float32, target.device)
    lse = nan_like((s_q, h_q), torch.float32, target.device)
    torch.ops.sinkops.sparse_mla_prefill_out(case["q"], case["kv"], case["indices"], scale, 512, sink.to(target.device),
                                             tl, target.backend, out=out, max_logits=max_logits, lse=lse)
    check_against_oracle((out, max_logits, lse), case, scale, sink, tl)
    assert torch.isnan(wide[..., 512:].float()).all(), "out=: the padding beside the view was written"


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q", [16, 64])
def test_empty_rows_are_exact(target, h_q):
    """All-invalid indices and topk_length 0: out exactly 0, lse +inf, max_logits -inf, any sink."""
    s_q, topk = 4, 70
    case = make_sparse_prefill_case(s_q, 500, h_q, 512, topk, device=target.device)
    idx = case["indices"].clone()
    idx[0] = -1
    idx[1] = 500  # == s_kv: out of range
    case = dict(case, indices=idx)
    tl = torch.tensor([topk, topk, 0, topk], dtype=torch.int32, device=target.device)
    sink = sinks_like(h_q, "mixed")
    out, ml, lse = run_prefill(target, case, 0.04, sink, tl)
    for r in range(3):
        assert torch.equal(out[r], torch.zeros_like(out[r])), f"row {r} not exactly zero"
        assert torch.isposinf(lse[r]).all() and torch.isneginf(ml[r]).all()
    assert torch.isfinite(lse[3]).all()
    check_against_oracle((out, ml, lse), case, 0.04, sink, tl)


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q", [16, 64])
def test_inf_sinks_exact(target, h_q):
    """-inf sink: bitwise no-op vs no sink. +inf sink: zero rows, lse / max_logits unchanged."""
    case = make_sparse_prefill_case(4, 1000, h_q, 512, 48, device=target.device)
    base = run_prefill(target, case, 0.044)
    neg = run_prefill(target, case, 0.044, sinks_like(h_q, "neginf"))
    pos = run_prefill(target, case, 0.044, sinks_like(h_q, "posinf"))
    for a, b in zip(base, neg):
        assert torch.equal(a, b), "-inf sink is not a bitwise no-op"
    assert torch.equal(pos[0], torch.zeros_like(pos[0]))
    assert torch.equal(pos[1], base[1]) and torch.equal(pos[2], base[2])


@pytest.mark.parametrize("target", params(op="mla"))
@pytest.mark.parametrize("h_q", [16, 64])
def test_duplicates_count_each_time(target, h_q):
    case = make_sparse_prefill_case(3, 200, h_q, 512, 8, device=target.device, invalid_frac=0.0, dup=False)
    idx = case["indices"].clone()
    idx[:, :, 4:] = idx[:, :, :4]  # every key twice: the same as single keys with logit + log(2)
    case = dict(case, indices=idx)
    sink = sinks_like(h_q, "dsv4")
    check_against_oracle(run_prefill(target, case, 0.05, sink), case, 0.05, sink)


@pytest.mark.parametrize("target", params(op="mla"))
def test_deterministic(target):
    h_q, topk = (128, 700) if target.max_size == "large" else (16, 64)
    case = make_sparse_prefill_case(4, 4000, h_q, 576, topk, device=target.device)
    sink = sinks_like(h_q, "dsv4")
    a = run_prefill(target, case, 1 / 24, sink)
    b = run_prefill(target, case, 1 / 24, sink)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


# Upstream (vLLM XPU sparse-MLA sink fix) error of ignoring the sink, by valid keys per row.
UPSTREAM_IGNORED = {1: "105-118 %", 4: "24-56 %", 16: "0.6-22 %", 128: "0.2-3.5 %", 512: "0.2-0.8 %",
                    1024: "0.2-0.8 %", 2048: "0.2-0.8 %"}


@pytest.mark.parametrize("target", params(op="mla"))
def test_sink_fix_table_dsv4(target):
    """Rows with 1..2048 valid keys, sinks in DeepSeek-V4's range: the sink matters most for short
    rows. Prints ours beside upstream's numbers; fused must stay under 3e-3 (upstream: <= 2.2e-3)."""
    counts = [c for c in UPSTREAM_IGNORED if target.max_size != "tiny" or c <= 128]
    h_q, d_qk, topk, s_kv, rows = 64 if target.max_size != "tiny" else 16, 512, max(counts), 32768, 2
    s_q = rows * len(counts)
    case = make_sparse_prefill_case(s_q, s_kv, h_q, d_qk, topk, device=target.device, invalid_frac=0.0, dup=False)
    tl = torch.tensor([c for c in counts for _ in range(rows)], dtype=torch.int32, device=target.device)
    sink = sinks_like(h_q, "dsv4")
    scale = d_qk ** -0.5
    fused = run_prefill(target, case, scale, sink, tl)[0]
    ignored = run_prefill(target, case, scale, None, tl)[0]
    oracle = prefill_oracle(case, scale, sink, tl)[0]
    print(f"\n{target}: {'valid keys':>10} | {'ignored (ours)':>14} | {'ignored (upstream)':>18} | {'fused':>9}")
    worst = 0.0
    for i, c in enumerate(counts):
        sl = slice(i * rows, (i + 1) * rows)
        e_ign, e_fused = rel_l2(ignored[sl], oracle[sl]), rel_l2(fused[sl], oracle[sl])
        worst = max(worst, e_fused)
        print(f"{c:>10} | {100 * e_ign:>12.2f} % | {UPSTREAM_IGNORED[c]:>18} | {e_fused:>9.2e}")
    assert worst <= 3e-3


@pytest.mark.parametrize("target", params([BY_NAME["cuda"], BY_NAME["triton"]], op="mla"))
@pytest.mark.parametrize("h_q", [16, 64])
def test_kv_over_2_pow_31_elements(target, h_q):
    """Skv * 512 > 2^31: rows that index the far end must read the right bytes (64-bit offsets)."""
    s_kv, d_qk, s_q, topk = 4_200_000, 512, 6, 256
    assert s_kv * d_qk > 2 ** 31
    kv = torch.empty(s_kv, 1, d_qk, dtype=torch.bfloat16, device="cuda").normal_()
    q = torch.randn(s_q, h_q, d_qk, device="cuda").to(torch.bfloat16)
    far = torch.randint(s_kv - 4096, s_kv, (s_q, 1, topk), dtype=torch.int32, device="cuda")
    anywhere = torch.randint(0, s_kv, (s_q, 1, topk), dtype=torch.int32, device="cuda")
    idx = torch.where(torch.rand(s_q, 1, topk, device="cuda") < 0.7, far, anywhere)
    idx[0, 0, :] = s_kv - 1  # the very last row
    case = dict(q=q, kv=kv, indices=idx)
    sink = sinks_like(h_q, "dsv4")
    got = run_prefill(target, case, d_qk ** -0.5, sink)
    from sinkops import reference  # float32 oracle on the GPU: kv stays bf16, gathered then upcast

    oracle = reference.sparse_mla_prefill(q.float(), kv, idx, d_qk ** -0.5, 512, sink.cuda(), None)
    assert rel_l2(got[0], oracle[0]) < 3e-3
    assert rel_l2(got[2], oracle[2]) < 1e-4 and rel_l2(got[1], oracle[1]) < 1e-4
    assert math.isfinite(got[2].sum().item())


def _default_and_with_env(monkeypatch, env, h_q, d_qk, topk):
    """One GPU prefill case run by the cuda backend as built, then with `env` set to "1" / "0"
    (name=value); both results checked against the oracle and returned."""
    case = make_sparse_prefill_case(4, 3000, h_q, d_qk, topk, device="cuda")
    sink = dsv4_sinks_with_infs(h_q).cuda()
    tl = random_topk_length(4, topk, "cuda")
    target = BY_NAME["cuda"]
    default = run_prefill(target, case, d_qk ** -0.5, sink, tl)
    name, value = env.split("=")
    monkeypatch.setenv(name, value)
    other = run_prefill(target, case, d_qk ** -0.5, sink, tl)
    for got in (default, other):
        check_against_oracle(got, case, d_qk ** -0.5, sink, tl)
    return default, other


@pytest.mark.gpu
@pytest.mark.parametrize("h_q,d_qk,topk", [(64, 512, 640), (128, 576, 300), (100, 512, 200)])
def test_cuda_sm80_path_on_hopper(monkeypatch, h_q, d_qk, topk):
    """SINKOPS_CUDA_SM80=1 keeps the portable kernels for >32 heads on Hopper too (what A100-class
    GPUs run); both paths must match the oracle, and each other closely."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    fast, portable = _default_and_with_env(monkeypatch, "SINKOPS_CUDA_SM80=1", h_q, d_qk, topk)
    assert rel_l2(fast[0], portable[0]) < 5e-3


@pytest.mark.gpu
@pytest.mark.parametrize("h_q,d_qk,topk", [(64, 512, 640), (100, 576, 300), (48, 512, 200)])
def test_cuda_sm90_without_tma(monkeypatch, h_q, d_qk, topk):
    """The sm_90a prefill loads Q and stores the output by TMA (evict_first in L2; 48 heads: a
    64-head box over a 48-head map); where no map can be made it falls back to the producer's
    cp.async for Q and the threads' stores for the output. SINKOPS_WA90_TMA=0 turns the maps off:
    both forms match the oracle, and agree to the bit (the same MMAs, only the copies differ)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops import _build_info
    if torch.cuda.get_device_capability() != (9, 0) or "with the sm_90a" not in _build_info.CORES["cuda"]:
        pytest.skip("needs Hopper and a build with the sm_90a kernels (else both runs take the sm80 kernels)")
    by_tma, by_threads = _default_and_with_env(monkeypatch, "SINKOPS_WA90_TMA=0", h_q, d_qk, topk)
    for a, b in zip(by_tma, by_threads):
        assert torch.equal(a, b)


def _sm90_kernel_names(h_q, d_qk, topk):
    """Names of the CUDA kernels one cuda-backend prefill call launches (a small random case);
    skips unless this is Hopper and the build has the sm_90a kernels."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from sinkops import _build_info
    if torch.cuda.get_device_capability() != (9, 0) or "with the sm_90a" not in _build_info.CORES["cuda"]:
        pytest.skip("needs Hopper and a build with the sm_90a kernels")
    case = make_sparse_prefill_case(2, 500, h_q, d_qk, topk, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run_prefill(BY_NAME["cuda"], case, d_qk ** -0.5)
        torch.cuda.synchronize()
    return " ".join(e.name for e in prof.events())


@pytest.mark.gpu
@pytest.mark.parametrize("h_q,d_qk,topk,loads", [(128, 512, 1152, "tma"), (100, 576, 300, "tma"),
                                                 (100, 576, 300, "cp.async"), (256, 512, 200, "tma"),
                                                 (128, 576, 70, "cp.async"), (192, 512, 640, "tma"),
                                                 (64, 576, 640, "tma")])
def test_cuda_sm90_head_block_pairs(monkeypatch, h_q, d_qk, topk, loads):
    """With SINKOPS_PREFILL_PAIR=1 and an even number of 64-head blocks the sm_90a prefill runs a
    query's blocks as 2-CTA clusters: each CTA gathers half of every key block and sends it to its
    peer's buffer (bulk copies between the CTAs' shared memory); the default runs every CTA alone.
    Both match the oracle (empty rows through topk_length, +-inf sinks, invalid indices) and agree
    to the bit (the same MMAs over the same bytes); the knob takes the pairs exactly where the head
    blocks pair up. Q by TMA or (SINKOPS_WA90_TMA=0) by the producer's cp.async, every thread of it."""
    monkeypatch.setenv("SINKOPS_WA90_TMA", "1" if loads == "tma" else "0")
    monkeypatch.setenv("SINKOPS_PREFILL_PAIR", "1")
    names = _sm90_kernel_names(h_q, d_qk, topk)
    paired = ((h_q + 63) // 64) % 2 == 0
    assert ("sparse_mla_prefill_sm90_kernel<%d, %s>" % (d_qk, "true" if paired else "false")) in names, names
    monkeypatch.delenv("SINKOPS_PREFILL_PAIR")
    alone, pairs = _default_and_with_env(monkeypatch, "SINKOPS_PREFILL_PAIR=1", h_q, d_qk, topk)
    for a, b in zip(pairs, alone):
        assert torch.equal(a, b)




@pytest.mark.gpu
@pytest.mark.parametrize("h_q,d_qk,topk", [(8, 512, 640), (13, 576, 300), (16, 512, 1152), (1, 576, 70),
                                           (5, 512, 2048), (24, 512, 640), (32, 576, 2048)])
def test_cuda_few_heads_on_hopper(monkeypatch, h_q, d_qk, topk):
    """At <= 32 heads Hopper runs the few-heads kernel (keys in the MMA's M, heads in N, 8-, 16- or
    32-head CTAs: nothing padded); SINKOPS_CUDA_SM80=1 the portable 16 / 32-head tiles. Both match the
    oracle (empty rows, +-inf sinks, invalid indices) and each other closely, and the default is the
    few-heads kernel."""
    names = _sm90_kernel_names(h_q, d_qk, topk)
    assert "sparse_mla_prefill_few_heads_sm90_kernel" in names, names
    few, portable = _default_and_with_env(monkeypatch, "SINKOPS_CUDA_SM80=1", h_q, d_qk, topk)
    assert rel_l2(few[0], portable[0]) < 5e-3
