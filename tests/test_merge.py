"""merge_attention_states: partials over disjoint key sets, computed without the sink and merged
with it, equal the reference over all keys with the sink."""
import pytest
import torch

import helpers
from sinkops import reference
from sinkops.merge import merge_attention_states

F64 = torch.float64
INF = float("inf")


def _split_indices(indices, parts):
    """Split the topk positions into `parts` disjoint column groups; other columns become -1."""
    topk = indices.shape[-1]
    owner = torch.randint(0, parts, (topk,))
    return [torch.where(owner == p, indices, torch.full_like(indices, -1)) for p in range(parts)]


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("kind", [None, "dsv4", "large", "neginf", "posinf", "mixed"])
def test_sparse_split_merge_equals_full(parts, kind):
    hq = 6
    case = helpers.make_sparse_prefill_case(10, 50, hq, 512, 24, invalid_frac=0.2)
    case["indices"][0] = -1                                         # all partials empty on row 0
    q, kv = case["q"].double(), case["kv"].double()
    sinks = None if kind is None else helpers.sinks_like(hq, kind)
    full_out, _, full_lse = reference.sparse_mla_prefill(q, kv, case["indices"], 0.05, 512, sinks)
    outs, lses = [], []
    for idx in _split_indices(case["indices"], parts):
        o, _, l = reference.sparse_mla_prefill(q, kv, idx, 0.05, 512, None)
        outs.append(o)
        lses.append(l)
    out, lse = merge_attention_states(outs, lses, sinks=sinks, sink_mode="null")
    assert out.dtype == F64 and lse.shape == (10, hq)
    torch.testing.assert_close(out, full_out, rtol=1e-12, atol=1e-12)
    assert torch.equal(torch.isposinf(lse), torch.isposinf(full_lse))
    torch.testing.assert_close(lse, full_lse, rtol=1e-12, atol=1e-12)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.isposinf(lse[0]).all()
    # Stacked input gives the same result.
    out_s, lse_s = merge_attention_states(torch.stack(outs), torch.stack(lses), sinks=sinks)
    assert torch.equal(out_s, out) and torch.equal(lse_s, lse)


def test_empty_partials_contribute_nothing():
    case = helpers.make_sparse_prefill_case(4, 30, 2, 512, 16, invalid_frac=0.0)
    q, kv = case["q"].double(), case["kv"].double()
    o, _, l = reference.sparse_mla_prefill(q, kv, case["indices"], 0.05, 512)
    empty_o = torch.zeros_like(o)
    empty_l = torch.full_like(l, INF)
    out, lse = merge_attention_states([empty_o, o, empty_o], [empty_l, l, empty_l])
    assert torch.equal(out, o) and torch.equal(lse, l)
    # Even a garbage (NaN) output under lse = +inf must not leak.
    out, _ = merge_attention_states([torch.full_like(o, float("nan")), o], [empty_l, l])
    assert torch.equal(out, o)


@pytest.mark.parametrize("kind", [None, "dsv4", "posinf", "neginf"])
def test_all_empty(kind):
    outs = torch.zeros(3, 5, 4, 8, dtype=torch.bfloat16)
    lses = torch.full((3, 5, 4), INF)
    sinks = None if kind is None else helpers.sinks_like(4, kind)
    out, lse = merge_attention_states(outs, lses, sinks=sinks)
    assert out.dtype == torch.bfloat16 and torch.equal(out, torch.zeros_like(out)) and torch.isposinf(lse).all()


def test_null_sink_edges():
    o = torch.randn(6, 4, 16, dtype=torch.bfloat16)
    l = torch.randn(6, 4)
    plain, plain_lse = merge_attention_states([o], [l])
    assert torch.equal(plain, o) and torch.equal(plain_lse, l)     # one partial: identity
    neg, _ = merge_attention_states([o], [l], sinks=helpers.sinks_like(4, "neginf"))
    assert torch.equal(neg, plain)                                 # bitwise no-op
    pos, pos_lse = merge_attention_states([o], [l], sinks=helpers.sinks_like(4, "posinf"))
    assert torch.equal(pos, torch.zeros_like(pos)) and torch.equal(pos_lse, l)
    key0, _ = merge_attention_states([o], [l], sinks=helpers.sinks_like(4, "dsv4"), sink_mode="key0")
    assert torch.equal(key0, plain)                                # key0 bias lives in the partials


@pytest.mark.parametrize("mode", ["null", "key0"])
def test_window_key_split_merge(mode):
    """Full window, keys of each segment split into chunks; only the chunk holding key 0 is
    computed with the key0 sink (null: no partial gets the sink, merge applies it once)."""
    hq, hk = 4, 2
    case = helpers.make_window_case([7, 5], [12, 9], hq=hq, hk=hk, d=16, dtype=F64)
    sinks = helpers.sinks_like(hq, "dsv4")
    full_out, full_lse = reference.window_attention(case["q"], case["k"], case["v"], case["cu_seqlens_q"],
                                                    case["cu_seqlens_k"], sinks=sinks, sink_mode=mode)
    cu_k = case["cu_seqlens_k"].tolist()
    cuts = [(0, 4), (4, 8), (8, None)]                             # chunk boundaries inside each segment
    outs, lses = [], []
    for c0, c1 in cuts:
        ks = [slice(cu_k[b] + c0, cu_k[b + 1] if c1 is None else cu_k[b] + c1) for b in range(2)]
        lens = [s.stop - s.start for s in ks]
        k = torch.cat([case["k"][s] for s in ks])
        v = torch.cat([case["v"][s] for s in ks])
        cu = torch.tensor([0, lens[0], lens[0] + lens[1]], dtype=torch.int32)
        part_sinks = sinks if (mode == "key0" and c0 == 0) else None
        # Full window and no causal: key positions inside a chunk do not change visibility.
        o, l = reference.window_attention(case["q"], k, v, case["cu_seqlens_q"], cu, sinks=part_sinks,
                                          sink_mode=mode)
        outs.append(o)
        lses.append(l.transpose(0, 1))                             # [Hq, Tq] -> [Tq, Hq]
    out, lse = merge_attention_states(outs, lses, sinks=sinks, sink_mode=mode)
    torch.testing.assert_close(out, full_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, full_lse.transpose(0, 1), rtol=1e-12, atol=1e-12)


def test_bad_shapes_raise():
    with pytest.raises(ValueError):
        merge_attention_states(torch.zeros(2, 3, 4, 8), torch.zeros(2, 3, 5))
