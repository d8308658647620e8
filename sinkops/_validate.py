"""Input validation at the API boundary: a ValueError/TypeError naming the argument, before
any launch. Checks look at shapes, dtypes, devices and strides only; values of index tensors
are checked only where that costs no device sync (CPU tensors, outside torch.compile)."""
from __future__ import annotations

import torch

LOWP = (torch.float16, torch.bfloat16)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def tensor(name, t, *, ndim=None, dtypes=None, device=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dims, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(f"{name}: dtype {str(t.dtype).replace('torch.', '')} not supported (expected {names})")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: on {t.device}, expected {device} (same device as q)")
    return t


def optional_tensor(name, t, **kw):
    return None if t is None else tensor(name, t, **kw)


def shape(name, t, expected):
    exp = tuple(expected)
    if tuple(t.shape) != exp:
        raise ValueError(f"{name}: expected shape {exp}, got {tuple(t.shape)}")


def last_dim_contiguous(t):
    """Kernels need unit stride in the last dim; other strides are passed through."""
    if t is None or t.numel() == 0:
        return t if t is None else t.contiguous()
    return t if t.stride(-1) == 1 else t.contiguous()


def _values_checkable(t):
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def cu_seqlens(name, t, total, device):
    tensor(name, t, ndim=1, dtypes=(torch.int32,), device=device)
    if t.shape[0] < 1:
        raise ValueError(f"{name}: needs at least one entry (batch + 1), got shape {tuple(t.shape)}")
    if _values_checkable(t):
        if t.shape[0] > 1 and bool((t[1:] < t[:-1]).any()):
            raise ValueError(f"{name}: must be non-decreasing, got {t.tolist()[:16]}")
        if int(t[0]) < 0 or int(t[-1]) > total:
            raise ValueError(f"{name}: values must lie in [0, {total}] (the packed length), "
                             f"got first {int(t[0])}, last {int(t[-1])}")
    return t.contiguous()


def non_negative_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if v < 0:
        raise ValueError(f"{name}: must be >= 0, got {v}")
    return v


def sinks(name, t, heads, device):
    if t is None:
        return None
    tensor(name, t, ndim=1, dtypes=(torch.float32,), device=device)
    shape(name, t, (heads,))
    return t.contiguous()


def window_size(ws, causal):
    if not isinstance(ws, (tuple, list)) or len(ws) != 2 or not all(
            isinstance(w, int) and not isinstance(w, bool) for w in ws):
        raise TypeError(f"window_size: expected a pair of ints (left, right), got {ws!r}")
    left, right = ws
    if left < -1 or right < -1:
        raise ValueError(f"window_size: each side must be >= 0 or -1 (unbounded), got {ws!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    if causal:
        right = 0
    return left, right


def out_tensor(name, t, expected_shape, dtype, device):
    if t is None:
        return None
    tensor(name, t, dtypes=(dtype,), device=device)
    shape(name, t, expected_shape)
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name}: last dim must be contiguous (stride 1), got strides {t.stride()}")
    return t
