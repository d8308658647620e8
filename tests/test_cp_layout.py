"""sinkops.cp without a process group: the load-balanced index helpers tested exhaustively
(cp 1..8, odd and even chunk sizes, CP padding at the global tail), the halo plan, and the
windowed-attention sub-problem construction simulated for every rank in one process against the
single-device op on the global sequence (float64 reference: exact up to summation order)."""
import random

import pytest
import torch

from sinkops import cp, ops
from sinkops.cp.layout import chunk_owner, local_row

CP_SIZES = range(1, 9)
T_LOCALS = (0, 2, 4, 6, 10)  # chunk sizes 0, 1, 2, 3, 5: odd and even


def _naive_slots(cp_size, t_local, rank):
    h = t_local // 2
    return [p for c in (rank, 2 * cp_size - 1 - rank) for p in range(c * h, (c + 1) * h)]


@pytest.mark.parametrize("cp_size", CP_SIZES)
@pytest.mark.parametrize("t_local", T_LOCALS)
def test_load_balanced_slots_exhaustive(cp_size, t_local):
    h = t_local // 2
    total = cp_size * t_local
    all_slots = cp.load_balanced_slots(cp_size, t_local)
    assert all_slots.dtype == torch.int64 and all_slots.shape == (total,)
    for r in range(cp_size):
        s = cp.load_balanced_slots(cp_size, t_local, r)
        assert s.dtype == torch.int64 and s.tolist() == _naive_slots(cp_size, t_local, r)
        assert torch.equal(all_slots[r * t_local:(r + 1) * t_local], s)  # rank-major gather
        for k, p in enumerate(s.tolist()):
            assert local_row(p, cp_size, t_local) == (r, k)
            assert chunk_owner(p // h, cp_size) == r
    assert sorted(all_slots.tolist()) == list(range(total))  # a dense permutation
    assert torch.equal(cp.gather_order(cp_size, t_local), torch.argsort(all_slots))


@pytest.mark.parametrize("cp_size", CP_SIZES)
@pytest.mark.parametrize("t_local", T_LOCALS)
def test_order_restore_roundtrip(cp_size, t_local):
    total = cp_size * t_local
    x = torch.randn(3, total, 5, dtype=torch.float64)  # sequence along dim 1
    shards = [cp.shard_sequence(x, cp_size, r, dim=1) if total else x for r in range(cp_size)]
    gathered = torch.cat(shards, dim=1) if total else x
    slots = cp.load_balanced_slots(cp_size, t_local)
    glob, order = cp.order_by_positions(gathered, slots, dim=1)
    assert torch.equal(glob, x)
    assert torch.equal(order, torch.argsort(slots))
    assert torch.equal(cp.restore_by_positions(glob, slots, dim=1), gathered)
    for r in range(cp_size):  # a shard is the global rows at that rank's slots
        slots_r = cp.load_balanced_slots(cp_size, t_local, r).tolist()
        assert torch.equal(shards[r], x[:, slots_r]) if total else True


def test_cp_padding_lands_in_rank0_tail():
    for cp_size in CP_SIZES:
        for true_len in range(1, 6 * cp_size):
            total = cp.padded_length(true_len, cp_size)
            assert total % (2 * cp_size) == 0 and true_len <= total < true_len + 2 * cp_size
            t_local = total // cp_size
            pad = set(range(true_len, total))
            h = t_local // 2
            # padding is the global tail: it fills rank 0's tail chunk first, then (only when
            # chunks are shorter than the padding) the tail chunks of ranks 1, 2, ...
            tails = [cp.load_balanced_slots(cp_size, t_local, r)[h:].tolist()
                     for r in range(cp_size)]
            tail_order = [p for tail in tails for p in reversed(tail)]
            assert set(tail_order[:len(pad)]) == pad if len(pad) <= cp_size * h else True
            if len(pad) <= h:
                assert pad <= set(cp.load_balanced_slots(cp_size, t_local, 0)[h:].tolist())


@pytest.mark.parametrize("bad", [
    torch.tensor([0, 1, 1, 3]), torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3, 4]),
    torch.tensor([0, 1, 2, -1]), torch.tensor([0., 1., 2., 3.]), torch.tensor([[0, 1, 2, 3]])])
def test_order_by_positions_rejects_non_permutations(bad):
    x = torch.randn(4, 2)
    with pytest.raises(ValueError):
        cp.order_by_positions(x, bad, dim=0)
    with pytest.raises(ValueError):
        cp.restore_by_positions(x, bad, dim=0)


def test_layout_argument_errors():
    with pytest.raises(ValueError):
        cp.load_balanced_slots(2, 3)  # odd t_local
    with pytest.raises(ValueError):
        cp.load_balanced_slots(0, 4)
    with pytest.raises(ValueError):
        cp.load_balanced_slots(2, 4, rank=2)
    with pytest.raises(ValueError):
        cp.shard_sequence(torch.randn(5), 2, 0)


def test_document_ids():
    pos = torch.tensor([0, 1, 2, 0, 0, 1, 0, 1, 2, 3])
    assert cp.document_ids(pos).tolist() == [0, 0, 0, 1, 2, 2, 3, 3, 3, 3]
    batched = torch.stack([pos, torch.tensor([5, 0, 1, 2, 3, 4, 0, 0, 1, 0])])
    assert cp.document_ids(batched).tolist()[1] == [-1, 0, 0, 0, 0, 0, 1, 2, 2, 3]


WINDOWS = [(-1, -1), (0, 0), (1, 0), (2, 3), (3, 0), (0, 5), (7, 7), (-1, 0), (-1, 2), (4, -1),
           (40, 40)]


@pytest.mark.parametrize("cp_size", CP_SIZES)
@pytest.mark.parametrize("t_local", (2, 6, 8))
def test_window_halo_plan_covers_exactly_what_is_needed(cp_size, t_local):
    total = cp_size * t_local
    for left, right in WINDOWS:
        plans = [cp.window_halo_plan(cp_size, t_local, r, left, right) for r in range(cp_size)]
        for r, plan in enumerate(plans):
            need = set()
            for p in plan.problems:
                assert p.q_start <= p.q_real_end <= p.q_end <= total
                lo = 0 if left < 0 else max(0, p.q_start - left)
                hi = total if right < 0 else min(total, p.q_real_end + right)
                assert p.k_start <= lo and p.k_end >= hi  # every visible key is present
                assert p.k_start >= max(0, lo - 1)          # at most one extra key on the left
                if left >= 0 or right >= 0:
                    assert p.q_end == p.k_end               # ranges end together
                need |= set(range(p.k_start, p.k_end))
            halo = [g for a, b in plan.ranges for g in range(a, b)]
            assert halo == sorted(need)  # fetched once, global order
            assert [plan.halo_offset(g) for g in halo] == list(range(len(halo)))
            for a, b, owner in plan.pieces():  # pieces never cross a chunk and live on `owner`
                assert local_row(a, cp_size, t_local)[0] == owner
                assert local_row(b - 1, cp_size, t_local) == (
                    owner, local_row(a, cp_size, t_local)[1] + b - a - 1)
        if left >= 0 and right >= 0 and left + right < t_local // 2:
            # narrow window: nobody fetches more than its chunks plus two halos each
            for plan in plans:
                assert plan.halo_tokens <= t_local + 2 * (left + 1 + right)


# --------------------------------------------------------------------- single-process simulation


def _random_segments(total, rng):
    """Uneven segments (incl. empty, length 1, long) summing to <= total (rest = CP padding)."""
    lengths, left = [], total - rng.randrange(0, 3)
    while left > 0:
        n = min(left, rng.choice([0, 1, 2, 3, 5, 9, 17, 40]))
        lengths.append(n)
        left -= n
    if rng.random() < 0.3:
        lengths.insert(rng.randrange(len(lengths) + 1), 0)
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def _sinks(kind, hq):
    s = torch.empty(hq, dtype=torch.float32).uniform_(-2.2, 2.5)
    if kind == "posinf":
        s[0] = float("inf")
    elif kind == "neginf":
        s[-1] = float("-inf")
    elif kind == "mixed":
        s[0], s[-1] = float("inf"), float("-inf")
    return s


def _simulate_cp_window(q, k, v, cu, cp_size, window, sinks, sink_mode):
    """Every rank's halo sliced straight from the global tensors (what exchange_halo delivers)."""
    total = q.shape[0]
    t_local = total // cp_size
    outs, lses = [], []
    for r in range(cp_size):
        plan = cp.window_halo_plan(cp_size, t_local, r, *window)
        halo_k = torch.cat([k[a:b] for a, b in plan.ranges])
        halo_v = torch.cat([v[a:b] for a, b in plan.ranges])
        q_local = cp.shard_sequence(q, cp_size, r)
        o, l = cp.window_attention_from_halo(q_local, halo_k, halo_v, plan, cu, window[0],
                                             window[1], q.shape[-1] ** -0.5, sinks, sink_mode,
                                             backend="torch")
        outs.append(o)
        lses.append(l)
    slots = cp.load_balanced_slots(cp_size, t_local)
    out, _ = cp.order_by_positions(torch.cat(outs), slots, dim=0)
    lse, _ = cp.order_by_positions(torch.cat(lses, dim=1), slots, dim=1)
    return out, lse


def assert_same(actual, expected, name):
    """float64 equality up to summation order; non-finite entries must match exactly."""
    assert actual.shape == expected.shape, name
    assert not torch.isnan(actual).any(), f"{name}: NaN (unwritten row?)"
    fin = torch.isfinite(expected)
    assert torch.equal(actual[~fin], expected[~fin]), f"{name}: non-finite entries differ"
    torch.testing.assert_close(actual[fin], expected[fin], rtol=1e-9, atol=1e-11, msg=name)


@pytest.mark.parametrize("cp_size", (1, 2, 3, 4, 8))
@pytest.mark.parametrize("sink_mode", ("key0", "null", "none"))
def test_window_sub_problems_match_global(cp_size, sink_mode):
    rng = random.Random()
    hq, hk, d = 4, 2, 8
    for window in WINDOWS:
        t_local = rng.choice([t for t in (2, 6, 10, 16) if cp_size * t <= 64])
        total = cp_size * t_local
        cu = _random_segments(total, rng)
        q = torch.randn(total, hq, d, dtype=torch.float64)
        k = torch.randn(total, hk, d, dtype=torch.float64)
        v = torch.randn(total, hk, d + 2, dtype=torch.float64)
        kind = rng.choice(["finite", "posinf", "neginf", "mixed"])
        sinks = None if sink_mode == "none" else _sinks(kind, hq)
        mode = "key0" if sink_mode == "none" else sink_mode
        out, lse = _simulate_cp_window(q, k, v, torch.tensor(cu, dtype=torch.int32), cp_size,
                                       window, sinks, mode)
        cu_full = torch.tensor(cu + [total], dtype=torch.int32)  # padding = one more segment
        ref_out, ref_lse = ops.window_attention(
            q, k, v, cu_full, cu_full, total, total, window_size=window, softmax_scale=d ** -0.5,
            sinks=sinks, sink_mode=mode, return_lse=True, backend="torch")
        name = f"cp={cp_size} window={window} sinks={kind} mode={sink_mode} cu={cu}"
        assert_same(out, ref_out, name + " out")
        assert_same(lse.double(), ref_lse.double(), name + " lse")
