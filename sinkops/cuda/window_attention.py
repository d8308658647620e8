"""CUDA window attention: fills WindowAttentionParams, launches csrc/cuda/window_attention*.cu."""
from __future__ import annotations

from sinkops import _native
from sinkops.cuda import _C, device_guard, stream_handle


def window_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         window_left, window_right, scale, sinks, sink_mode, out, lse) -> None:
    p = _native.window_attention_params(_C, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                        max_seqlen_k, window_left, window_right, scale, sinks,
                                        sink_mode, out, lse)
    with device_guard(q.device):
        _C.window_attention_fwd(p, stream_handle(q.device))
