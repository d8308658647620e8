"""Kernel time of every op and GPU backend under CUDA-graph replay (no host cost), through the
public API only, so the same script times any sinkops install: run it against the previous
commit's wheel and this one's in the same call to see that no kernel got slower.

    python bench/bench_kernels.py [--json out.json] [--label NAME] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

# No sys.path change: this times whichever sinkops is installed (PYTHONPATH picks it).


def graph_us(fn, replays=50):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(5):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(replays // 5):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / (replays // 5 * 5))
    return sorted(times)[len(times) // 2]


def eager_us(fn, calls=200, warmup=20):
    """Wall time per call of `calls` back-to-back eager calls (what a user pays: host + kernel)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def try_or_none(fn, what):
    """fn(), or None with a one-line note on stderr: a missing or failing peer is a column of n/a."""
    try:
        return fn()
    except Exception as e:
        print(f"    ({what}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})", file=sys.stderr)
        return None


class EnvPath:
    """`name`=`value` in the environment inside the block (a CUDA kernel-family switch). The decode
    plans are dropped on the way in and out: its split plan follows the kernel family."""

    def __init__(self, name, value):
        self.name, self.value = name, value

    def _drop_plans(self):
        from sinkops.ops import decode
        decode._PLANS.clear()

    def __enter__(self):
        os.environ[self.name] = self.value
        self._drop_plans()

    def __exit__(self, *exc):
        os.environ.pop(self.name, None)
        self._drop_plans()


def Sm80Path():
    """SINKOPS_CUDA_SM80=1 inside the block: the CUDA backend takes its portable (mma.sync) kernels."""
    return EnvPath("SINKOPS_CUDA_SM80", "1")


def Sm90WideHeadsPath():
    """SINKOPS_DECODE_FEW_HEADS=0 inside the block: decode at <= 32 heads takes the 64-head sm90 kernel."""
    return EnvPath("SINKOPS_DECODE_FEW_HEADS", "0")


def window_cases(quick):
    # name, segments, tokens per segment, Hq, Hk, D, window, sink mode
    yield ("window mimo-image 1x4096", 1, 4096, 32, 8, 64, (64, 64), "key0")
    yield ("window mimo-image 1x4096 null", 1, 4096, 32, 8, 64, (64, 64), "null")
    yield ("window mimo-image 1x4096 no sink", 1, 4096, 32, 8, 64, (64, 64), "none")
    yield ("window mimo-video 16x1024", 16, 1024, 32, 8, 64, (64, 64), "key0")
    yield ("window 2x2048 16/16 d80", 2, 2048, 16, 16, 80, (64, 64), "key0")
    if not quick:
        yield ("window 16x1024 d128", 16, 1024, 32, 8, 128, (64, 64), "key0")
        yield ("window unbounded 1x4096 d128", 1, 4096, 32, 8, 128, (-1, -1), "key0")


def prefill_cases(quick):
    # name, queries, keys, Hq, Dqk, topk
    sq = 1024 if quick else 4096
    yield (f"prefill V4-Flash h64 k640 ({sq} q)", sq, 32768, 64, 512, 640)
    yield (f"prefill V4-Pro h128 k1152 ({sq} q)", sq, 32768, 128, 512, 1152)
    yield (f"prefill V3.2 h128 d576 k2048 ({sq} q)", sq, 32768, 128, 576, 2048)
    yield (f"prefill TP8 h8 k640 ({sq} q)", sq, 32768, 8, 512, 640)


def decode_cases(quick):
    # name, layout, batch, s_q, Hq, topk
    yield ("decode v4 b1 h64 k640", "v4", 1, 1, 64, 640)
    yield ("decode v4 b16 h64 k640", "v4", 16, 1, 64, 640)
    yield ("decode v4 b128 h64 k640", "v4", 128, 1, 64, 640)
    yield ("decode v4 b64 h8 k640", "v4", 64, 1, 8, 640)
    yield ("decode v4 b128 s2 h128 k1152", "v4", 128, 2, 128, 1152)
    if not quick:
        yield ("decode v32 b128 s2 h128 k2048", "v32", 128, 2, 128, 2048)


def main():
    import sinkops

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--label", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backends", default="cuda,triton")
    ap.add_argument("--only", default="window,prefill,decode", help="ops to time")
    args = ap.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    backends = args.backends.split(",")
    rows = []

    def record(name, make):
        row = {"case": name}
        for b in backends:
            try:
                fn = make(b)
                row[b] = graph_us(fn)
            except Exception as e:  # one failing backend must not stop the table
                print(f"# {name} {b}: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}",
                      file=sys.stderr)
                row[b] = None
        rows.append(row)
        print(f"| {name} | " + " | ".join("n/a" if row[b] is None else f"{row[b]:.1f}" for b in backends) + " |",
              flush=True)

    print(f"# kernel µs under CUDA-graph replay, {args.label} (sinkops {sinkops.__version__})")
    print("| case | " + " | ".join(backends) + " |\n|---|" + "---|" * len(backends))
    bf16 = torch.bfloat16
    only = args.only.split(",")
    for name, nseg, per, hq, hk, d, window, mode in (window_cases(args.quick) if "window" in only else ()):
        t = nseg * per
        q, k, v = (torch.randn(t, h, d, device=dev, dtype=bf16) for h in (hq, hk, hk))
        cu = torch.arange(0, t + 1, per, device=dev, dtype=torch.int32)
        sinks = None if mode == "none" else torch.rand(hq, device=dev) - 0.1
        out = torch.empty_like(q)
        record(name, lambda b: lambda: sinkops.window_attention(
            q, k, v, cu, None, per, window_size=window, sinks=sinks, sink_mode="key0" if mode == "none" else mode,
            out=out, backend=b))
        del q, k, v, out
    for name, sq, skv, hq, dqk, topk in (prefill_cases(args.quick) if "prefill" in only else ()):
        q = torch.randn(sq, hq, dqk, device=dev, dtype=bf16)
        kv = torch.randn(skv, 1, dqk, device=dev, dtype=bf16)
        idx = torch.randint(0, skv, (sq, 1, topk), device=dev, dtype=torch.int32)
        sink = torch.rand(hq, device=dev) * 4.7 - 2.2
        out = torch.empty(sq, hq, 512, device=dev, dtype=bf16)
        record(name, lambda b: lambda: sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, attn_sink=sink, out=out,
                                                                  backend=b))
        del q, kv, idx, out
    for name, layout, batch, s_q, hq, topk in (decode_cases(args.quick) if "decode" in only else ()):
        dqk = 512 if layout == "v4" else 576
        cache = sinkops.pack_kv_cache(torch.randn(65536, dqk, device=dev, dtype=bf16), layout, block_size=64)
        q = torch.randn(batch, s_q, hq, dqk, device=dev, dtype=bf16)
        idx = torch.randint(0, 65536, (batch, s_q, topk), device=dev, dtype=torch.int32)
        sink = torch.rand(hq, device=dev) * 4.7 - 2.2
        record(name, lambda b: lambda: sinkops.sparse_mla_decode(q, cache, idx, dqk ** -0.5, attn_sink=sink,
                                                                 layout=layout, backend=b))
        del cache, q, idx
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(label=args.label, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
