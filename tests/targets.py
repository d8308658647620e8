"""The backends the op suites run on, where their tensors live, and how large a case each takes.

Every test of tests/test_window_attention.py, test_sparse_mla_prefill.py and
test_sparse_mla_decode.py runs once per target that can take it:

  cuda       sinkops._C on the GPU                         marked gpu (the H200 runs these)
  triton     the Triton kernels on the GPU                 marked gpu
  torch-gpu  the vectorized PyTorch backend on the GPU     marked gpu
  cuda-emu   the CUDA kernels' own C++ on the CPU emulator (tools/cuda_emu)   in CI
  triton-interp  the Triton kernels in Triton's CPU interpreter               in CI (no GPU)
  sycl       the SYCL kernels on Intel's OpenCL CPU device                    in CI
  torch      the vectorized PyTorch backend on the CPU                        in CI

A case says how big it is ("tiny" < "small" < "large"); a target takes cases up to its own
limit (the interpreter runs numpy per tile op, the emulator one CTA at a time) and the dtypes and
head dims its kernels have. Filtering happens at collection, so nothing is silently skipped: a
combination that cannot run is simply not generated.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch

from sinkops import backends

_SIZES = {"tiny": 0, "small": 1, "large": 2}
GPU = torch.cuda.is_available()
ALL_FLOATS = (torch.bfloat16, torch.float16, torch.float32, torch.float64)


@dataclass(frozen=True)
class Target:
    name: str
    backend: str
    device: str
    max_size: str
    marks: tuple = ()
    window_dtypes: tuple = ALL_FLOATS
    mla_dtypes: tuple = (torch.bfloat16,)
    max_head_dim: int = 256
    # the emulator models a 16-SM device: decode batches are scaled down to keep its split plans
    batch_divisor: int = 1
    backward: tuple = ()  # the backward ops its backend has: "window" (attention), "mla" (sparse prefill)

    def takes(self, size="tiny", dtype=torch.bfloat16, op="window", head_dim=64) -> bool:
        dtypes = self.window_dtypes if op == "window" else self.mla_dtypes
        return _SIZES[size] <= _SIZES[self.max_size] and dtype in dtypes and head_dim <= self.max_head_dim

    def __str__(self):
        return self.name


_GPU_MARK = (pytest.mark.gpu,)
_LOWP = (torch.bfloat16, torch.float16)

_ALL = [
    # the CUDA backwards are Hopper's (sm_90a): a `gpu` run on another GPU fails their tests
    Target("cuda", "cuda", "cuda", "large", _GPU_MARK, window_dtypes=_LOWP, backward=("window", "mla")),
    Target("triton", "triton", "cuda", "large", _GPU_MARK, window_dtypes=_LOWP + (torch.float32,),
           backward=("window", "mla")),
    Target("torch-gpu", "torch", "cuda", "small", _GPU_MARK, backward=("window", "mla")),
    Target("cuda-emu", "cuda-emu", "cpu", "small", window_dtypes=_LOWP, batch_divisor=8),
    Target("triton-interp", "triton", "cpu", "tiny", window_dtypes=_LOWP + (torch.float32,),
           backward=("window", "mla")),
    Target("sycl", "sycl", "cpu", "small", window_dtypes=_LOWP + (torch.float32,)),
    Target("torch", "torch", "cpu", "small", backward=("window", "mla")),
]


def _collected(t: Target) -> bool:
    """GPU targets are always collected (marked gpu: CI skips them, the device runs them); CPU
    targets when their backend can run here."""
    if t.device == "cuda":
        return True
    if t.name == "triton-interp":
        return not GPU and os.environ.get("TRITON_INTERPRET") == "1"
    if t.name == "cuda-emu":
        return True  # needs pybind11 and g++ only; a build failure must fail the tests
    return not backends.why_unavailable(t.backend, torch.device("cpu"))


TARGETS = [t for t in _ALL if _collected(t)]
WINDOW_BACKWARD_TARGETS = [t for t in TARGETS if "window" in t.backward]
MLA_BACKWARD_TARGETS = [t for t in TARGETS if "mla" in t.backward]


def cuda_window_backward_takes(hq, hk, d, dv, dtype) -> bool:
    """The calls the CUDA (sm_90a) window backward runs (sinkops/cuda: supports()); auto gives the
    rest to Triton."""
    group = hq // hk
    return (dtype in _LOWP and max(d, dv) <= 128 and d % 8 == 0 and dv % 8 == 0
            and group & (group - 1) == 0)
BY_NAME = {t.name: t for t in _ALL}


def params(targets=None, cases=None, *, op="window", case_id=None, accept=None):
    """pytest params (target,) or (target, case) for every target that takes the case. A case is
    a dict with optional keys size, dtype, head_dim (what Target.takes() looks at); accept(target,
    case), when given, filters further."""
    targets = TARGETS if targets is None else targets
    out = []
    for t in targets:
        if cases is None:
            if t.takes(op=op, dtype=t.mla_dtypes[0] if op != "window" else torch.bfloat16):
                out.append(pytest.param(t, id=t.name, marks=t.marks))
            continue
        for i, c in enumerate(cases):
            if (t.takes(c.get("size", "tiny"), c.get("dtype", torch.bfloat16), op, c.get("head_dim", 64))
                    and (accept is None or accept(t, c))):
                cid = case_id(c) if case_id else str(i)
                out.append(pytest.param(t, c, id=f"{t.name}-{cid}", marks=t.marks))
    return out
