"""Fill the compiled cores' params structs (csrc/include/sinkops/*_params.h) from op args.

Each struct has STATIC fields (the same for every call with one signature: filled once into a
template the backend keeps) and CALL fields (per launch: one tuple in the struct's CALL_FIELDS
order). The field names come from the C++ headers through the bindings: `template()` refuses a
dict whose keys are not exactly the struct's STATIC_FIELDS, and `check_call_fields()` compares
each *_CALL tuple below with CALL_FIELDS, so a field added to a header fails loudly here until it
is filled. Shared by the CUDA backend (sinkops._C), its CPU emulator and the SYCL backend.
"""
from __future__ import annotations

import torch

from sinkops.ops._common import SinkMode

DTYPE_IDS = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}  # sinkops::DType


def check_module(mod) -> None:
    """The compiled module's enums must be the values this package uses."""
    want = {"DType": {"float16": 0, "bfloat16": 1, "float32": 2},
            "SinkMode": {m.name.lower(): int(m) for m in SinkMode},
            "KvCacheLayout": {"v4": 0, "v32": 1}}
    got = {k: dict(v) for k, v in dict(mod.ENUMS).items()}
    if got != want:
        raise RuntimeError(f"{mod.__name__}: enum values {got} differ from sinkops' {want}; rebuild it")


def template(cls, static: dict):
    """A params struct with every STATIC field set from `static` (names as in STATIC_FIELDS,
    "pool.block_size" for nested ones); the CALL fields keep their defaults."""
    want = set(cls.STATIC_FIELDS)
    if set(static) != want:
        raise RuntimeError(f"{cls.__name__}: static fields filled {sorted(set(static) - want)} extra, "
                           f"{sorted(want - set(static))} missing (csrc/include/sinkops/ changed?)")
    p = cls()
    for name, value in static.items():
        obj, _, leaf = name.rpartition(".")
        setattr(getattr(p, obj) if obj else p, leaf, value)
    return p


def check_call_fields(cls, names: tuple) -> None:
    if tuple(cls.CALL_FIELDS) != names:
        raise RuntimeError(f"{cls.__name__}: per-call fields are {tuple(cls.CALL_FIELDS)} in the header, "
                           f"sinkops/_native.py fills {names}")


def _ptr(t) -> int:
    return 0 if t is None else t.data_ptr()


# ---------------------------------------------------------------------------------- window

def window_attention_static(a) -> dict:
    q, k, v, out = a.q, a.k, a.v, a.out
    return {
        "dtype": DTYPE_IDS[q.dtype],
        "q_row_stride": q.stride(0), "q_head_stride": q.stride(1),
        "k_row_stride": k.stride(0), "k_head_stride": k.stride(1),
        "v_row_stride": v.stride(0), "v_head_stride": v.stride(1),
        "out_row_stride": out.stride(0), "out_head_stride": out.stride(1),
        "h_q": q.shape[1], "h_k": k.shape[1], "d": q.shape[2], "d_v": v.shape[2],
        "window_left": a.window_left, "window_right": a.window_right,
        "scale": a.scale, "sink_mode": int(a.sink_mode),
    }


WINDOW_ATTENTION_CALL = ("q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k", "sinks", "lse_head_stride",
                         "total_q", "total_k", "batch", "max_seqlen_q", "max_seqlen_k")


def window_attention_call(a) -> tuple:
    lse = a.lse
    return (a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(), a.out.data_ptr(), _ptr(lse),
            a.cu_seqlens_q.data_ptr(), a.cu_seqlens_k.data_ptr(), _ptr(a.sinks),
            0 if lse is None else lse.stride(0), a.total_q, a.total_k, a.batch, a.max_seqlen_q, a.max_seqlen_k)


def window_attention_backward_static(a) -> dict:
    return {**window_attention_static(a),
            "dout_row_stride": a.dout.stride(0), "dout_head_stride": a.dout.stride(1),
            "dq_row_stride": a.dq.stride(0), "dq_head_stride": a.dq.stride(1),
            "dk_row_stride": a.dk.stride(0), "dk_head_stride": a.dk.stride(1),
            "dv_row_stride": a.dv.stride(0), "dv_head_stride": a.dv.stride(1)}


WINDOW_ATTENTION_BACKWARD_CALL = WINDOW_ATTENTION_CALL + ("dout", "dlse", "dlse_head_stride", "dq", "dk", "dv",
                                                          "row_r", "row_delta", "dsink_rows")


def window_attention_backward_call(a, row_r, row_delta, dsink_rows) -> tuple:
    """The row workspaces ([h_q, total_q] float32, contiguous) come from the backend's launcher."""
    dlse = a.dlse
    return window_attention_call(a) + (a.dout.data_ptr(), _ptr(dlse), 0 if dlse is None else dlse.stride(0),
                                       a.dq.data_ptr(), a.dk.data_ptr(), a.dv.data_ptr(), row_r.data_ptr(),
                                       row_delta.data_ptr(), _ptr(dsink_rows))


# ---------------------------------------------------------------------------------- prefill

def sparse_mla_prefill_static(a) -> dict:
    q, kv, out = a.q, a.kv, a.out
    return {
        "q_row_stride": q.stride(0), "q_head_stride": q.stride(1), "kv_row_stride": kv.stride(0),
        "indices_row_stride": a.indices.stride(0),
        "out_row_stride": out.stride(0), "out_head_stride": out.stride(1),
        "h_q": q.shape[1], "d_qk": q.shape[2], "d_v": out.shape[2], "topk": a.indices.shape[2],
        "sm_scale": a.scale,
    }


SPARSE_MLA_PREFILL_CALL = ("q", "kv", "indices", "topk_length", "attn_sink", "out", "max_logits", "lse", "s_q", "s_kv")


def sparse_mla_prefill_call(a) -> tuple:
    return (a.q.data_ptr(), a.kv.data_ptr(), a.indices.data_ptr(), _ptr(a.topk_length), _ptr(a.attn_sink),
            a.out.data_ptr(), _ptr(a.max_logits), a.lse.data_ptr(), a.s_q, a.kv.shape[0])


def stage_topk(topk: int) -> int:
    """The backward's P / dX stage rows: topk rounded up to 8 entries (16-byte rows)."""
    return (topk + 7) // 8 * 8


def sparse_mla_backward_static(a) -> dict:
    return {**sparse_mla_prefill_static(a), "stage_topk": stage_topk(a.indices.shape[2]),
            "deterministic": int(bool(a.deterministic)),
            "dout_row_stride": a.dout.stride(0), "dout_head_stride": a.dout.stride(1),
            "dq_row_stride": a.dq.stride(0), "dq_head_stride": a.dq.stride(1)}


SPARSE_MLA_BACKWARD_CALL = SPARSE_MLA_PREFILL_CALL + ("dout", "dlse", "dq", "dsink_rows", "dkv_acc", "det_stage",
                                                      "p_stage", "dx_stage", "s0", "chunk_rows", "dkv_query_group")


def sparse_mla_backward_call(a, dsink_rows, dkv_acc, det_stage, p_stage, dx_stage, s0, n, query_group) -> tuple:
    """One chunk of queries [s0, s0 + n); the workspaces come from the backend's launcher."""
    return sparse_mla_prefill_call(a) + (a.dout.data_ptr(), _ptr(a.dlse), a.dq.data_ptr(), _ptr(dsink_rows),
                                         _ptr(dkv_acc), _ptr(det_stage), p_stage.data_ptr(), dx_stage.data_ptr(),
                                         s0, n, query_group)


# ---------------------------------------------------------------------------------- decode

def _pool_static(prefix, cache, indices) -> dict:
    if cache is None:  # no extra pool: topk 0 keeps the kernels out of it
        return {f"{prefix}.block_stride": 0, f"{prefix}.block_size": 0, f"{prefix}.indices_batch_stride": 0,
                f"{prefix}.indices_row_stride": 0, f"{prefix}.topk": 0}
    return {f"{prefix}.block_stride": cache.stride(0) * cache.element_size(), f"{prefix}.block_size": cache.shape[1],
            f"{prefix}.indices_batch_stride": indices.stride(0), f"{prefix}.indices_row_stride": indices.stride(1),
            f"{prefix}.topk": indices.shape[2]}


def sparse_mla_decode_static(a) -> dict:
    q = a.q
    return {
        "layout": a.layout.id,
        "q_batch_stride": q.stride(0), "q_row_stride": q.stride(1), "q_head_stride": q.stride(2),
        **_pool_static("pool", a.kv_cache, a.indices),
        **_pool_static("extra", a.extra_kv_cache, a.extra_indices),
        "s_q": q.shape[1], "h_q": q.shape[2], "d_qk": q.shape[3], "d_v": a.out.shape[3], "sm_scale": a.scale,
    }


SPARSE_MLA_DECODE_CALL = ("q", "pool.cache", "pool.num_blocks", "pool.indices", "pool.topk_length",
                          "extra.cache", "extra.num_blocks", "extra.indices", "extra.topk_length",
                          "attn_sink", "out", "lse", "b", "num_splits", "tiles_per_split", "workspace",
                          "workspace_bytes")


def sparse_mla_decode_call(a, num_splits, tiles_per_split, workspace, workspace_bytes) -> tuple:
    x = a.extra_kv_cache
    return (a.q.data_ptr(), a.kv_cache.data_ptr(), a.kv_cache.shape[0], a.indices.data_ptr(), _ptr(a.topk_length),
            _ptr(x), 0 if x is None else x.shape[0], _ptr(a.extra_indices), _ptr(a.extra_topk_length),
            _ptr(a.attn_sink), a.out.data_ptr(), a.lse.data_ptr(), a.batch, num_splits, tiles_per_split,
            _ptr(workspace), workspace_bytes)


# ---------------------------------------------------------------------------------- launchers

_STATIC = {"window_attention": ("WindowAttentionParams", window_attention_static),
           "window_attention_backward": ("WindowAttentionBackwardParams", window_attention_backward_static),
           "sparse_mla_prefill": ("SparseMlaPrefillParams", sparse_mla_prefill_static),
           "sparse_mla_prefill_backward": ("SparseMlaBackwardParams", sparse_mla_backward_static),
           "sparse_mla_decode": ("SparseMlaDecodeParams", sparse_mla_decode_static)}


def check_all_call_fields(mod) -> None:
    check_module(mod)
    check_call_fields(mod.WindowAttentionParams, WINDOW_ATTENTION_CALL)
    check_call_fields(mod.WindowAttentionBackwardParams, WINDOW_ATTENTION_BACKWARD_CALL)
    check_call_fields(mod.SparseMlaPrefillParams, SPARSE_MLA_PREFILL_CALL)
    check_call_fields(mod.SparseMlaBackwardParams, SPARSE_MLA_BACKWARD_CALL)
    check_call_fields(mod.SparseMlaDecodeParams, SPARSE_MLA_DECODE_CALL)


def template_for(mod, a):
    """The params struct of `a`'s op with its STATIC fields filled from `a`."""
    struct, static = _STATIC[a.op]
    return template(getattr(mod, struct), static(a))


def launcher(mod, a, where, decode_plan=None):
    """A launcher for every call with `a`'s signature on compiled core `mod`:
    mod.<op>_fwd(template, call_fields(args), *where()). where() gives the backend's trailing
    arguments (CUDA: stream, device; SYCL: queue). decode_plan(template, batch) -> (num_splits,
    tiles_per_split, workspace bytes) gives the decode's split plan; without it the decode runs as
    one split (the SYCL kernels need none)."""
    tmpl = template_for(mod, a)
    if a.op == "window_attention_backward":
        return _window_backward_launcher(mod.window_attention_bwd, tmpl, a, where)
    if a.op == "sparse_mla_prefill_backward":
        return _sparse_backward_launcher(mod.sparse_mla_prefill_bwd, tmpl, a, where)
    fwd = getattr(mod, a.op + "_fwd")
    if a.op == "window_attention":
        def launch(a):
            fwd(tmpl, window_attention_call(a), *where())
    elif a.op == "sparse_mla_prefill":
        def launch(a):
            fwd(tmpl, sparse_mla_prefill_call(a), *where())
    elif decode_plan is None:
        def launch(a):
            fwd(tmpl, sparse_mla_decode_call(a, 1, 0, None, 0), *where())
    else:
        plans = {}  # batch size -> plan: decided by the compiled core, once per batch size

        def launch(a):
            plan = plans.get(a.batch)
            if plan is None:
                plan = plans[a.batch] = decode_plan(tmpl, a.batch)
            splits, tiles, nbytes = plan
            # Split-k scratch: its size depends on shapes only, so this stays capturable in a graph.
            ws = torch.empty(nbytes, dtype=torch.uint8, device=a.q.device) if nbytes else None
            fwd(tmpl, sparse_mla_decode_call(a, splits, tiles, ws, nbytes), *where())
    return launch


def _aligned(t):
    """The backward kernels copy 16-byte chunks: a view that starts mid-chunk is copied (same strides:
    the template's)."""
    return t if t.data_ptr() % 16 == 0 else t.new_empty_strided(t.shape, t.stride()).copy_(t)


def _window_backward_launcher(bwd, tmpl, a, where):
    """mod.window_attention_bwd(template, call fields, *where()) with the row workspaces it needs
    (r and delta, written by its dq kernel and read by its dk/dv kernel; each row's sink gradient,
    summed per head here in a fixed order: deterministic). The kernels write every element of the
    gradients and of the row workspaces, so nothing is zero-filled unless nothing attends."""
    hq = a.q.shape[1]

    def launch(a):
        if a.max_seqlen_q <= 0 or a.max_seqlen_k <= 0 or a.batch <= 0:
            a.zero_gradients()
            return
        a.q, a.k, a.v, a.out, a.dout = (_aligned(t) for t in (a.q, a.k, a.v, a.out, a.dout))
        rows = torch.empty(2 if a.dsinks is None else 3, hq, a.total_q, dtype=torch.float32, device=a.q.device)
        dsink_rows = None if a.dsinks is None else rows[2]
        bwd(tmpl, window_attention_backward_call(a, rows[0], rows[1], dsink_rows), *where())
        if dsink_rows is not None:
            torch.sum(dsink_rows, dim=1, out=a.dsinks)
    return launch


def _sparse_backward_launcher(bwd, tmpl, a, where):
    """mod.sparse_mla_prefill_bwd(template, call fields, *where()) per chunk of queries (P and dX
    staged in bf16 between its dq and dkv kernels, at most STAGE_BYTES a chunk: the Triton
    backward's scheme, sinkops/ops/prefill_backward.py), with its workspaces: the float32 key
    gradient sum (+ a row for invalid positions) copied into dkv at the end, each row's sink
    gradient summed per head here in a fixed order, and in deterministic mode the per-(query,
    position) key gradients summed in a fixed order after each chunk."""
    from sinkops.ops import prefill_backward as chunks
    hq, dqk, topk = a.q.shape[1], a.q.shape[2], a.indices.shape[2]
    deterministic = bool(a.deterministic)
    ld = stage_topk(topk)

    def launch(a):
        dev, sq, skv = a.q.device, a.q.shape[0], a.kv.shape[0]
        if topk == 0:  # no key is read: every gradient is 0 (the sink's too: every row is empty)
            a.dq.zero_()
            a.dkv.zero_()
            if a.d_attn_sink is not None:
                a.d_attn_sink.zero_()
            return
        a.q, a.kv, a.out, a.dout = (_aligned(t) for t in (a.q, a.kv, a.out, a.dout))
        rows = chunks.chunk_rows(sq, hq, topk, dqk, deterministic)
        dsink_rows = torch.empty(sq, hq, dtype=torch.float32, device=dev) if a.attn_sink is not None else None
        dkv_acc = torch.zeros(skv + 1, dqk, dtype=torch.float32, device=dev)
        p_stage = torch.empty(rows, hq, ld, dtype=torch.bfloat16, device=dev)
        dx_stage = torch.empty(rows, hq, ld, dtype=torch.bfloat16, device=dev)
        det = torch.empty(rows, topk, dqk, dtype=torch.float32, device=dev) if deterministic else None
        pos = torch.arange(topk, device=dev) if deterministic else None
        group = chunks.dkv_query_group(hq, dqk, a.dout.shape[-1])
        for s0 in range(0, sq, rows):
            n = min(rows, sq - s0)
            bwd(tmpl, sparse_mla_backward_call(a, dsink_rows, dkv_acc, det, p_stage, dx_stage, s0, n,
                                               group), *where())
            if deterministic:
                chunks.sum_staged_key_gradients(dkv_acc, det, a, s0, n, pos)
        a.dkv.copy_(dkv_acc[:skv].view(skv, 1, dqk))
        if dsink_rows is not None:
            torch.sum(dsink_rows, dim=0, out=a.d_attn_sink)
    return launch
