"""python -m sinkops.demo — why fused sinks matter, on the backends available here.

Runs a MiMo-V2.5-like vision window case (key-0 sink) and DeepSeek-V4-like sparse MLA prefill
and FP8 paged decode cases (null-logit attn_sink). For each backend it prints the error against
the float64 oracle, the error a stack makes when it silently drops the sink, and the time.
Full size on a GPU (the backend `auto` picks, plus the others); small on a CPU (the torch
backend, SYCL on the SYCL CPU device when built, Triton through its interpreter). It starts by
saying which compiled cores this install has (`python -m sinkops` prints the same).
"""
from __future__ import annotations

import argparse
import os
import time

import torch

if not torch.cuda.is_available():  # Triton decides at import time whether to interpret
    os.environ.setdefault("TRITON_INTERPRET", "1")

import sinkops  # noqa: E402
from sinkops import backends, reference  # noqa: E402


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _timed(fn, device):
    fn()  # warm-up (compilation, caches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    n = 20 if device.type == "cuda" else 1
    t0 = time.perf_counter()
    for _ in range(n):
        res = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return res, (time.perf_counter() - t0) / n * 1e6


def window_case(device, big):
    frames, per = (16, 1024) if big else (2, 96)
    hq, hk, d, w = 32, 8, 64, (64 if big else 16)
    tq = frames * per
    q, k, v = (torch.randn(tq, h, d, device=device, dtype=torch.bfloat16) for h in (hq, hk, hk))
    k[::per] *= 3  # as in the trained vision tower, each frame's first key draws attention
    cu = torch.arange(0, tq + 1, per, device=device, dtype=torch.int32)
    sinks = torch.empty(hq, device=device).uniform_(-0.10, 0.59)
    kw = dict(window_size=(w, w), sinks=sinks, sink_mode="key0")
    oracle, _ = reference.window_attention(q.double(), k.double(), v.double(), cu, **kw)

    def run(backend, with_sink=True):
        extra = kw if with_sink else dict(window_size=(w, w))
        return sinkops.window_attention(q, k, v, cu, None, per, backend=backend, **extra)

    name = f"window_attention MiMo-like {frames}x{per} tokens, 32/8 heads, d64, ±{w}, key0 sink"
    return name, "window_attention", run, oracle


def prefill_case(device, big):
    sq, skv, hq, topk = (1024, 32768, 64, 640) if big else (8, 256, 8, 32)
    q = torch.randn(sq, hq, 512, device=device, dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, 512, device=device, dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device=device, dtype=torch.int32)
    sink = torch.empty(hq, device=device).uniform_(-2.2, 2.5)
    scale = 512 ** -0.5
    oracle = reference.sparse_mla_prefill(q.double(), kv.double(), idx, scale, attn_sink=sink)[0]

    def run(backend, with_sink=True):
        return sinkops.sparse_mla_prefill(q, kv, idx, scale, attn_sink=sink if with_sink else None,
                                          backend=backend)[0]

    return f"sparse_mla_prefill V4-like {sq} queries x {skv} keys, {hq} heads, topk {topk}", "sparse_mla_prefill", run, oracle


def decode_case(device, big):
    b, hq, topk, ntok = (64, 64, 640, 65536) if big else (2, 8, 32, 512)
    cache = sinkops.pack_kv_cache(torch.randn(ntok, 512, device=device, dtype=torch.bfloat16),
                                  "v4", block_size=64)
    q = torch.randn(b, 1, hq, 512, device=device, dtype=torch.bfloat16)
    idx = torch.randint(0, ntok, (b, 1, topk), device=device, dtype=torch.int32)
    sink = torch.empty(hq, device=device).uniform_(-2.2, 2.5)
    scale = 512 ** -0.5
    oracle = reference.sparse_mla_decode(q.double(), cache, idx, scale, attn_sink=sink, layout="v4")[0]

    def run(backend, with_sink=True):
        return sinkops.sparse_mla_decode(q, cache, idx, scale, attn_sink=sink if with_sink else None,
                                         layout="v4", backend=backend)[0]

    return f"sparse_mla_decode V4 FP8 paged cache, batch {b}, {hq} heads, topk {topk}", "sparse_mla_decode", run, oracle


def training_case(device, big):
    """One backward step of the MiMo-like window case: the gradients of q, k, v and the key-0 sinks
    through the `auto` backend against the float64 oracle's backward."""
    frames, per, w = (4, 1024, 64) if big else (2, 48, 8)
    hq, hk, d = (32, 8, 64) if big else (8, 2, 32)
    t = frames * per
    q, k, v = (torch.randn(t, h, d, device=device, dtype=torch.bfloat16) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, per, device=device, dtype=torch.int32)
    sinks = torch.empty(hq, device=device).uniform_(-0.10, 0.59)
    g = torch.randn(t, hq, d, device=device, dtype=torch.bfloat16)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    out = sinkops.window_attention(*leaves[:3], cu, None, per, window_size=(w, w), sinks=leaves[3])
    grads = torch.autograd.grad(out, leaves, g)
    want = reference.window_attention_backward(g.double(), q.double(), k.double(), v.double(), cu,
                                               window_size=(w, w), sinks=sinks, sink_mode="key0")
    errs = ", ".join(f"{n} {_rel(a, b):.1e}" for n, a, b in zip(("dq", "dk", "dv", "dsinks"), grads, want))
    print(f"\ntraining: window_attention backward ({frames}x{per} tokens, {hq}/{hk} heads, key0 sink; "
          f"auto's backward is {backends.auto_choice(device, 'window_attention_backward')}): {errs}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small shapes even on a GPU")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    big = device.type == "cuda" and not args.small
    from sinkops.build_info import main as print_build_info

    print_build_info()
    usable = [b for b in ("cuda", "triton", "sycl", "torch") if not backends.why_unavailable(b, device)]
    print(f"\ndevice: {device}; backends here: {', '.join(usable)}")
    print(f"{'backend':<10} {'err fused':>10} {'err sink dropped':>17} {'time':>12}")
    for case in (window_case, prefill_case, decode_case):
        name, op, run, oracle = case(device, big)
        print(f"\n{name}   (auto picks {backends.auto_choice(device, op)})")
        for backend in usable:
            try:
                out, us = _timed(lambda: run(backend), device)
                dropped = run(backend, with_sink=False)
            except Exception as e:  # a backend missing a kernel still lets the demo go on
                print(f"{backend:<10} failed: {type(e).__name__}: {str(e)[:80]}")
                continue
            print(f"{backend:<10} {_rel(out, oracle):>10.2e} {_rel(dropped, oracle):>17.2e} {us:>10.0f}µs")
    training_case(device, big)
    print("\nerr = relative L2 error vs the float64 oracle; 'sink dropped' is what a serving stack that "
          "silently ignores the sink returns. CPU times are interpreter / CPU-device times, not GPU speed.")


if __name__ == "__main__":
    main()
