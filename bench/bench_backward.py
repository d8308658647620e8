"""Backward passes on the GPU: our Triton and CUDA backwards vs our forward, vs FlexAttention's backward (window,
key0 score_mod), and the sparse-prefill backward's TFLOP/s (FLOPs = 2.5 x the forward's), plus the
memory high-water mark of one training step. All columns measured in this run (do_bench medians).

    python bench/bench_backward.py [--quick] [--json PATH]

Timed: "fwd" the forward op; "bwd" the backward op alone (torch.ops.sinkops.*_backward with the
saved out/lse, what autograd calls), eager and as CUDA-graph replay (kernels only); "step" forward
+ autograd backward as a trainer pays it. Window floor: q, k, v, out, dout read and dq, dk, dv
written once, at the copy bandwidth measured in this run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # a checkout, unless installed
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # helpers of the other benchmarks

from bench_kernels import graph_us  # noqa: E402
from bench_window_attention import copy_bandwidth, flex_key0  # noqa: E402

WINDOW_CASES = [  # name, segments, tokens each, Hq, Hk, d, window
    ("mimo-image 1x4096", 1, 4096, 32, 8, 64, (64, 64)),
    ("mimo-video 16x1024", 16, 1024, 32, 8, 64, (64, 64)),
    ("2x2048 16/16 d80", 2, 2048, 16, 16, 80, (64, 64)),
    ("unbounded 1x4096 32/8 d128", 1, 4096, 32, 8, 128, (-1, -1)),
]
PREFILL_CASES = [  # name, queries, keys, Hq, Dqk, topk
    ("V4-Pro h128 k1152", 4096, 32768, 128, 512, 1152),
    ("V4-Flash h64 k640", 4096, 32768, 64, 512, 640),
    ("V3.2 h128 d576 k2048", 2048, 32768, 128, 576, 2048),
    ("V4-Flash TP8 h8 k640", 4096, 32768, 8, 512, 640),
]


def _us(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3


def _try(what, fn):
    try:
        return fn()
    except Exception as e:  # one failing column must not stop the table
        print(f"# {what}: n/a ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})", file=sys.stderr)
        if "--verbose" in sys.argv:
            traceback.print_exc()
        return None


def _peak_mb(step) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def window_row(case, bandwidth, flex=True):
    import sinkops

    name, nseg, seqlen, hq, hk, d, window = case
    t = nseg * seqlen
    dev, bf16 = "cuda", torch.bfloat16
    q, k, v = (torch.randn(t, h, d, device=dev, dtype=bf16) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, seqlen, device=dev, dtype=torch.int32)
    sinks = -0.1 + 0.7 * torch.rand(hq, device=dev)
    scale = d ** -0.5
    leaves = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    g_out = torch.randn(t, hq, d, device=dev, dtype=bf16)
    row = dict(case=name, tokens=t)

    def forward(*xs, backend="triton"):
        return sinkops.window_attention(*xs[:3], cu, cu, seqlen, seqlen, window_size=window, sinks=xs[3],
                                        return_lse=True, backend=backend)

    row["fwd_us"] = _try(f"{name} fwd", lambda: _us(lambda: forward(q, k, v, sinks)))
    # our fastest forward (auto: the sm90 kernel where it is built), the yardstick
    row["fwd_auto_us"] = _try(f"{name} fwd auto", lambda: _us(lambda: forward(q, k, v, sinks, backend="auto")))
    out, lse = forward(q, k, v, sinks)
    left, right = window
    for label, backend in (("", "triton"), ("_cuda", "cuda")):
        bwd = lambda backend=backend: torch.ops.sinkops.window_attention_backward(  # noqa: E731
            g_out, None, q, k, v, out, lse, cu, cu, seqlen, seqlen, left, right, scale, sinks, "key0", False, backend)
        row[f"bwd{label}_us"] = _try(f"{name} bwd {backend}", lambda: _us(bwd))
        row[f"bwd{label}_graph_us"] = _try(f"{name} bwd {backend} graph", lambda: graph_us(bwd))
    nbytes = 2 * (4 * q.numel() + 2 * (k.numel() + v.numel()))  # q, out, dout, dq; k, v, dk, dv (bf16)
    row["floor_us"] = nbytes / bandwidth * 1e6 if bandwidth else None

    def step():  # what a trainer pays: auto's forward and backward
        o, _ = forward(*leaves, backend="auto")
        torch.autograd.grad(o, leaves, g_out)
    row["step_us"] = _try(f"{name} step", lambda: _us(step))
    row["step_peak_mb"] = _try(f"{name} peak", lambda: _peak_mb(step))

    def flex_parts():
        import torch._functorch.config as functorch_config
        from torch.nn.attention.flex_attention import flex_attention

        functorch_config.donated_buffer = False  # so the backward alone can be replayed (retain_graph)
        mask, key0_bias = flex_key0(q, cu, window, sinks)
        flex = torch.compile(flex_attention, dynamic=False)
        fl = [x.detach().transpose(0, 1).unsqueeze(0).contiguous().requires_grad_() for x in (q, k, v)]
        go = g_out.transpose(0, 1).unsqueeze(0).contiguous()

        def flex_step():
            o = flex(*fl, score_mod=key0_bias, block_mask=mask, enable_gqa=True)
            torch.autograd.grad(o, fl, go)
        flex_step()
        o = flex(*fl, score_mod=key0_bias, block_mask=mask, enable_gqa=True)
        flex_bwd = lambda: torch.autograd.grad(o, fl, go, retain_graph=True)  # noqa: E731
        return flex_step, flex_bwd

    parts = _try(f"{name} flex", flex_parts) if flex else None
    if parts:
        row["flex_step_us"] = _try(f"{name} flex step", lambda: _us(parts[0]))
        row["flex_bwd_us"] = _try(f"{name} flex bwd", lambda: _us(parts[1]))
        row["flex_step_peak_mb"] = _try(f"{name} flex peak", lambda: _peak_mb(parts[0]))
    return row


def prefill_row(case, deterministic, backend="triton"):
    """One sparse-prefill row: the forward (Triton's and auto's) and `backend`'s backward op."""
    import sinkops

    name, sq, skv, hq, dqk, topk = case
    dev, bf16 = "cuda", torch.bfloat16
    q = torch.randn(sq, hq, dqk, device=dev, dtype=bf16)
    kv = torch.randn(skv, 1, dqk, device=dev, dtype=bf16)
    idx = torch.randint(0, skv, (sq, 1, topk), device=dev, dtype=torch.int32)
    sink = -2.2 + 4.7 * torch.rand(hq, device=dev)
    scale = dqk ** -0.5
    g_out = torch.randn(sq, hq, 512, device=dev, dtype=bf16)
    flops = 2 * sq * hq * topk * (dqk + 512)
    row = dict(case=name, fwd_flops=flops, deterministic=deterministic, backend=backend)
    for label, fb in (("fwd_us", "triton"), ("fwd_auto_us", "auto")):
        row[label] = _try(f"{name} fwd {fb}", lambda fb=fb: _us(lambda: sinkops.sparse_mla_prefill(
            q, kv, idx, scale, attn_sink=sink, backend=fb)))
    out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, scale, attn_sink=sink, backend="triton")
    bwd = lambda: torch.ops.sinkops.sparse_mla_prefill_backward(  # noqa: E731
        g_out, None, q, kv, idx, out, lse, scale, 512, sink, None, deterministic, backend)
    row["bwd_us"] = _try(f"{name} bwd {backend}", lambda: _us(bwd))
    row["bwd_graph_us"] = None if deterministic else _try(f"{name} bwd graph", lambda: graph_us(bwd, replays=10))
    if row["bwd_us"]:
        row["bwd_tflops"] = 2.5 * flops / (row["bwd_us"] * 1e-6) / 1e12
    for label in ("fwd_us", "fwd_auto_us"):
        if row[label]:
            row[label.replace("_us", "_tflops")] = flops / (row[label] * 1e-6) / 1e12
    if "--profile" in sys.argv and not deterministic and row["bwd_us"]:
        by_kernel(f"{name} bwd {backend}", bwd, calls=5)
    return row


def kernel_times(fn, calls=20) -> dict:
    """{kernel name: GPU µs per call of fn} (torch.profiler), longest first."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)
    return {ev.key: ev.device_time_total / calls for ev in events if ev.device_time_total > 0}


def by_kernel(label, fn, calls=20):
    """Prints the GPU time per call of fn, by kernel."""
    print(f"\n{label}, by kernel ({calls} calls)")
    for key, us in list(kernel_times(fn, calls).items())[:8]:
        print(f"  {key[:70]:70s} {us:8.1f} µs")


def kernel_breakdown(case):
    """µs per kernel of one window backward (torch.profiler), and the host cost of the autograd
    path: forward with grad (torch.ops + autograd wrapper) and torch.autograd.grad alone."""
    import sinkops

    name, nseg, seqlen, hq, hk, d, window = case
    t = nseg * seqlen
    q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
    sinks = -0.1 + 0.7 * torch.rand(hq, device="cuda")
    leaves = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    g_out = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16)
    fwd = lambda: sinkops.window_attention(*leaves[:3], cu, cu, seqlen, seqlen, window_size=window,  # noqa: E731
                                           sinks=leaves[3], backend="triton")
    out = fwd()
    by_kernel(f"{name}: GPU time per backward", lambda: torch.autograd.grad(out, leaves, g_out, retain_graph=True))
    import time
    for label, fn in (("forward with grad (torch.ops + autograd)", fwd),
                      ("torch.autograd.grad (backward op + wrapper)",
                       lambda: torch.autograd.grad(out, leaves, g_out, retain_graph=True))):
        torch.cuda.synchronize()
        n = 50
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / n * 1e6
        print(f"  host {label}: {host:.0f} µs issue, {wall:.0f} µs wall")


def tile_sweep(case, variants):
    """Backward op time per tile variant of sinkops/triton/window_attention_backward.backward_tiles."""
    import sinkops  # noqa: F401
    from sinkops.ops import window_backward
    from sinkops.triton import window_attention_backward as wb

    name, nseg, seqlen, hq, hk, d, window = case
    t = nseg * seqlen
    q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
    sinks = -0.1 + 0.7 * torch.rand(hq, device="cuda")
    out, lse = sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, window_size=window, sinks=sinks,
                                        return_lse=True, backend="triton")
    g_out = torch.randn_like(out)
    original = wb.backward_tiles
    print(f"\n{name}: backward op µs per tile variant (dq block_n, dk/dv block_n, dk/dv block_m, warps, stages"
          "[, dq positions per tile])")
    try:
        for variant in variants:
            dq_n, kv_n, kv_m, warps, stages = variant[:5]
            base = original(d, d, hq // hk, True)
            block_q = variant[5] if len(variant) > 5 else base[0]  # positions per dq tile (x heads)
            wb.backward_tiles = lambda *a, _t=(block_q, base[1], dq_n, kv_n, kv_m, base[5], base[6], warps, stages): _t
            window_backward._PLANS.clear()
            run = lambda: torch.ops.sinkops.window_attention_backward(  # noqa: E731
                g_out, None, q, k, v, out, lse, cu, cu, seqlen, seqlen, window[0], window[1], d ** -0.5, sinks,
                "key0", False, "triton")
            print(f"  {variant}: {_try('variant', lambda: _us(run)) or float('nan'):.1f}")
    finally:
        wb.backward_tiles = original
        window_backward._PLANS.clear()


def sparse_sweep(case, variants):
    """Backward op µs per (dq tiles, dkv tiles) variant of sinkops/triton/sparse_mla_backward."""
    import sinkops
    from sinkops.ops import prefill_backward
    from sinkops.triton import sparse_mla_backward as sb

    name, sq, skv, hq, dqk, topk = case
    q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32)
    sink = -2.2 + 4.7 * torch.rand(hq, device="cuda")
    out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, attn_sink=sink, backend="triton")
    g_out = torch.randn_like(out)
    flops = 2.5 * 2 * sq * hq * topk * (dqk + 512)
    originals = sb._dq_tiles, sb._dkv_tiles
    for det in (False, True):
        by_kernel(f"{name}: GPU time per backward{' (deterministic)' if det else ''}",
                  lambda: torch.ops.sinkops.sparse_mla_prefill_backward(
                      g_out, None, q, kv, idx, out, lse, dqk ** -0.5, 512, sink, None, det, "triton"), calls=3)
    print(f"\n{name}: backward op per tile variant (dq: block_h, block_k, warps, stages; "
          "dkv: block_hq, block_k, block_c, warps, stages)")
    try:
        for dq, dkv in variants:
            sb._dq_tiles = lambda *a, _t=dq: _t
            sb._dkv_tiles = lambda *a, _t=dkv: _t
            prefill_backward._PLANS.clear()
            run = lambda: torch.ops.sinkops.sparse_mla_prefill_backward(  # noqa: E731
                g_out, None, q, kv, idx, out, lse, dqk ** -0.5, 512, sink, None, False, "triton")
            us = _try("variant", lambda: _us(run))
            print(f"  {dq} {dkv}: " + ("n/a" if us is None else f"{us:.0f} µs, {flops / us / 1e6:.0f} TFLOP/s"))
    finally:
        sb._dq_tiles, sb._dkv_tiles = originals
        prefill_backward._PLANS.clear()


def _f(x, spec="{:.1f}"):
    return "n/a" if x is None else spec.format(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first case of each table only")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--profile", action="store_true", help="per-kernel times, host cost, tile sweep (MiMo video)")
    ap.add_argument("--sweep", action="store_true", help="sparse backward tile variants (V4-Pro)")
    ap.add_argument("--only", choices=("window", "prefill"), help="one table")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compiles take minutes)")
    ap.add_argument("--backends", help="the sparse backward's backends, comma-separated (default triton,cuda)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_backward needs a CUDA device")
    torch.manual_seed(0)
    if args.profile and args.only != "prefill":
        kernel_breakdown(WINDOW_CASES[1])
        tile_sweep(WINDOW_CASES[1], [(32, 64, 64, 4, 2), (32, 64, 32, 4, 3), (32, 64, 64, 4, 2, 32),
                                     (64, 64, 64, 4, 2, 32), (32, 64, 64, 8, 2, 32), (64, 64, 64, 8, 2, 32),
                                     (16, 64, 64, 4, 2), (32, 64, 64, 4, 2, 8)])
        return
    if args.sweep:
        dq = (64, 64, 8, 1)  # the tiles of bench/NOTES.md "Backward v2"'s sweeps
        sparse_sweep(PREFILL_CASES[0], [(dq, (128, 64, 64, 4, 2)), (dq, (128, 64, 64, 8, 2)), (dq, (128, 32, 64, 2, 2)),
                                        ((64, 32, 8, 1), (128, 64, 64, 4, 2))])
        return
    wcases = WINDOW_CASES[:1] if args.quick else WINDOW_CASES
    pcases = PREFILL_CASES[:1] if args.quick else PREFILL_CASES
    wcases = [] if args.only == "prefill" else wcases
    pcases = [] if args.only == "window" else pcases
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, key0 sinks (window), null (prefill)")
    bandwidth = _try("copy bandwidth", copy_bandwidth)
    print("\n| window case | bwd floor µs | fwd µs (Triton) | fwd µs (auto) | bwd µs Triton | graph | "
          "bwd µs CUDA | graph | best bwd / fwd auto | step µs (auto) | step peak MiB | Flex bwd µs | Flex step µs "
          "| Flex peak MiB | Flex bwd / best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for c in wcases:
        r = window_row(c, bandwidth, flex=not args.no_flex)
        rows.append(r)
        best = min((x for x in (r.get("bwd_us"), r.get("bwd_cuda_us")) if x), default=None)
        ratio = best / r["fwd_auto_us"] if best and r.get("fwd_auto_us") else None
        vs = r["flex_bwd_us"] / best if r.get("flex_bwd_us") and best else None
        print(f"| {r['case']} | {_f(r['floor_us'])} | {_f(r['fwd_us'])} | {_f(r['fwd_auto_us'])} | {_f(r['bwd_us'])} "
              f"| {_f(r['bwd_graph_us'])} | {_f(r.get('bwd_cuda_us'))} | {_f(r.get('bwd_cuda_graph_us'))} "
              f"| {_f(ratio, '{:.2f}')} | {_f(r['step_us'])} "
              f"| {_f(r['step_peak_mb'], '{:.0f}')} | {_f(r.get('flex_bwd_us'))} | {_f(r.get('flex_step_us'))} "
              f"| {_f(r.get('flex_step_peak_mb'), '{:.0f}')} | {_f(vs, '{:.2f}')} |")
        torch.cuda.empty_cache()
    backends = ("triton", "cuda") if args.backends is None else tuple(args.backends.split(","))
    print("\n| prefill case | bwd backend | fwd µs Triton / auto | fwd TFLOP/s Triton / auto | bwd µs (atomics) "
          "| bwd graph µs | bwd TFLOP/s (2.5x fwd FLOPs) | bwd µs (deterministic) | det. TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in pcases:
        for b in backends:
            r = prefill_row(c, False, b)
            rd = prefill_row(c, True, b)
            rows += [r, rd]
            print(f"| {r['case']} | {b} | {_f(r['fwd_us'])} / {_f(r['fwd_auto_us'])} "
                  f"| {_f(r.get('fwd_tflops'))} / {_f(r.get('fwd_auto_tflops'))} | {_f(r['bwd_us'])} "
                  f"| {_f(r['bwd_graph_us'])} | {_f(r.get('bwd_tflops'))} | {_f(rd['bwd_us'])} "
                  f"| {_f(rd.get('bwd_tflops'))} |", flush=True)
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
