"""sinkops: exact, fused attention with sinks on every backend.

Ops (also torch.ops.sinkops.<op> and <op>_out): window_attention, sparse_mla_prefill,
sparse_mla_decode. Helpers: pack_kv_cache / unpack_kv_cache (byte-exact FP8 caches),
merge_attention_states, set_input_checks (the checked mode), build_info(), and sinkops.cp for
context parallelism. See README.md and docs/.

`import sinkops` (or any of its submodules, sinkops.reference included) registers the
torch.library ops; that takes no compiled module and no device.
"""
import importlib
import pkgutil

# Run from a source checkout (`python -m sinkops.demo` in the repo root), this in-tree package
# shadows the installed one and has no compiled modules; extending the package path lets
# `sinkops._C` / `sinkops._sycl` resolve to the installed build while the Python stays in-tree.
__path__ = pkgutil.extend_path(__path__, __name__)

__version__ = "0.2.0"

from sinkops.ops import (  # noqa: E402  registers torch.ops.sinkops.*
    set_input_checks, sparse_mla_decode, sparse_mla_prefill, window_attention)

_LAZY = {
    "pack_kv_cache": "sinkops.kv_cache",
    "unpack_kv_cache": "sinkops.kv_cache",
    "merge_attention_states": "sinkops.merge",
    "build_info": "sinkops.build_info",
}
__all__ = ["window_attention", "sparse_mla_prefill", "sparse_mla_decode", "set_input_checks", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ("cp", "reference", "kv_cache", "kv_layout", "merge", "backends"):
        return importlib.import_module(f"sinkops.{name}")
    raise AttributeError(f"module 'sinkops' has no attribute {name!r}")
