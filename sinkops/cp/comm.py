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


def _send_pieces(plan: WindowHaloPlan, window_left: int, window_right: int):
    """What this rank sends, per peer in rank order: the (start, end) global ranges of its own rows
    that the peer's halo needs (every rank derives every peer's plan, so no handshake)."""
    world, rank = plan.cp_size, plan.rank
    return [[] if peer == rank else
            window_halo_plan(world, plan.t_local, peer, window_left, window_right).pieces_from(rank)
            for peer in range(world)]


def _recv_splits(plan: WindowHaloPlan):
    return [0 if peer == plan.rank else sum(b - a for a, b in plan.pieces_from(peer))
            for peer in range(plan.cp_size)]


def _all_to_all(send_parts, send_splits, recv_splits, width, like, group):
    recv = like.new_empty((sum(recv_splits), width))
    if len(send_splits) > 1:
        send = torch.cat(send_parts) if send_parts else like.new_empty((0, width))
        dist.all_to_all_single(recv, send, output_split_sizes=recv_splits, input_split_sizes=send_splits,
                               group=group)
    return recv


class _HaloExchange(torch.autograd.Function):
    """Forward: this rank's halo rows, in global order. Backward: the reverse exchange, each halo
    row's gradient goes back to the rank that owns the row and is added to its local gradient
    (pieces in a fixed order: deterministic)."""

    @staticmethod
    def forward(ctx, tokens, plan, window_left, window_right, group, stats):
        world, rank, t_local = plan.cp_size, plan.rank, plan.t_local
        sends = _send_pieces(plan, window_left, window_right)
        send_parts = [tokens.narrow(0, _local_rows(a, b, world, t_local), b - a) for pieces in sends for a, b in pieces]
        send_splits = [sum(b - a for a, b in pieces) for pieces in sends]
        recv_splits = _recv_splits(plan)
        row_bytes = tokens.shape[1] * tokens.element_size()
        if stats is not None:
            stats["send_bytes"] = stats.get("send_bytes", 0) + sum(send_splits) * row_bytes
            stats["recv_bytes"] = stats.get("recv_bytes", 0) + sum(recv_splits) * row_bytes
        recv = _all_to_all(send_parts, send_splits, recv_splits, tokens.shape[1], tokens, group)
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
        ctx.plan, ctx.group, ctx.sends, ctx.splits = plan, group, sends, (send_splits, recv_splits)
        ctx.t_local = tokens.shape[0]
        return torch.cat(parts) if parts else tokens.new_empty((0, tokens.shape[1]))

    @staticmethod
    def backward(ctx, grad):
        plan, world, rank = ctx.plan, ctx.plan.cp_size, ctx.plan.rank
        send_splits, recv_splits = ctx.splits
        grad_tokens = grad.new_zeros((ctx.t_local, grad.shape[1]))
        back = [[] for _ in range(world)]  # per owner: gradients of its rows, in the order they came
        row = 0
        for a, b, owner in plan.pieces():
            g = grad.narrow(0, row, b - a)
            row += b - a
            if owner == rank:
                grad_tokens.narrow(0, _local_rows(a, b, world, plan.t_local), b - a).add_(g)
            else:
                back[owner].append(g)
        parts = [g for owner in range(world) for g in back[owner]]
        returned = _all_to_all(parts, recv_splits, send_splits, grad.shape[1], grad, ctx.group)
        offset = 0
        for pieces in ctx.sends:  # the rows this rank sent, in the order it sent them
            for a, b in pieces:
                grad_tokens.narrow(0, _local_rows(a, b, world, plan.t_local), b - a).add_(
                    returned.narrow(0, offset, b - a))
                offset += b - a
        return grad_tokens, None, None, None, None, None


def exchange_halo(tokens: torch.Tensor, plan: WindowHaloPlan, window_left: int,
                  window_right: int, group=None, stats: dict | None = None) -> torch.Tensor:
    """Fetch this rank's halo: rows of the global sequence listed in `plan.ranges`.

    tokens [t_local, F]: this rank's local rows (any per-token payload, e.g. K and V side by
    side). Returns [plan.halo_tokens, F] in global order. Every rank derives every peer's plan
    from (cp, t_local, window), so send and receive sizes agree without any handshake; one
    all_to_all_single moves only halo rows (zero-sized splits for ranks not adjacent).
    Differentiable: the backward returns each halo row's gradient to its owner (one more
    all_to_all_single of the same sizes, reversed).
    """
    return _HaloExchange.apply(tokens, plan, window_left, window_right, group, stats)
