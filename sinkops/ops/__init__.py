"""The public ops (docs/DESIGN.md §2), also registered as torch.ops.sinkops.<name> and
torch.ops.sinkops.<name>_out. One module per op (ops/_common.py says what each holds)."""
from sinkops.ops._common import SinkMode, set_input_checks
from sinkops.ops.decode import SparseMlaDecodeArgs, sparse_mla_decode
from sinkops.ops.prefill import SparseMlaPrefillArgs, sparse_mla_prefill
from sinkops.ops.window import WindowAttentionArgs, window_attention
from sinkops.ops.prefill_backward import SparseMlaPrefillBackwardArgs  # noqa: E402  autograd of the forward ops
from sinkops.ops.window_backward import WindowAttentionBackwardArgs

__all__ = ["window_attention", "sparse_mla_prefill", "sparse_mla_decode", "set_input_checks", "SinkMode",
           "WindowAttentionArgs", "SparseMlaPrefillArgs", "SparseMlaDecodeArgs", "WindowAttentionBackwardArgs",
           "SparseMlaPrefillBackwardArgs"]
