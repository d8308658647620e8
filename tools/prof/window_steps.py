"""Times the sm_90a window kernel per forced SINKOPS_WA90_STEPS (steps per CTA) on MiMo shapes
(tuning aid, bench/NOTES.md "Window attention, sm90"):  python3 tools/prof/window_steps.py"""
import os
import sys

import triton.testing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_window_attention import make_inputs, ours  # noqa: E402

CASES = [("image 1x4096", 1, 4096, 32, 8, 64), ("video 16x1024", 16, 1024, 32, 8, 64),
         ("2x2048 d80 16/16", 2, 2048, 16, 16, 80), ("16x1024 d80", 16, 1024, 32, 8, 80),
         ("16x1024 d128", 16, 1024, 32, 8, 128)]
for name, nseg, L, hq, hk, d in CASES:
    q, k, v, cu, sinks = make_inputs(nseg, L, hq, hk, d)
    row = []
    for steps in ("", "1", "2", "4", "6", "11", "22", "43"):
        if steps:
            os.environ["SINKOPS_WA90_STEPS"] = steps
        else:
            os.environ.pop("SINKOPS_WA90_STEPS", None)
        f = ours("cuda", q, k, v, cu, L, (64, 64), sinks["key0"], "key0")
        us = triton.testing.do_bench(f, warmup=20, rep=100, return_mode="median") * 1e3
        row.append(f"{steps or 'auto'}: {us:.1f}")
    os.environ.pop("SINKOPS_WA90_STEPS", None)
    print(f"{name:18s} " + "  ".join(row), flush=True)
