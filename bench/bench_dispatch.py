"""Host cost per call of every op (the op-boundary issue): what a user pays beyond the kernel.

For each op, on tiny shapes (the kernel is short, so the host side shows), per backend:
  eager API   sinkops.<op>(...) called back to back, wall time per call (N calls, then one sync);
  host API    the CPU time of those calls alone (issued without waiting; the queue never fills);
  torch.ops   torch.ops.sinkops.<op>(...) the same way (what inference servers call);
  _out        the *_out variant through the public API (out= given);
  graph       CUDA-graph replay of one call: the kernel time, no host cost;
and FlashMLA's Python call for the two sparse ops when flash_mla is importable (the peer).

    python bench/bench_dispatch.py [--json out.json] [--calls 2000]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # a checkout, unless installed
from bench_kernels import eager_us, graph_us  # noqa: E402  (bench/ is on sys.path when run as a script)

TARGET_US = {"cuda": 10.0, "triton": 20.0}


def _per_call_us(fn, calls):
    """(wall µs per call over `calls` back-to-back calls, host µs per call). The host time is the
    CPU time of 100 calls issued while the GPU is held busy by a sleep kernel, so that no call
    waits for the device and a kernel slower than the host cannot hide the host cost."""
    wall = eager_us(fn, calls)
    host = []
    for _ in range(5):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time in front of the calls
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        host.append((time.perf_counter() - t0) / 100 * 1e6)
        torch.cuda.synchronize()
    return wall, min(host)


def _try(fn, *a):
    try:
        return fn(*a)
    except Exception as e:  # a missing backend or peer is n/a, not a failed run
        print(f"    ({type(e).__name__}: {str(e).splitlines()[0][:140] if str(e) else ''})", file=sys.stderr)
        return None


def cases(dev):
    import sinkops

    g = torch.Generator(device=dev).manual_seed(0)
    bf16 = torch.bfloat16
    # window: 64 tokens, MiMo heads (32/8, d 64), window (64, 64), key0 sink
    q = torch.randn(64, 32, 64, device=dev, dtype=bf16, generator=g)
    k = torch.randn(64, 8, 64, device=dev, dtype=bf16, generator=g)
    v = torch.randn(64, 8, 64, device=dev, dtype=bf16, generator=g)
    cu = torch.tensor([0, 64], dtype=torch.int32, device=dev)
    sinks = torch.rand(32, device=dev, generator=g)
    w_out = torch.empty_like(q)
    w_lse = torch.empty(32, 64, device=dev)
    yield ("window_attention", {
        "eager API": lambda b: lambda: sinkops.window_attention(q, k, v, cu, None, 64, window_size=(64, 64),
                                                                sinks=sinks, sink_mode="key0", backend=b),
        "torch.ops": lambda b: lambda: torch.ops.sinkops.window_attention(q, k, v, cu, cu, 64, 64, 64, 64, 0.125,
                                                                          sinks, "key0", b),
        "_out": lambda b: lambda: sinkops.window_attention(q, k, v, cu, None, 64, window_size=(64, 64), sinks=sinks,
                                                           sink_mode="key0", out=w_out, backend=b),
        "torch.ops _out": lambda b: lambda: torch.ops.sinkops.window_attention_out(
            q, k, v, cu, cu, 64, 64, 64, 64, 0.125, sinks, "key0", b, out=w_out, lse=w_lse),
    }, None)

    # prefill: 16 queries, 64 heads, topk 128 over 1024 keys (V4 shapes), attn_sink
    pq = torch.randn(16, 64, 512, device=dev, dtype=bf16, generator=g)
    pkv = torch.randn(1024, 1, 512, device=dev, dtype=bf16, generator=g)
    pidx = torch.randint(0, 1024, (16, 1, 128), device=dev, dtype=torch.int32, generator=g)
    psink = torch.randn(64, device=dev, generator=g)
    p_out = torch.empty(16, 64, 512, device=dev, dtype=bf16)
    p_ml, p_lse = torch.empty(16, 64, device=dev), torch.empty(16, 64, device=dev)

    def flashmla_prefill():
        import flash_mla
        return lambda: flash_mla.flash_mla_sparse_fwd(pq, pkv, pidx, 0.05, 512, psink)
    yield ("sparse_mla_prefill", {
        "eager API": lambda b: lambda: sinkops.sparse_mla_prefill(pq, pkv, pidx, 0.05, attn_sink=psink, backend=b),
        "torch.ops": lambda b: lambda: torch.ops.sinkops.sparse_mla_prefill(pq, pkv, pidx, 0.05, 512, psink, None, b),
        "_out": lambda b: lambda: sinkops.sparse_mla_prefill(pq, pkv, pidx, 0.05, attn_sink=psink, out=p_out,
                                                             backend=b),
        "torch.ops _out": lambda b: lambda: torch.ops.sinkops.sparse_mla_prefill_out(
            pq, pkv, pidx, 0.05, 512, psink, None, b, out=p_out, max_logits=p_ml, lse=p_lse),
    }, flashmla_prefill)

    # decode: batch 1, 64 heads, topk 640, v4 cache of 64 blocks of 64 tokens, attn_sink
    lat = torch.randn(64 * 64, 512, device=dev, dtype=bf16, generator=g)
    cache = sinkops.pack_kv_cache(lat, "v4", block_size=64)
    dq = torch.randn(1, 1, 64, 512, device=dev, dtype=bf16, generator=g)
    didx = torch.randint(0, 64 * 64, (1, 1, 640), device=dev, dtype=torch.int32, generator=g)
    d_out = torch.empty(1, 1, 64, 512, device=dev, dtype=bf16)
    d_lse = torch.empty(1, 64, 1, device=dev)

    def flashmla_decode():
        import flash_mla
        meta = flash_mla.get_mla_metadata()[0]
        fp8 = cache.view(torch.float8_e4m3fn)
        return lambda: flash_mla.flash_mla_with_kvcache(dq, fp8, None, None, 512, meta, None, 0.05, False, True,
                                                        didx, psink)
    yield ("sparse_mla_decode", {
        "eager API": lambda b: lambda: sinkops.sparse_mla_decode(dq, cache, didx, 0.05, attn_sink=psink, layout="v4",
                                                                 backend=b),
        "torch.ops": lambda b: lambda: torch.ops.sinkops.sparse_mla_decode(dq, cache, didx, 0.05, psink, None, "v4",
                                                                           None, None, None, b),
        "_out": lambda b: lambda: sinkops.sparse_mla_decode(dq, cache, didx, 0.05, attn_sink=psink, layout="v4",
                                                            out=d_out, backend=b),
        "torch.ops _out": lambda b: lambda: torch.ops.sinkops.sparse_mla_decode_out(
            dq, cache, didx, 0.05, psink, None, "v4", None, None, None, b, out=d_out, lse=d_lse),
    }, flashmla_decode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--backends", default="cuda,triton")
    args = ap.parse_args()
    dev = torch.device("cuda")
    print(f"# host cost per call, {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"# µs per call: wall = {args.calls} back-to-back calls / calls; host = CPU time of one call issued")
    print("# behind a GPU sleep (nothing waits on the device);")
    print("# graph = CUDA-graph replay (kernel only). Targets: <= 10 µs (cuda), <= 20 µs (triton) per eager call.\n")
    rows = []
    print("| op | backend | eager API wall / host | torch.ops wall / host | _out wall / host | torch.ops _out wall / host | graph | target |")
    print("|---|---|---|---|---|---|---|---|")
    for op, variants, peer in cases(dev):
        for b in args.backends.split(","):
            row = {"op": op, "backend": b}
            cells = []
            for name in ("eager API", "torch.ops", "_out", "torch.ops _out"):
                r = _try(lambda: _per_call_us(variants[name](b), args.calls))
                row[name] = r
                cells.append("n/a" if r is None else f"{r[0]:.1f} / {r[1]:.1f}")
            gr = _try(lambda: graph_us(variants["eager API"](b)))
            row["graph"] = gr
            rows.append(row)
            print(f"| {op} | {b} | " + " | ".join(cells) + f" | {'n/a' if gr is None else f'{gr:.1f}'} | "
                  f"<= {TARGET_US.get(b, 0):.0f} |")
        if peer is not None:
            fn = _try(peer)
            r = None if fn is None else _try(lambda: _per_call_us(fn, args.calls))
            gr = None if fn is None else _try(lambda: graph_us(fn))
            rows.append({"op": op, "backend": "FlashMLA", "eager API": r, "graph": gr})
            cell = "n/a" if r is None else f"{r[0]:.1f} / {r[1]:.1f}"
            print(f"| {op} | FlashMLA (Python call) | {cell} | | | | {'n/a' if gr is None else f'{gr:.1f}'} | peer |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
