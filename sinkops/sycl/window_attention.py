"""SYCL window attention: fills WindowAttentionParams, launches csrc/sycl/kernels/window_attention.hpp."""
from __future__ import annotations

from sinkops import _native
from sinkops.sycl._queue import module, queue_handle


def window_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         window_left, window_right, scale, sinks, sink_mode, out, lse) -> None:
    mod = module()
    p = _native.window_attention_params(mod, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                        max_seqlen_k, window_left, window_right, scale, sinks,
                                        sink_mode, out, lse)
    mod.window_attention_fwd(p, queue_handle(q.device))
