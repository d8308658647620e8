"""Communication for context parallelism: the sequence all-gather (with its reduce-scatter
backward) and the windowed-attention halo exchange. Message sizes come from the layout and the
window alone, so nothing here reads tensor values (no host sync; NCCL on GPUs, gloo on CPU).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from sinkops.cp.layout import WindowHaloPlan, local_row, window_halo_plan


# torch >= 2.13 renamed the flat-tensor collectives (the old names warn); same semantics.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def group_rank_and_size(group) -> tuple[int, int]:
    return dist.get_rank(group), dist.get_world_size(group)


def _all_gather_dim0(x: torch.Tensor, group) -> torch.Tensor:
    _, world = group_rank_and_size(group)
    out = x.new_empty((world * x.shape[0],) + tuple(x.shape[1:]))
    _ALL_GATHER(out, x.contiguous(), group=group)
    return out


class _AllGatherSeq(torch.autograd.Function):
    """Forward: rank-major all-gather along `dim`. Backward: each rank's input fed every rank's
    copy of the gathered tensor, so its gradient is the sum over ranks of the gradient slice
    it contributed: a reduce-scatter (half the bytes of all-reduce + slice)."""

    @staticmethod
    def forward(ctx, x, group, dim):
        ctx.group, ctx.dim = group, dim
        moved = x.movedim(dim, 0)
        return _all_gather_dim0(moved, group).movedim(0, dim)

    @staticmethod
    def backward(ctx, grad):
        _, world = group_rank_and_size(ctx.group)
        g = grad.movedim(ctx.dim, 0).contiguous()
        out = g.new_empty((g.shape[0] // world,) + tuple(g.shape[1:]))
        _REDUCE_SCATTER(out, g, op=dist.ReduceOp.SUM, group=ctx.group)
        return out.movedim(0, ctx.dim), None, None


def all_gather_seq(x: torch.Tensor, group=None, dim: int = 0) -> torch.Tensor:
    """Concatenate every rank's `x` along `dim` in rank order (all shapes equal). Differentiable:
    the backward reduce-scatters the gradient. Rows come out in the rank-major order described
    by `load_balanced_slots(cp, t_local)`; `order_by_positions` puts them in global order."""
    dim = dim % x.dim()
    return _AllGatherSeq.apply(x, group, dim)


def _local_rows(start: int, end: int, cp_size: int, t_local: int) -> int:
    """Local row of global `start` in its owner; a piece never crosses a chunk, so rows
    [row, row + end - start) are contiguous in the owner's tensor."""
    return local_row(start, cp_size, t_local)[1]


def exchange_halo(tokens: torch.Tensor, plan: WindowHaloPlan, window_left: int,
                  window_right: int, group=None, stats: dict | None = None) -> torch.Tensor:
    """Fetch this rank's halo: rows of the global sequence listed in `plan.ranges`.

    tokens [t_local, F]: this rank's local rows (any per-token payload, e.g. K and V side by
    side). Returns [plan.halo_tokens, F] in global order. Every rank derives every peer's plan
    from (cp, t_local, window), so send and receive sizes agree without any handshake; one
    all_to_all_single moves only halo rows (zero-sized splits for ranks not adjacent).
    """
    rank, world = plan.rank, plan.cp_size
    t_local = plan.t_local
    send_parts, send_splits = [], []
    for peer in range(world):
        n = 0
        if peer != rank:
            peer_plan = window_halo_plan(world, t_local, peer, window_left, window_right)
            for a, b in peer_plan.pieces_from(rank):
                send_parts.append(tokens.narrow(0, _local_rows(a, b, world, t_local), b - a))
                n += b - a
        send_splits.append(n)
    recv_splits = [0 if peer == rank else sum(b - a for a, b in plan.pieces_from(peer))
                   for peer in range(world)]
    row_bytes = tokens.shape[1] * tokens.element_size()
    if stats is not None:
        stats["send_bytes"] = stats.get("send_bytes", 0) + sum(send_splits) * row_bytes
        stats["recv_bytes"] = stats.get("recv_bytes", 0) + sum(recv_splits) * row_bytes
    recv = tokens.new_empty((sum(recv_splits), tokens.shape[1]))
    if world > 1:
        send = torch.cat(send_parts) if send_parts else tokens.new_empty((0, tokens.shape[1]))
        dist.all_to_all_single(recv, send, output_split_sizes=recv_splits,
                               input_split_sizes=send_splits, group=group)
    # Assemble in halo (global) order: local pieces from `tokens`, remote ones from `recv`,
    # whose per-peer block lists that peer's pieces in the same halo order.
    peer_offset = [sum(recv_splits[:p]) for p in range(world)]
    parts = []
    for a, b, owner in plan.pieces():
        if owner == rank:
            parts.append(tokens.narrow(0, _local_rows(a, b, world, t_local), b - a))
        else:
            parts.append(recv.narrow(0, peer_offset[owner], b - a))
            peer_offset[owner] += b - a
    return torch.cat(parts) if parts else tokens.new_empty((0, tokens.shape[1]))
