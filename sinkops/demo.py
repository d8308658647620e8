"""python -m sinkops.demo — why fused sinks matter, on the best backend available here.

Runs a MiMo-V2.5-like vision window case (key-0 sink) and a DeepSeek-V4-like sparse MLA prefill
and FP8 decode case (null-logit attn_sink), prints the error against the float64 oracle, the
error a stack makes when it silently drops the sink, and the time. Full size on a GPU; small
on a CPU (reference backend).
"""
from __future__ import annotations

import argparse
import time

import torch

import sinkops
from sinkops import reference


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _timed(fn, device):
    fn()  # warm-up (compilation, caches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 10 if device.type == "cuda" else 1
    for _ in range(n):
        res = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return res, (time.perf_counter() - t0) / n * 1e6


def _oracle_device(t):
    # float64 oracle on the CPU keeps it exact; on a GPU, float64 on device is fast enough.
    return t.double()


def window_case(device, big):
    frames, per = (16, 1024) if big else (2, 96)
    hq, hk, d, w = 32, 8, 64, (64 if big else 16)
    tq = frames * per
    q = torch.randn(tq, hq, d, device=device, dtype=torch.bfloat16)
    k = torch.randn(tq, hk, d, device=device, dtype=torch.bfloat16)
    v = torch.randn(tq, hk, d, device=device, dtype=torch.bfloat16)
    # Trained MiMo vision tower: the first key of each frame soaks up attention mass.
    k[::per] *= 3
    cu = torch.arange(0, tq + 1, per, device=device, dtype=torch.int32)
    sinks = torch.empty(hq, device=device).uniform_(-0.10, 0.59)
    kw = dict(window_size=(w, w), sinks=sinks, sink_mode="key0")
    ours, us = _timed(lambda: sinkops.window_attention(q, k, v, cu, None, per, **kw), device)
    dropped = sinkops.window_attention(q, k, v, cu, None, per, window_size=(w, w))
    oracle, _ = reference.window_attention(*(_oracle_device(t) for t in (q, k, v)), cu, **kw)
    return (f"window_attention  MiMo-like {frames}x{per} tok, 32/8 heads, d64, window ±{w}, key0 sink",
            _rel(ours, oracle), _rel(dropped, oracle), us)


def prefill_case(device, big):
    sq, skv, hq, topk = (1024, 32768, 64, 640) if big else (16, 512, 8, 64)
    q = torch.randn(sq, hq, 512, device=device, dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, 512, device=device, dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device=device, dtype=torch.int32)
    sink = torch.empty(hq, device=device).uniform_(-2.2, 2.5)
    scale = 512 ** -0.5
    (ours, _, _), us = _timed(lambda: sinkops.sparse_mla_prefill(q, kv, idx, scale, attn_sink=sink), device)
    dropped = sinkops.sparse_mla_prefill(q, kv, idx, scale)[0]
    oracle = reference.sparse_mla_prefill(q.double(), kv.double(), idx, scale, attn_sink=sink)[0]
    return (f"sparse_mla_prefill V4-like {sq} queries x {skv} keys, {hq} heads, topk {topk}, attn_sink",
            _rel(ours, oracle), _rel(dropped, oracle), us)


def decode_case(device, big):
    b, hq, topk, ntok = (64, 64, 640, 65536) if big else (2, 8, 64, 1024)
    latent = torch.randn(ntok, 512, device=device, dtype=torch.bfloat16)
    cache = sinkops.pack_kv_cache(latent, "v4", block_size=64)
    q = torch.randn(b, 1, hq, 512, device=device, dtype=torch.bfloat16)
    idx = torch.randint(0, ntok, (b, 1, topk), device=device, dtype=torch.int32)
    sink = torch.empty(hq, device=device).uniform_(-2.2, 2.5)
    scale = 512 ** -0.5
    (ours, _), us = _timed(lambda: sinkops.sparse_mla_decode(q, cache, idx, scale, attn_sink=sink,
                                                             layout="v4"), device)
    dropped = sinkops.sparse_mla_decode(q, cache, idx, scale, layout="v4")[0]
    oracle = reference.sparse_mla_decode(q.double(), cache, idx, scale, attn_sink=sink, layout="v4")[0]
    return (f"sparse_mla_decode V4 FP8 cache, batch {b}, {hq} heads, topk {topk}, attn_sink",
            _rel(ours, oracle), _rel(dropped, oracle), us)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small shapes even on a GPU")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    big = device.type == "cuda" and not args.small
    from sinkops import backends
    print(f"device: {device}; backends picked by 'auto': "
          f"{backends.resolve('auto', device, cuda_ok=True)} (bf16)")
    print(f"{'case':<88} {'err fused':>10} {'err sink dropped':>17} {'time':>12}")
    for case in (window_case, prefill_case, decode_case):
        name, err, err_dropped, us = case(device, big)
        print(f"{name:<88} {err:>10.2e} {err_dropped:>17.2e} {us:>10.0f}µs")
    print("err = relative L2 error vs the float64 oracle; 'sink dropped' is what a stack that "
          "silently ignores the sink returns.")


if __name__ == "__main__":
    main()
