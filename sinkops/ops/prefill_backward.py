"""sparse_mla_prefill's backward (docs/DESIGN.md §6): the args every backend receives, the op
sinkops::sparse_mla_prefill_backward and the autograd formula of sinkops::sparse_mla_prefill.

Saved state: the forward's (out, lse). max_logits has no gradient (a statistic, as in FlashMLA).
dkv sums the gradient of every (query, index position) that read a row, duplicates included;
with deterministic=True (torch.use_deterministic_algorithms) the sum is taken in a fixed order.
"""
from __future__ import annotations

import os

import torch

from sinkops import _validate as V
from sinkops.ops import prefill
from sinkops.ops._common import PlanCache, backward_backend, dispatch, register_autograd, register_functional_op


class SparseMlaPrefillBackwardArgs(prefill.SparseMlaPrefillArgs):
    """The forward call's args (q, kv, indices, topk_length, attn_sink, out, lse; max_logits is
    None) plus dout [Sq, Hq, d_v] bf16, dlse [Sq, Hq] float32 or None, the gradients to write:
    dq [Sq, Hq, Dqk] and dkv [Skv, 1, Dqk] (bf16, allocated, unwritten), d_attn_sink float32 [Hq]
    (or None without a sink), and deterministic (a fixed summation order for dkv)."""

    op = "sparse_mla_prefill_backward"
    __slots__ = ("dout", "dlse", "dq", "dkv", "d_attn_sink", "deterministic")


def _env_int(name: str, default: int) -> int:
    """A tuning variable's integer (its default when unset or not a number)."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


# The backends' kernels stage P and dX (bf16, Hq x topk entries a query each) for at most this many bytes
# of queries at a time (their dq and dkv kernels alternate per chunk); the deterministic mode's
# per-(query, position) key gradients likewise.
STAGE_BYTES = _env_int("SINKOPS_BWD_STAGE_MB", 256) << 20  # (the variable: tuning runs only)
STAGE_DET_BYTES = 1 << 30


# The GPU backends read each query's indices in increasing order (sorted_indices) and run their dkv
# kernels' CTAs in groups of queries (dkv_query_group), a position block of every query in the group
# before the next block (odd groups backwards): CTAs that run together then add into one key range of
# the float32 sum, which stays in L2 (bench/NOTES.md "Sparse backward, dkv v3"). The environment
# variables are for tuning runs only.
SORT_INDICES = os.environ.get("SINKOPS_BWD_SORT_INDICES", "1").lower() not in ("0", "false", "no", "off")
DKV_QUERY_GROUP = _env_int("SINKOPS_BWD_DKV_QUERY_GROUP", 0)  # > 0: this group, whatever the shape
DKV_GROUP_BYTES = 16 << 20


def dkv_query_group(hq: int, dqk: int, dv: int) -> int:
    """Queries per group of the dkv kernels' CTAs: as many as have 16 MiB of q and dO (bf16) between
    them, which L2 keeps beside the group's key range of the float32 sum. Measured on an H100 (op µs,
    the best group in bold): V4-Pro (128 heads, 262 KB a query) G 32 / 48 / **64** / 96 / 128 = 8303 /
    7900 / **7703** / 8433 / 9467 µs of dkv kernel; V4-Flash (64 heads) 64 / 96 / **128** / 256 = 4314
    / 3933 / **3806** / 4170; V4-Flash TP-8 (8 heads) 64 / 256 / **1024**."""
    if DKV_QUERY_GROUP > 0:
        return DKV_QUERY_GROUP
    return max(1, DKV_GROUP_BYTES // max(1, hq * (dqk + dv) * 2))


def sorted_indices(indices, topk_length, skv: int):
    """indices [Sq, 1, topk] int32 -> a contiguous copy with each query's valid indices in increasing
    order, every invalid entry (negative, >= skv, or at a position >= topk_length) replaced by 2^31 - 1
    (invalid to every kernel) and so sorted after them. The gradients do not depend on the order of a
    query's positions (up to float rounding); the dkv kernels' memory locality does."""
    invalid = (indices < 0) | (indices >= skv)
    if topk_length is not None:
        invalid |= torch.arange(indices.shape[-1], device=indices.device) >= topk_length.view(-1, 1, 1)
    return torch.where(invalid, torch.iinfo(torch.int32).max, indices).sort(dim=-1).values


def chunk_rows(sq: int, hq: int, topk: int, dqk: int, deterministic: bool) -> int:
    """Queries per chunk: P and dX staged in bf16 (and the deterministic key gradients in float32)
    fit their budgets; at most 65535 (the CUDA entry point's bound)."""
    chunk = STAGE_BYTES // max(1, topk * hq * 4)
    if deterministic:
        chunk = min(chunk, STAGE_DET_BYTES // max(1, topk * dqk * 4))
    return max(1, min(chunk, 65535, sq))


def sum_staged_key_gradients(dkv_acc, det, a, s0: int, n: int, positions) -> None:
    """Deterministic mode: adds the staged key gradients of queries [s0, s0 + n) (det: float32
    [n, topk, Dqk], zeros for invalid positions) into dkv_acc [Skv + 1, Dqk] in a fixed order
    (torch's sorted index_put_ with accumulate; invalid positions go to row Skv)."""
    skv, topk = a.kv.shape[0], a.indices.shape[-1]
    idx = a.indices[s0:s0 + n, 0, :]
    ok = (idx >= 0) & (idx < skv)
    if a.topk_length is not None:
        ok &= positions[None, :] < a.topk_length[s0:s0 + n, None].clamp(0, topk)
    target = torch.where(ok, idx.to(torch.int64), skv).reshape(-1)
    dkv_acc.index_put_((target,), det[:n].reshape(-1, dkv_acc.shape[1]), accumulate=True)


class _Plan:
    __slots__ = ("fwd", "launch", "backend")


_PLANS = PlanCache()


def _plan(dout, dlse, q, kv, indices, out, lse, sm_scale, d_v, attn_sink, topk_length, backend):
    p = _Plan()
    p.fwd = prefill._plan(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, None, lse, backend)
    V.saved_and_grads(q, out, lse, dout, dlse)
    return p


def _args(p, dout, dlse, q, kv, indices, out, lse, attn_sink, topk_length, deterministic):
    fp = p.fwd
    sq = q.shape[0]
    for name, t, shape in (("indices", indices, (sq, 1, fp.topk)), ("out", out, (sq, fp.hq, fp.dv)),
                           ("dout", dout, (sq, fp.hq, fp.dv)), ("lse", lse, (sq, fp.hq)),
                           ("dlse", dlse, (sq, fp.hq)), ("topk_length", topk_length, (sq,))):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    # autograd hands over expanded gradients (stride 0) for losses like out.sum(): densify those
    dlse = None if dlse is None else dlse.contiguous()
    if fp.copy_inputs or dout.stride(-1) != 1 or not lse.is_contiguous():
        q, kv, indices, out, dout = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, kv, indices, out, dout))
        lse = lse.contiguous()
        attn_sink = None if attn_sink is None else attn_sink.contiguous()
        topk_length = None if topk_length is None else topk_length.contiguous()
    d_sink = torch.zeros(fp.hq if attn_sink is not None else 0, dtype=torch.float32, device=fp.device)
    if sq == 0 or fp.hq == 0 or kv.shape[0] == 0:  # no row reads a key: every gradient is exactly 0
        return (torch.zeros_like(q), torch.zeros_like(kv), d_sink), None
    dq, dkv = torch.empty_like(q), torch.empty_like(kv)
    if SORT_INDICES and q.is_cuda:
        indices = sorted_indices(indices, topk_length, kv.shape[0])
    a = SparseMlaPrefillBackwardArgs(q, kv, indices, topk_length, attn_sink, out, None, lse, sq, fp.scale)
    a.dout, a.dlse, a.dq, a.dkv = dout, dlse, dq, dkv
    a.d_attn_sink, a.deterministic = (d_sink if attn_sink is not None else None), deterministic
    return (dq, dkv, d_sink), a


def run(dout, dlse, q, kv, indices, out, lse, sm_scale, d_v, attn_sink, topk_length, deterministic, backend):
    """Validate (once per signature), allocate the gradients, launch -> (dq, dkv, d_attn_sink)."""
    try:
        key = (q.shape[1:], q.stride(), q.dtype, q.device, kv.shape[1:], kv.stride(), kv.dtype, kv.device,
               indices.shape[1:], indices.stride(), indices.dtype, indices.device, out.stride(), out.dtype,
               lse.stride(), dout.stride(), dout.dtype,
               None if dlse is None else (dlse.stride(), dlse.dtype, dlse.device),
               None if attn_sink is None else (attn_sink.shape, attn_sink.dtype, attn_sink.device, attn_sink.stride()),
               None if topk_length is None else (topk_length.dtype, topk_length.device, topk_length.stride()),
               sm_scale, d_v, bool(deterministic), backend)  # launchers differ per mode
    except (AttributeError, TypeError, IndexError):
        key = None
    return dispatch(_PLANS, key, _plan, _args,
                    (dout, dlse, q, kv, indices, out, lse, sm_scale, d_v, attn_sink, topk_length, backend),
                    (dout, dlse, q, kv, indices, out, lse, attn_sink, topk_length, deterministic), backend)


_SCHEMA = ("Tensor dout, Tensor? dlse, Tensor q, Tensor kv, Tensor indices, Tensor out, Tensor lse, float sm_scale, "
           "int d_v, Tensor? attn_sink, Tensor? topk_length, bool deterministic, str backend")


def _fake(dout, dlse, q, kv, indices, out, lse, sm_scale, d_v, attn_sink, topk_length, deterministic, backend):
    n = q.shape[1] if attn_sink is not None else 0
    return torch.empty_like(q), torch.empty_like(kv), q.new_empty(n, dtype=torch.float32)


register_functional_op("sparse_mla_prefill_backward", _SCHEMA, "(Tensor dq, Tensor dkv, Tensor d_attn_sink)", run,
                       _fake)


# ------------------------------------------------------------------------------ autograd of the forward op

def _setup_context(ctx, inputs, output):
    q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend = inputs
    out, _, lse = output
    ctx.save_for_backward(q, kv, indices, attn_sink, topk_length, out, lse)
    ctx.scalars = (sm_scale, d_v, backward_backend(backend, "sparse_mla_prefill_backward"))
    ctx.mark_non_differentiable(output[1])  # max_logits


def _backward(ctx, dout, _dmax_logits, dlse):
    q, kv, indices, attn_sink, topk_length, out, lse = ctx.saved_tensors
    sm_scale, d_v, backend = ctx.scalars
    if dout is None:
        dout = torch.zeros_like(out)
    op = run if getattr(ctx, "direct", False) else torch.ops.sinkops.sparse_mla_prefill_backward
    dq, dkv, d_sink = op(
        dout, dlse, q, kv, indices, out, lse, sm_scale, d_v, attn_sink, topk_length,
        torch.are_deterministic_algorithms_enabled(), backend)
    return dq, dkv, None, None, None, (d_sink if attn_sink is not None else None), None, None


register_autograd("sparse_mla_prefill", prefill._op, _setup_context, _backward)
