"""The oracle checked against independent dense formulations, float64, with every edge value.

Window: one [Tq, Tk] logits matrix per head over the whole packed sequence, masked by segment id
and window, key0 bias added in the matrix, null sink appended as an extra column.
Sparse: a dense [Sq, Skv] multiplicity matrix built by scattering the selected indices.
"""
import math

import pytest
import torch

import helpers
from sinkops import kv_cache, reference

INF = float("inf")
F64 = torch.float64


# ----------------------------------------------------------------------------- dense window oracle

def _segment_ids(cu, total):
    seg = torch.zeros(total, dtype=torch.long)
    pos = torch.zeros(total, dtype=torch.long)
    cu = cu.tolist()
    for b in range(len(cu) - 1):
        seg[cu[b]:cu[b + 1]] = b
        pos[cu[b]:cu[b + 1]] = torch.arange(cu[b + 1] - cu[b])
    return seg, pos


def dense_window(q, k, v, cu_q, cu_k, left, right, scale, sinks, mode):
    """Whole-sequence masked softmax, per head, written without reference.py's helpers."""
    tq, hq, _ = q.shape
    tk, hk, dv = v.shape
    seg_q, pos_q = _segment_ids(cu_q, tq)
    seg_k, pos_k = _segment_ids(cu_k, tk)
    len_q = (cu_q[1:] - cu_q[:-1]).long()
    len_k = (cu_k[1:] - cu_k[:-1]).long()
    diag = pos_q + len_k[seg_q] - len_q[seg_q]                      # [Tq]
    mask = seg_q[:, None] == seg_k[None, :]
    if left >= 0:
        mask &= pos_k[None, :] >= diag[:, None] - left
    if right >= 0:
        mask &= pos_k[None, :] <= diag[:, None] + right
    is_key0 = (pos_k == 0)[None, :] & mask                         # [Tq, Tk]
    out = torch.zeros(tq, hq, dv, dtype=F64)
    lse = torch.full((hq, tq), INF, dtype=F64)
    for h in range(hq):
        kh = h // (hq // hk)
        x = scale * q[:, h].double() @ k[:, kh].double().T
        vh = v[:, kh].double()
        s = None if sinks is None else float(sinks[h])
        m = mask.clone()
        if mode == "key0" and s is not None:
            if s == -INF:
                m &= ~is_key0
            elif math.isfinite(s):
                x = x + s * is_key0.double()
        x = x.masked_fill(~m, -INF)
        has = m.any(dim=1)
        x_rows = x[has]
        l = torch.logsumexp(x_rows, dim=1)
        if mode == "null" and s is not None and s != -INF:
            if s == INF:
                o = torch.zeros(int(has.sum()), dv, dtype=F64)
            else:
                ext = torch.cat([x_rows, torch.full((x_rows.shape[0], 1), s, dtype=F64)], dim=1)
                o = torch.softmax(ext, dim=1)[:, :-1] @ vh
        else:
            o = torch.softmax(x_rows, dim=1) @ vh
        out[has, h] = o
        lse[h, has] = l
        if mode == "key0" and s == INF:
            rows = is_key0.any(dim=1)
            v0 = vh[is_key0[rows].double().argmax(dim=1)]
            out[rows, h] = v0
            lse[h, rows] = INF
    return out, lse


def _run_window(case, window, causal, sinks, mode, dtype=F64, compute_dtype=None):
    c = case
    return reference.window_attention(c["q"].to(dtype), c["k"].to(dtype), c["v"].to(dtype), c["cu_seqlens_q"],
                                      c["cu_seqlens_k"], window_size=window, causal=causal, sinks=sinks,
                                      sink_mode=mode, compute_dtype=compute_dtype)


def _assert_matches(out, lse, ref_out, ref_lse):
    assert torch.equal(torch.isposinf(lse), torch.isposinf(ref_lse))
    fin = torch.isfinite(ref_lse)
    torch.testing.assert_close(lse[fin], ref_lse[fin], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-10)


SEGMENTS = [
    # (seqlens_q, seqlens_k): empty, length 1, < window, >> window, Sq != Sk, q without k
    ([0, 1, 5, 40], None),
    ([3, 0, 7, 30], [5, 2, 7, 45]),
    ([2, 4], [0, 9]),
]
WINDOWS = [((-1, -1), False), ((6, 0), False), ((6, 6), False), ((-1, -1), True), ((3, -1), False), ((0, 0), False)]
GQA = [(1, 1), (4, 2), (8, 2), (16, 1)]


@pytest.mark.parametrize("segs", SEGMENTS)
@pytest.mark.parametrize("window,causal", WINDOWS)
@pytest.mark.parametrize("hq,hk", GQA)
@pytest.mark.parametrize("mode", ["key0", "null"])
def test_window_vs_dense_finite_sinks(segs, window, causal, hq, hk, mode):
    case = helpers.make_window_case(segs[0], segs[1], hq=hq, hk=hk, d=16, dv=8, dtype=F64)
    sinks = helpers.sinks_like(hq, "dsv4")
    out, lse = _run_window(case, window, causal, sinks, mode)
    right = 0 if causal else window[1]
    ref_out, ref_lse = dense_window(case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["cu_seqlens_k"],
                                    window[0], right, 16 ** -0.5, sinks, mode)
    _assert_matches(out, lse, ref_out, ref_lse)


@pytest.mark.parametrize("kind", ["mimo", "dsv4", "large", "neginf", "posinf", "mixed"])
@pytest.mark.parametrize("mode", ["key0", "null"])
@pytest.mark.parametrize("window", [(-1, -1), (4, 4), (4, 0)])
def test_window_vs_dense_all_sink_kinds(kind, mode, window):
    case = helpers.make_window_case([0, 1, 6, 25], [2, 1, 6, 30], hq=6, hk=3, d=16, dtype=F64)
    sinks = helpers.sinks_like(6, kind)
    out, lse = _run_window(case, window, False, sinks, mode)
    ref_out, ref_lse = dense_window(case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["cu_seqlens_k"],
                                    window[0], window[1], 0.25, sinks, mode)
    _assert_matches(out, lse, ref_out, ref_lse)


def test_window_no_sink_matches_sdpa():
    """Anchor against torch's own attention: one full segment, no sink, GQA expanded by hand."""
    case = helpers.make_window_case([17], [23], hq=4, hk=2, d=16, dtype=F64)
    out, lse = _run_window(case, (-1, -1), False, None, "key0")
    q = case["q"].permute(1, 0, 2)
    k = case["k"].repeat_interleave(2, dim=1).permute(1, 0, 2)
    v = case["v"].repeat_interleave(2, dim=1).permute(1, 0, 2)
    expect = torch.nn.functional.scaled_dot_product_attention(q, k, v).permute(1, 0, 2)
    torch.testing.assert_close(out, expect, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(1, 2) * 0.25, dim=-1), rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------- window edge values

@pytest.mark.parametrize("dtype", [F64, torch.bfloat16])
@pytest.mark.parametrize("window", [(-1, -1), (3, 3), (2, 0)])
def test_null_neginf_sink_is_bitwise_noop(dtype, window):
    case = helpers.make_window_case([0, 1, 9, 20], [1, 3, 9, 26], hq=4, hk=1, d=16)
    no_sink = _run_window(case, window, False, None, "null", dtype)
    with_sink = _run_window(case, window, False, helpers.sinks_like(4, "neginf"), "null", dtype)
    assert torch.equal(no_sink[0], with_sink[0]) and torch.equal(no_sink[1], with_sink[1])


def test_null_posinf_sink_zero_rows_and_unchanged_lse():
    case = helpers.make_window_case([0, 1, 9, 20], [1, 3, 9, 26], hq=4, hk=2, d=16, dtype=F64)
    out, lse = _run_window(case, (3, 3), False, helpers.sinks_like(4, "posinf"), "null")
    _, lse_none = _run_window(case, (3, 3), False, None, "null")
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(lse, lse_none)


def test_key0_posinf_outputs_v0_exactly():
    case = helpers.make_window_case([4, 10], [6, 10], hq=4, hk=2, d=16, dtype=torch.bfloat16)
    out, lse = _run_window(case, (3, 3), False, helpers.sinks_like(4, "posinf"), "key0", torch.bfloat16)
    _, lse_none = _run_window(case, (3, 3), False, None, "key0", torch.bfloat16)
    cu_q, cu_k = case["cu_seqlens_q"].tolist(), case["cu_seqlens_k"].tolist()
    for b in range(2):
        sq, sk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        for i in range(sq):
            row = cu_q[b] + i
            sees_key0 = i + sk - sq - 3 <= 0 <= i + sk - sq + 3
            for h in range(4):
                if sees_key0:
                    assert torch.equal(out[row, h], case["v"][cu_k[b], h // 2])
                    assert lse[h, row] == INF
                else:
                    assert lse[h, row] == lse_none[h, row]


def test_key0_neginf_masks_key0():
    # Segment of one key: every row sees only key 0 -> all rows become empty.
    case = helpers.make_window_case([3, 5], [1, 5], hq=2, hk=2, d=16, dtype=F64)
    out, lse = _run_window(case, (-1, -1), False, helpers.sinks_like(2, "neginf"), "key0")
    assert torch.equal(out[:3], torch.zeros_like(out[:3])) and torch.isposinf(lse[:, :3]).all()
    # Second segment equals attention over keys 1.. only.
    sub = dict(q=case["q"][3:], k=case["k"][2:], v=case["v"][2:],
               cu_seqlens_q=torch.tensor([0, 5], dtype=torch.int32), cu_seqlens_k=torch.tensor([0, 4], dtype=torch.int32))
    o2, l2 = _run_window(sub, (-1, -1), False, None, "key0")
    torch.testing.assert_close(out[3:], o2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse[:, 3:], l2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["dsv4", "posinf", "neginf", "mixed"])
@pytest.mark.parametrize("mode", ["key0", "null"])
def test_empty_rows_exact_zero_and_posinf_lse(kind, mode):
    # Segments: q with no keys, and a window that leaves early rows empty (Sq > Sk, right = 0).
    case = helpers.make_window_case([3, 6], [0, 2], hq=3, hk=1, d=16, dtype=torch.bfloat16)
    out, lse = _run_window(case, (0, 0), False, helpers.sinks_like(3, kind), mode, torch.bfloat16)
    # rows 0-2: no keys; segment 2 row i sees key i - 4 only: rows 0..3 empty.
    empty = [0, 1, 2, 3, 4, 5, 6]
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    assert torch.isposinf(lse[:, empty]).all()
    assert not torch.isnan(out).any()


def test_zero_tokens():
    case = helpers.make_window_case([0, 0], [0, 0], hq=2, hk=1, d=16)
    out, lse = _run_window(case, (-1, -1), False, helpers.sinks_like(2, "mimo"), "key0", torch.bfloat16)
    assert out.shape == (0, 2, 16) and lse.shape == (2, 0)


def test_bf16_baseline_error_has_teeth():
    """The low-precision baseline must carry a real bf16-sized error, else 2x of it means nothing."""
    case = helpers.make_window_case([128, 200], hq=4, hk=2, d=64)
    sinks = helpers.sinks_like(4, "dsv4")
    for mode in ("key0", "null"):
        o64, l64 = _run_window(case, (32, 32), False, sinks, mode)
        ob, lb = _run_window(case, (32, 32), False, sinks, mode, torch.bfloat16, compute_dtype=torch.bfloat16)
        err = helpers.rel_l2(ob, o64)
        assert 1e-3 <= err <= 1e-2, err
        # A float32-compute result returned in bf16 passes the rule (what a good kernel does).
        o32, l32 = _run_window(case, (32, 32), False, sinks, mode, torch.bfloat16)
        helpers.check_close(o32, o64, ob, f"window {mode} out")
        helpers.check_close(l32, l64, lb, f"window {mode} lse")


# ----------------------------------------------------------------------------- sparse MLA prefill

def dense_sparse(q, kv, indices, scale, d_v, sinks, topk_length):
    """Multiplicity matrix cnt[i, j] = how many valid positions of row i select key j."""
    sq, hq, _ = q.shape
    skv = kv.shape[0]
    idx = indices.reshape(sq, -1).long()
    pos = torch.arange(idx.shape[1])[None, :]
    ok = (idx >= 0) & (idx < skv)
    if topk_length is not None:
        ok &= pos < topk_length.long()[:, None]
    cnt = torch.zeros(sq, skv + 1, dtype=F64)
    cnt.scatter_add_(1, torch.where(ok, idx, torch.full_like(idx, skv)), torch.ones_like(idx, dtype=F64))
    cnt = cnt[:, :skv]                                                # [Sq, Skv]
    kvd = kv.reshape(skv, -1).double()
    x = scale * torch.einsum("shd,kd->shk", q.double(), kvd)          # [Sq, Hq, Skv]
    seen = (cnt > 0)[:, None, :]
    max_logits = x.masked_fill(~seen, -INF).amax(dim=-1)
    has = seen.any(dim=-1)                                            # [Sq, 1]
    m = torch.where(has, max_logits, torch.zeros_like(max_logits))
    w = cnt[:, None, :] * torch.exp(x - m[..., None])
    denom = w.sum(-1)
    lse = torch.where(has, m + torch.log(denom), torch.full_like(m, INF))
    s = torch.zeros(hq, dtype=F64) if sinks is None else sinks.double()
    sink_mass = torch.where(torch.isneginf(s), torch.zeros_like(s), torch.exp(torch.clamp(s, max=700)))
    extra = sink_mass[None, :] * torch.exp(-m) if sinks is not None else torch.zeros_like(m)
    out = (w @ kvd[:, :d_v]) / (denom + extra)[..., None]
    if sinks is not None:
        out = torch.where(torch.isposinf(s)[None, :, None], torch.zeros_like(out), out)
    out = torch.where(has[..., None], out, torch.zeros_like(out))
    return out, max_logits, lse


@pytest.mark.parametrize("kind", [None, "dsv4", "large", "neginf", "posinf", "mixed"])
@pytest.mark.parametrize("d_qk,hq", [(512, 3), (576, 16)])
@pytest.mark.parametrize("with_topk_length", [False, True])
def test_sparse_prefill_vs_dense(kind, d_qk, hq, with_topk_length):
    case = helpers.make_sparse_prefill_case(12, 40, hq, d_qk, 24, invalid_frac=0.2)
    case["indices"][0] = -1                                     # all-invalid row
    case["indices"][1, 0, :] = 40                               # all >= Skv
    case["indices"][2, 0, :] = 7                                # one key, 24 times
    sinks = None if kind is None else helpers.sinks_like(hq, kind)
    topk_length = torch.randint(0, 25, (12,), dtype=torch.int32) if with_topk_length else None
    if topk_length is not None:
        topk_length[3] = 0
    scale = d_qk ** -0.5
    q, kv = case["q"].double(), case["kv"].double()
    out, mx, lse = reference.sparse_mla_prefill(q, kv, case["indices"], scale, 512, sinks, topk_length)
    e_out, e_mx, e_lse = dense_sparse(q, kv, case["indices"], scale, 512, sinks, topk_length)
    torch.testing.assert_close(out, e_out, rtol=1e-10, atol=1e-10)
    assert torch.equal(torch.isinf(mx), torch.isinf(e_mx)) and torch.equal(torch.isinf(lse), torch.isinf(e_lse))
    torch.testing.assert_close(mx, e_mx, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, e_lse, rtol=1e-10, atol=1e-10)
    for row in [0, 1]:
        assert torch.equal(out[row], torch.zeros_like(out[row]))
        assert torch.isposinf(lse[row]).all() and torch.isneginf(mx[row]).all()


def test_sparse_prefill_neginf_sink_bitwise():
    case = helpers.make_sparse_prefill_case(6, 30, 4, 512, 16)
    base = reference.sparse_mla_prefill(case["q"], case["kv"], case["indices"], 0.05, 512)
    neg = reference.sparse_mla_prefill(case["q"], case["kv"], case["indices"], 0.05, 512,
                                       helpers.sinks_like(4, "neginf"))
    assert all(torch.equal(a, b) for a, b in zip(base, neg))


def test_sparse_prefill_bf16_baseline_error_has_teeth():
    case = helpers.make_sparse_prefill_case(32, 256, 16, 576, 128)
    sinks = helpers.sinks_like(16, "dsv4")
    scale = 576 ** -0.5
    o64 = reference.sparse_mla_prefill(case["q"].double(), case["kv"].double(), case["indices"], scale, 512, sinks)[0]
    ob = reference.sparse_mla_prefill(case["q"], case["kv"], case["indices"], scale, 512, sinks,
                                      compute_dtype=torch.bfloat16)[0]
    assert 1e-3 <= helpers.rel_l2(ob, o64) <= 1e-2


# ----------------------------------------------------------------------------- sparse MLA decode

def _as_prefill(case, num_main_slots):
    """Translate a decode case into one prefill call over the concatenated unpacked pools."""
    layout = case["layout"]
    b, sq, topk = case["indices"].shape
    pos = torch.arange(topk)

    def clean(idx, n_slots, topk_length, offset):
        ok = (idx >= 0) & (idx < n_slots)
        if topk_length is not None:
            ok &= pos[: idx.shape[-1]][None, None, :] < topk_length.long()[:, None, None]
        return torch.where(ok, idx.long() + offset, torch.full_like(idx.long(), -1))

    kv = kv_cache.unpack_kv_cache(case["kv_cache"], layout)
    idx = clean(case["indices"], num_main_slots, case["topk_length"], 0)
    if case["extra_kv_cache"] is not None:
        ekv = kv_cache.unpack_kv_cache(case["extra_kv_cache"], layout)
        n_extra = ekv.shape[0]
        idx = torch.cat([idx, clean(case["extra_indices"], n_extra, case["extra_topk_length"], kv.shape[0])], dim=-1)
        kv = torch.cat([kv, ekv])
    return kv.unsqueeze(1), idx.reshape(b * sq, 1, -1).to(torch.int32)


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("extra", [False, True])
@pytest.mark.parametrize("kind", [None, "dsv4", "mixed"])
@pytest.mark.parametrize("lengths", [False, True])
def test_decode_vs_prefill_on_unpacked_cache(layout, extra, kind, lengths):
    b, sq, hq = 3, 2, 4
    case = helpers.make_sparse_decode_case(b, sq, hq, layout, 20, 150, block_size=16, extra=extra)
    case["indices"][1, 0] = -1                                   # an all-invalid main row
    if lengths:
        case["topk_length"] = torch.tensor([20, 5, 0], dtype=torch.int32)
        if extra:
            case["extra_topk_length"] = torch.tensor([0, 3, 11], dtype=torch.int32)
    sinks = None if kind is None else helpers.sinks_like(hq, kind)
    d_qk = kv_cache.token_dim(layout)
    scale = d_qk ** -0.5
    num_slots = case["kv_cache"].shape[0] * case["kv_cache"].shape[1]
    kv, idx = _as_prefill(case, num_slots)
    q64 = case["q"].double()
    args = {k: v for k, v in case.items() if k != "q"}
    out, lse = reference.sparse_mla_decode(q64, sm_scale=scale, attn_sink=sinks, **args)
    p_out, _, p_lse = reference.sparse_mla_prefill(q64.reshape(b * sq, hq, d_qk), kv.double(), idx, scale, 512, sinks)
    torch.testing.assert_close(out, p_out.reshape(b, sq, hq, 512), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, p_lse.reshape(b, sq, hq).transpose(1, 2), rtol=1e-10, atol=1e-10)
    assert out.shape == (b, sq, hq, 512) and lse.shape == (b, hq, sq)


def test_decode_all_invalid_rows():
    case = helpers.make_sparse_decode_case(2, 1, 4, "v4", 8, 64)
    case["indices"][:] = -1
    case["indices"][1, 0, :4] = 10 ** 6                           # >= num_blocks * block_size
    out, lse = reference.sparse_mla_decode(sm_scale=0.04, attn_sink=helpers.sinks_like(4, "mixed"), **case)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isposinf(lse).all()


def test_row_chunking_does_not_change_results(monkeypatch):
    """Long cases are processed in query-row chunks; forcing tiny chunks must give the same results
    (close, not bitwise: a BLAS may block a matmul differently for a different row count). The
    window case keeps bf16 tensors but computes in float64: in float32 a last-bit difference of
    the sum could flip the bf16 rounding of an output (seen once in CI: one element, one ulp)."""
    case = helpers.make_window_case([9, 14], [11, 14], hq=4, hk=2, d=16)
    sinks = helpers.sinks_like(4, "mixed")
    whole = _run_window(case, (3, 3), False, sinks, "key0", torch.bfloat16, compute_dtype=F64)
    pre = helpers.make_sparse_prefill_case(9, 30, 4, 512, 12)
    whole_p = reference.sparse_mla_prefill(pre["q"], pre["kv"], pre["indices"], 0.05, 512, sinks)
    monkeypatch.setattr(reference, "_rows_per_chunk", lambda n_keys, d: 2)
    chunked = _run_window(case, (3, 3), False, sinks, "key0", torch.bfloat16, compute_dtype=F64)
    chunked_p = reference.sparse_mla_prefill(pre["q"], pre["kv"], pre["indices"], 0.05, 512, sinks)
    for a, b in list(zip(whole, chunked)) + list(zip(whole_p, chunked_p)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
