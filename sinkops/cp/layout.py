"""Pure index arithmetic of the load-balanced context-parallel layout (DESIGN.md §2.4).

No process group, no device work beyond building small index tensors: everything here is a
function of (cp_size, t_local, rank, window) and is tested exhaustively on CPU, because a wrong
inverse permutation trains silently (no shape error ever catches it).

Layout. A global packed sequence of T = cp * t_local tokens is cut into 2*cp chunks of
h = t_local // 2 tokens; rank r holds chunk r (its *head*) then chunk 2*cp-1-r (its *tail*),
so causal work is balanced. t_local must be even. A sequence whose length is not a multiple of
2*cp is padded at the global tail (`padded_length`); the padding therefore lands in the tail
chunk of rank 0 (global chunk 2*cp-1).

All positions are Python ints or int64 tensors: T may exceed 2^31 / Hq products (issue item 7).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def _check_layout(cp_size: int, t_local: int, rank=None):
    for name, v in (("cp_size", cp_size), ("t_local", t_local)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if cp_size < 1:
        raise ValueError(f"cp_size: must be >= 1, got {cp_size}")
    if t_local < 0 or t_local % 2:
        raise ValueError(f"t_local: must be a non-negative even number (two chunks of t_local/2), "
                         f"got {t_local}")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < cp_size:
            raise ValueError(f"rank: expected an int in [0, {cp_size}), got {rank!r}")


def padded_length(num_tokens: int, cp_size: int) -> int:
    """Smallest multiple of 2*cp_size that holds num_tokens (the CP padding goes at the tail)."""
    if num_tokens < 0 or cp_size < 1:
        raise ValueError(f"padded_length: need num_tokens >= 0 and cp_size >= 1, got "
                         f"{num_tokens}, {cp_size}")
    step = 2 * cp_size
    return -(-num_tokens // step) * step


def chunk_owner(chunk: int, cp_size: int) -> int:
    """Rank holding global chunk `chunk` (0 <= chunk < 2*cp_size)."""
    return chunk if chunk < cp_size else 2 * cp_size - 1 - chunk


def local_chunks(cp_size: int, rank: int) -> tuple[int, int]:
    """Global chunk ids held by `rank`, in local order (head, tail)."""
    return rank, 2 * cp_size - 1 - rank


def local_row(position: int, cp_size: int, t_local: int) -> tuple[int, int]:
    """(owner rank, row in the owner's local tensor) of global token `position`."""
    h = t_local // 2
    chunk = position // h
    owner = chunk_owner(chunk, cp_size)
    return owner, (0 if chunk == owner else h) + position - chunk * h


def load_balanced_slots(cp_size: int, t_local: int, rank: int | None = None) -> torch.Tensor:
    """Global token positions held in local order.

    With `rank`: int64 [t_local], the positions of that rank's rows (head chunk, then tail chunk).
    Without: int64 [cp_size * t_local], the positions of the rows of a rank-major all-gather of
    the local tensors (what `all_gather_seq` returns), i.e. the ranks' slots concatenated.
    """
    _check_layout(cp_size, t_local, rank)
    h = t_local // 2
    ranks = range(cp_size) if rank is None else (rank,)
    parts = []
    for r in ranks:
        for c in local_chunks(cp_size, r):
            parts.append(torch.arange(c * h, (c + 1) * h, dtype=torch.int64))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)


def _check_permutation(positions: torch.Tensor, size: int, name: str = "positions"):
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1:
        raise ValueError(f"{name}: expected a 1-D integer tensor, got "
                         f"{getattr(positions, 'shape', type(positions).__name__)}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool or positions.is_complex():
        raise ValueError(f"{name}: expected an integer dtype, got {positions.dtype}")
    if positions.numel() != size:
        raise ValueError(f"{name}: has {positions.numel()} entries, the tensor has {size} "
                         f"along dim")
    # Reads values: syncs for device tensors. This is a setup-time helper, not a hot-path op.
    expected = torch.arange(size, dtype=torch.int64, device=positions.device)
    if not torch.equal(torch.sort(positions.to(torch.int64)).values, expected):
        raise ValueError(f"{name}: must be a dense permutation of 0..{size - 1}")


def order_by_positions(x: torch.Tensor, positions: torch.Tensor, dim: int = 0):
    """Put the slices of `x` along `dim` into global order.

    positions[k] is the global position of x's k-th slice (e.g. `load_balanced_slots(cp, t)` for
    an all-gathered tensor). Returns (global, order) with global = x.index_select(dim, order),
    so global's slice p is the slice of x whose position is p. Raises ValueError unless
    positions is a dense permutation of 0..S-1 (S = x.size(dim)); checking it reads the values.
    """
    _check_permutation(positions, x.size(dim))
    order = torch.argsort(positions.to(device=x.device, dtype=torch.int64))
    return x.index_select(dim, order), order


def restore_by_positions(global_x: torch.Tensor, positions: torch.Tensor, dim: int = 0):
    """Inverse of `order_by_positions`: slice k of the result is global_x's slice positions[k]."""
    _check_permutation(positions, global_x.size(dim))
    return global_x.index_select(dim, positions.to(device=global_x.device, dtype=torch.int64))


def document_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Document index of each token of a packed sequence (along the last dim): a document starts
    wherever position_ids == 0, so ids = cumsum(pos == 0) - 1 (int64; -1 before the first 0)."""
    return torch.cumsum(position_ids == 0, dim=-1) - 1


# ---------------------------------------------------------------------------------------------
# Halo plan for windowed attention
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkWindowProblem:
    """The local varlen sub-problem of one local chunk (all global token positions).

    Real queries are [q_start, q_real_end); rows [q_real_end, q_end) are dummy queries whose
    output is discarded (see `window_halo_plan`); keys are [k_start, k_end).
    """
    q_start: int
    q_real_end: int
    q_end: int
    k_start: int
    k_end: int


@dataclass(frozen=True)
class WindowHaloPlan:
    """What one rank needs for windowed attention: its two chunk problems and the halo, the
    sorted disjoint union of their key ranges, fetched once (`ranges`) and stored back to back
    in a halo buffer in global order."""
    cp_size: int
    t_local: int
    rank: int
    problems: tuple[ChunkWindowProblem, ChunkWindowProblem]
    ranges: tuple[tuple[int, int], ...]

    @property
    def halo_tokens(self) -> int:
        return sum(b - a for a, b in self.ranges)

    def halo_offset(self, position: int) -> int:
        """Row of global key `position` in the halo buffer."""
        off = 0
        for a, b in self.ranges:
            if a <= position < b:
                return off + position - a
            off += b - a
        raise ValueError(f"position {position} is not in the halo {self.ranges}")

    def pieces(self):
        """[(start, end, owner)] pieces of the halo split at chunk boundaries, in halo order."""
        h = self.t_local // 2
        out = []
        for a, b in self.ranges:
            p = a
            while p < b:
                chunk = p // h
                end = min(b, (chunk + 1) * h)
                out.append((p, end, chunk_owner(chunk, self.cp_size)))
                p = end
        return out

    def pieces_from(self, owner: int):
        """[(start, end)] halo pieces held by `owner`, in halo order (the order it sends them)."""
        return [(a, b) for a, b, o in self.pieces() if o == owner]


def window_halo_plan(cp_size: int, t_local: int, rank: int, window_left: int,
                     window_right: int) -> WindowHaloPlan:
    """Keys each local chunk needs, as a function of the layout and window alone (no data ->
    every rank can compute every other rank's plan -> static message sizes, no host sync).

    For chunk [c0, c1) of a sequence of T tokens and window (L, R) (-1 = unbounded):
    * keys [k0, k1) with k0 = max(0, c0 - L - 1) and k1 = min(T, c1 + R) (0 / T when unbounded).
      The one extra key on the left keeps the key0 sink exact: a segment clipped at k0 gets as
      its first sub-segment key either its true key 0 or a key that no real query can see
      (it is further than L from every query of the chunk), so the sink never lands on a wrong,
      visible key.
    * queries [c0, q_end) with q_end = k1 (dummy rows past c1) unless the window is unbounded on
      both sides. The varlen window rule is bottom-right aligned (query i of a segment sees
      j in [i + sk - sq - L, i + sk - sq + R]); ending the query and key ranges at the same
      position k1 makes every clipped segment end at the same place in both, so sk - sq equals
      the offset of its query start from its key start and the rule reads, in global positions,
      p - L <= g <= p + R: exactly the global one, with the caller's (L, R) for every segment.
      Cost: k1 - c1 <= R dummy query rows per chunk; with R unbounded and L bounded that is
      up to T - c1 rows (rare window; documented in sinkops.cp).
    """
    _check_layout(cp_size, t_local, rank)
    h = t_local // 2
    total = cp_size * t_local
    problems = []
    for c in local_chunks(cp_size, rank):
        c0, c1 = c * h, (c + 1) * h
        k0 = 0 if window_left < 0 else max(0, c0 - window_left - 1)
        k1 = total if window_right < 0 else min(total, c1 + window_right)
        q_end = c1 if (window_left < 0 and window_right < 0) else k1
        problems.append(ChunkWindowProblem(c0, c1, q_end, k0, k1))
    merged: list[list[int]] = []
    for p in sorted(problems, key=lambda p: p.k_start):
        if p.k_end <= p.k_start:
            continue
        if merged and p.k_start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], p.k_end)
        else:
            merged.append([p.k_start, p.k_end])
    return WindowHaloPlan(cp_size, t_local, rank, tuple(problems),
                          tuple((a, b) for a, b in merged))


def shard_sequence(x: torch.Tensor, cp_size: int, rank: int, dim: int = 0) -> torch.Tensor:
    """The rows of a global tensor (global order along `dim`) that `rank` holds, in local order."""
    total = x.size(dim)
    if total % cp_size:
        raise ValueError(f"x: length {total} along dim {dim} is not a multiple of cp_size "
                         f"{cp_size} (pad it to padded_length(T, cp_size) first)")
    slots = load_balanced_slots(cp_size, total // cp_size, rank)
    return x.index_select(dim, slots.to(x.device))


def gather_order(cp_size: int, t_local: int, device=None) -> torch.Tensor:
    """int64 [cp*t_local]: for each global position, its row in the rank-major all-gather.
    Equals argsort(load_balanced_slots(cp_size, t_local)), built with device arithmetic so the
    hot path uploads nothing and syncs nothing."""
    _check_layout(cp_size, t_local)
    h = t_local // 2
    pos = torch.arange(cp_size * t_local, dtype=torch.int64, device=device)
    if h == 0:
        return pos
    chunk = torch.div(pos, h, rounding_mode="floor")
    owner = torch.where(chunk < cp_size, chunk, 2 * cp_size - 1 - chunk)
    row = torch.where(chunk == owner, 0, h) + pos - chunk * h
    return owner * t_local + row
