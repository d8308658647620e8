"""Input validation at the op boundary: a ValueError / TypeError naming the argument, before any
launch. Called when a call signature is seen for the first time (ops/*.py cache the result), so
clarity beats speed here. Values of index tensors are checked by `cu_seqlens_values` /
`topk_length_values` only where that costs no device sync (CPU tensors) or when asked for
(checked mode, ops/_common.py)."""
from __future__ import annotations

import torch

LOWP = (torch.float16, torch.bfloat16)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INT32_MAX = 2**31 - 1


def _dtype_name(d):
    return str(d).replace("torch.", "")


def tensor(name, t, *, ndim=None, dtypes=None, device=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dims, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(_dtype_name(d) for d in dtypes)
        raise ValueError(f"{name}: dtype {_dtype_name(t.dtype)} not supported (expected {names})")
    if device is not None and t.device != device:
        raise ValueError(f"{name}: on {t.device}, expected {device} (same device as q)")
    return t


def shape(name, t, expected):
    exp = tuple(expected)
    if tuple(t.shape) != exp:
        raise ValueError(f"{name}: expected shape {exp}, got {tuple(t.shape)}")


def cu_seqlens(name, t, device):
    tensor(name, t, ndim=1, dtypes=(torch.int32,), device=device)
    if t.shape[0] < 1:
        raise ValueError(f"{name}: needs at least one entry (batch + 1), got shape {tuple(t.shape)}")


def non_negative_int(name, v, limit=INT32_MAX):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if not 0 <= v <= limit:
        raise ValueError(f"{name}: must be in [0, {limit}], got {v}")
    return v


def scale(name, s):
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise TypeError(f"{name}: expected a float, got {type(s).__name__}")
    return float(s)


def sinks(name, t, heads, device):
    if t is None:
        return
    tensor(name, t, ndim=1, dtypes=(torch.float32,), device=device)
    shape(name, t, (heads,))


def window_size(ws, causal):
    if not isinstance(ws, (tuple, list)) or len(ws) != 2 or not all(
            isinstance(w, int) and not isinstance(w, bool) for w in ws):
        raise TypeError(f"window_size: expected a pair of ints (left, right), got {ws!r}")
    left, right = ws
    if left < -1 or right < -1:
        raise ValueError(f"window_size: each side must be >= 0 or -1 (unbounded), got {ws!r}")
    if left > INT32_MAX or right > INT32_MAX:
        raise ValueError(f"window_size: each side must be < 2^31, got {ws!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    return left, (0 if causal else right)


def out_tensor(name, t, expected_shape, dtype, device):
    """A caller-given output buffer: exact shape and dtype, last dim contiguous."""
    if t is None:
        return
    tensor(name, t, dtypes=(dtype,), device=device)
    shape(name, t, expected_shape)
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name}: last dim must be contiguous (stride 1), got strides {t.stride()}")


def plain_tensors(**named):
    """Value checks read data: refuse tensor subclasses (FakeTensor under tracing) quietly."""
    return all(t is None or type(t) is torch.Tensor for t in named.values())


def cu_seqlens_values(name, cu, total, max_seqlen, max_name):
    """cu_seqlens must start at >= 0, be non-decreasing, end at <= total, and no segment may be
    longer than the max_seqlen the caller promised. One host sync for a device tensor."""
    c = cu.detach().to("cpu", torch.int64)
    if c.numel() > 1 and bool((c[1:] < c[:-1]).any()):
        raise ValueError(f"{name}: must be non-decreasing, got {c.tolist()[:16]}")
    if int(c[0]) < 0 or int(c[-1]) > total:
        raise ValueError(f"{name}: values must lie in [0, {total}] (the packed length), "
                         f"got first {int(c[0])}, last {int(c[-1])}")
    longest = int((c[1:] - c[:-1]).max()) if c.numel() > 1 else 0
    if longest > max_seqlen:
        raise ValueError(f"{max_name}: {max_seqlen} is smaller than the longest segment of {name} ({longest})")


def topk_length_values(name, t, topk):
    """topk_length entries must lie in [0, topk]. One host sync for a device tensor."""
    if t is None or t.numel() == 0:
        return
    c = t.detach().to("cpu", torch.int64)
    lo, hi = int(c.min()), int(c.max())
    if lo < 0 or hi > topk:
        raise ValueError(f"{name}: values must lie in [0, {topk}] (topk), got min {lo}, max {hi}")


def saved_and_grads(q, out, lse, dout, dlse):
    """A backward op's tensors besides the forward's inputs: the forward's out (3-D) and lse
    (2-D float32), dout shaped and typed like out, dlse like lse or None."""
    tensor("out", out, ndim=3)
    tensor("lse", lse, ndim=2, dtypes=(torch.float32,), device=q.device)
    tensor("dout", dout, ndim=3, dtypes=(q.dtype,), device=q.device)
    shape("dout", dout, out.shape)
    if dlse is not None:
        tensor("dlse", dlse, ndim=2, dtypes=(torch.float32,), device=q.device)
        shape("dlse", dlse, lse.shape)
