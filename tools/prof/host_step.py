"""Host cost of a training step's parts on the GPU (µs of CPU time per call, each issued behind a
GPU sleep so that no call waits on the device): where a small step's time goes when it is
host-bound (bench/NOTES.md, "Backward").

    python tools/prof/host_step.py [--profile]
"""
from __future__ import annotations

import os
import sys
import time

import torch

import sinkops
from sinkops.ops import window_backward


def host_us(fn, n=20, sleep_cycles=200_000_000):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        torch.cuda._sleep(sleep_cycles)  # the GPU is busy for ~100 ms: calls below only queue
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    dev, bf16 = "cuda", torch.bfloat16
    t, hq, hk, d, seqlen = 4096, 32, 8, 64, 4096
    q, k, v = (torch.randn(t, h, d, device=dev, dtype=bf16) for h in (hq, hk, hk))
    cu = torch.tensor([0, t], device=dev, dtype=torch.int32)
    sinks = torch.rand(hq, device=dev)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    g = torch.randn(t, hq, d, device=dev, dtype=bf16)

    def fwd(*xs, backend="triton"):
        return sinkops.window_attention(*xs[:3], cu, cu, seqlen, seqlen, window_size=(64, 64), sinks=xs[3],
                                        return_lse=True, backend=backend)

    out, lse = fwd(*leaves)
    o_d, lse_d = fwd(q, k, v, sinks)
    x = torch.randn(1024, device=dev, requires_grad=True)
    y = (x * 2).sum()
    rows = [
        ("forward, no grad (triton)", lambda: fwd(q, k, v, sinks)),
        ("forward, no grad (auto)", lambda: fwd(q, k, v, sinks, backend="auto")),
        ("forward with grad (autograd.Function)", lambda: fwd(*leaves)),
        ("backward op via torch.ops", lambda: torch.ops.sinkops.window_attention_backward(
            g, None, q, k, v, o_d, lse_d, cu, cu, seqlen, seqlen, 64, 64, d ** -0.5, sinks, "key0", False, "triton")),
        ("backward op run() direct", lambda: window_backward.run(
            g, None, q, k, v, o_d, lse_d, cu, cu, seqlen, seqlen, 64, 64, d ** -0.5, sinks, "key0", False, "triton")),
        ("torch.autograd.grad of our forward", lambda: torch.autograd.grad(out, leaves, g, retain_graph=True)),
        ("torch.autograd.grad of (x * 2).sum() (engine floor)", lambda: torch.autograd.grad(y, [x], retain_graph=True)),
        ("3 x torch.zeros_like (dq, dk, dv)", lambda: (torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v))),
        ("torch.empty (one small tensor)", lambda: torch.empty(32, 4096, device=dev)),
    ]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: host µs per call (best of 3 x 20)")
    for name, fn in rows:
        print(f"{name:55s} {host_us(fn):8.1f}")
    if "--profile" in sys.argv:  # where the backward op's host time goes
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
        from profile_dispatch import cprofile_host

        cprofile_host(rows[4][1], 50, 25, 400_000_000)


if __name__ == "__main__":
    main()
