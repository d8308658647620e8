"""The CUDA backend: our hand-written kernels (csrc/cuda/), compiled into ``sinkops._C`` by
``pip install .`` when nvcc is found.

CudaBackend is written against a compiled module rather than importing one, so the same Python
runs the GPU build (``sinkops._C`` on CUDA tensors) and, in tests, the CPU emulator of the same
kernel C++ (tools/cuda_emu, on CPU tensors). Per call signature it keeps the params struct's
STATIC fields in a template (sinkops/_native.py); per launch it passes the CALL fields, the
current stream and the device index, and the C++ side makes that device current.
"""
from __future__ import annotations

import torch

from sinkops import _native, backends

try:  # the compiled module is optional: the package works without it (Triton / torch backends)
    from sinkops import _C
except ImportError as e:  # pragma: no cover - depends on the build
    _C = None
    _IMPORT_ERROR = str(e)
else:
    _IMPORT_ERROR = ""

_LOWP = (torch.bfloat16, torch.float16)


class CudaBackend:
    # The backwards have Hopper kernels only: where they cannot run the call, supports() says why,
    # and a CUDA forward's backward goes to auto's choice (partial_backward; docs/DECISIONS.md).
    ops = backends.FORWARD_OPS | {"window_attention_backward", "sparse_mla_prefill_backward"}
    partial_backward = True

    def __init__(self, module, name="cuda", device_type="cuda", import_error=""):
        self.name, self.mod, self.device_type = name, module, device_type
        self._import_error = import_error
        if module is not None:
            _native.check_all_call_fields(module)
        if device_type == "cuda":  # the raw stream that torch.cuda.current_stream() wraps, without the wrapper
            self._stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
                lambda device: torch.cuda.current_stream(device).cuda_stream)
        else:
            self._stream = lambda device: 0  # the emulator runs synchronously on the host

    def why_unavailable(self, device) -> str:
        if self.mod is None:
            return ("the CUDA extension sinkops._C is not built (reinstall with nvcc on PATH; "
                    f"import error: {self._import_error})")
        if device.type != self.device_type:
            return f"the {self.name} backend takes {self.device_type} tensors, got {device}"
        if self.device_type == "cuda" and not torch.cuda.is_available():
            return "torch sees no CUDA device"
        return ""

    def _device(self, t) -> int:
        return t.device.index if self.device_type == "cuda" else -1

    def supports(self, a) -> str:
        dtypes = _LOWP if a.op.startswith("window_attention") else (torch.bfloat16,)
        if a.q.dtype not in dtypes:
            return f"q: dtype {str(a.q.dtype)[6:]} has no CUDA kernel ({', '.join(str(d)[6:] for d in dtypes)})"
        # The launcher's own checks (head dim, shared memory of this GPU), asked without launching.
        return getattr(self.mod, a.op + "_unsupported")(_native.template_for(self.mod, a), self._device(a.q))

    def prefers(self, a) -> bool:
        """Whether `auto` should take this backend before the ones listed ahead of it: the sm_90a
        kernels (on a Hopper GPU: window attention at d <= 128, sparse prefill at every head count
        (above 32 heads the 64-head kernel, else the few-heads one), the window backward and the
        sparse backward wherever they run) are faster than the Triton
        ones there (bench/NOTES.md); the mma.sync kernels are not."""
        if self.device_type != "cuda" or a.op not in self.ops or self.supports(a):
            return False
        if a.op == "window_attention_backward":
            # since v5 its sm_90a kernels beat Triton's on every window measured: MiMo video 404 vs
            # 568 µs, d 80 143 vs 230, full d 128 2910 vs 3027, causal d 128 1974 vs 2755, full d 64
            # 1387 vs 1900 (bench/NOTES.md "Window backward v5"; v4 lost full d 128, 3700 vs 3018)
            return True
        if a.op == "sparse_mla_prefill_backward":
            # dkv v4 (session 35, H100, same run): 1.27x Triton's on V4-Pro (13692 vs 17351 µs),
            # 1.45x on V3.2, 1.12x at 64 heads (V4-Flash, 5799 vs 6498) and at 8 heads (TP-8, 3736
            # vs 4192); deterministic 1.08-1.35x; v4.1 another -4..-6 % on dkv (bench/NOTES.md "Sparse
            # backward, dkv v4")
            return True
        path = getattr(self.mod, a.op + "_path", None)
        if path is None:
            return False
        # window attention: every shape it takes, since v9 also full attention at d 64 (16x1024,
        # key0 / null / no sink: 428 / 435 / 434 µs vs Triton's 494 / - / 459, v10 394 µs key0;
        # bench/NOTES.md "Window v9", "v10"); sparse prefill above 32 heads, and at <= 32 heads
        # the few-heads kernel (2026-12-07, H100: 1.36-1.63x Triton's at 8, 16 and 32 heads;
        # bench/NOTES.md "Sparse prefill at few heads"); the C++ path decides which
        return path(_native.template_for(self.mod, a), self._device(a.q)) in ("sm90", "sm90-few-heads")

    def prepare(self, a):
        dev, stream = self._device(a.q), self._stream
        plan = lambda tmpl, batch: self.mod.sparse_mla_decode_plan(tmpl, batch, dev)  # noqa: E731
        return _native.launcher(self.mod, a, lambda: (stream(dev), dev), decode_plan=plan)


backend = CudaBackend(_C, import_error=_IMPORT_ERROR)
