"""Launching a Triton kernel for one call signature without Triton's per-call argument binding.

`kernel[grid](*args)` re-binds and re-specializes every argument on every call (~10 µs for our
kernels' ~30 arguments). KernelLauncher keeps the CompiledKernel that the first launch with every
pointer 16-byte aligned returned, and later such launches call its launcher directly. That is sound
because nothing else Triton specializes on changes within one signature: the kernels annotate
their per-call ints (token counts, chunk sizes) as i64 and list them in do_not_specialize,
floats are never specialized, every other int is fixed by the signature, and a launch with any
pointer off 16-byte alignment takes the ordinary path (Triton then specializes it itself). The CPU interpreter, launch hooks (profilers) and a device
other than the current one take the ordinary path.
"""
from __future__ import annotations

import torch

try:
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton: no direct path
    _knobs = None


def _no_hook(hook) -> bool:
    # Triton 3.6 keeps the launch hooks as HookChains (empty unless a profiler added one).
    return hook is None or not getattr(hook, "calls", True)


def interpreted(kernel) -> bool:
    # triton.jit picks the CPU interpreter when the module is imported (TRITON_INTERPRET=1 then).
    return type(kernel).__name__ == "InterpretedFunction"


class KernelLauncher:
    def __init__(self, kernel, n_pointers: int, constexprs: dict, num_warps: int, num_stages: int):
        """kernel's first n_pointers parameters are tensors (pointers), its last ones are exactly
        `constexprs` (in that order); every launch passes the parameters in between."""
        self.kernel, self.n_pointers = kernel, n_pointers
        self.options = dict(constexprs, num_warps=num_warps, num_stages=num_stages)
        self.direct = _knobs is not None and not interpreted(kernel)
        if self.direct:
            names = list(kernel.arg_names)
            last = names[len(names) - len(constexprs):]
            if set(last) != set(constexprs):
                raise RuntimeError(f"{kernel.__name__}: its last parameters must be the constexprs {sorted(constexprs)}")
            self.tail = tuple(constexprs[n] for n in last)
        self.aligned = None  # the CompiledKernel for calls whose pointers are all 16-byte aligned

    def __call__(self, grid, args: tuple, device: torch.device) -> None:
        if self.direct:
            runtime = _knobs.runtime
            if _no_hook(runtime.launch_enter_hook) and _no_hook(runtime.launch_exit_hook):
                ptrs = [t.data_ptr() for t in args[:self.n_pointers]]
                every = 0
                for p in ptrs:
                    every |= p
                # The pattern: all pointers 16-byte aligned (the common case) or not; the second
                # (rare) keeps Triton's own per-call specialization.
                ck = self.aligned if every % 16 == 0 else None
                dev = device.index
                if ck is not None and torch._C._cuda_getDevice() == dev:
                    ck.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
                           torch._C._cuda_getCurrentRawStream(dev), ck.function, ck.packed_metadata, None, None,
                           None, *ptrs, *args[self.n_pointers:], *self.tail)
                    return
                with torch.cuda.device(dev):
                    ck = self.kernel[grid](*args, **self.options)
                if every % 16 == 0 and ck is not None and hasattr(ck, "function"):
                    self.aligned = ck
                return
        if device.type == "cuda":
            with torch.cuda.device(device):
                self.kernel[grid](*args, **self.options)
        else:
            self.kernel[grid](*args, **self.options)


def cdiv(a: int, b: int) -> int:
    """Host-side ceil division (triton.cdiv is a constexpr function: slow to call from Python)."""
    return -(-a // b)
