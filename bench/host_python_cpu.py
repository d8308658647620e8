"""The Python share of an eager call, measured on a CPU machine (no GPU): bench_dispatch.py's calls
on CPU tensors through the CUDA backend's own Python (sinkops.cuda.CudaBackend over the CPU
emulator's module, tests/cuda_emu.py) with the compiled entry points replaced by a Python no-op
and the CPU-only value checks off, so what is timed is exactly what runs on the GPU host minus
the pybind11 call, the launch and torch's allocator for CUDA. A proxy for bench_dispatch.py's
"host" column while no device is at hand: this CPU is ~2x slower than the H200 host in Python
(bench/NOTES.md, "Dispatch"), so compare versions here, not absolute numbers with the device's.

    python bench/host_python_cpu.py [--calls 20000]
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit

import torch

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "tests"), os.path.dirname(os.path.abspath(__file__))]


class _NoLaunch:
    """The emulator's module, with every `<op>_fwd` / `_bwd` entry point a no-op."""

    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name):
        if name.endswith(("_fwd", "_bwd")):
            return lambda *args: None
        return getattr(self._mod, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    import cuda_emu
    import sinkops
    from bench_dispatch import cases
    from sinkops import backends
    from sinkops.cuda import CudaBackend
    from sinkops.ops._common import PlanCache

    backends.register("cuda-nolaunch", CudaBackend(_NoLaunch(cuda_emu._module()), name="cuda-nolaunch",
                                                   device_type="cpu"))
    print(f"# Python µs per eager call on this CPU (launch stubbed), torch {torch.__version__}, "
          f"sinkops {sinkops.__version__}")
    print("| op | eager API | torch.ops | _out | torch.ops _out |\n|---|---|---|---|---|")
    for op, variants, _peer in cases(torch.device("cpu")):
        row = []
        for name in ("eager API", "torch.ops", "_out", "torch.ops _out"):
            fn = variants[name]("cuda-nolaunch")
            fn()
            for plans in PlanCache.ALL:  # the device path: no value checks of device index tensors
                for plan in plans.values():
                    plan.check_values = False
            n = args.calls
            row.append(min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6)
        print(f"| {op} | " + " | ".join(f"{t:.1f}" for t in row) + " |")


if __name__ == "__main__":
    main()
