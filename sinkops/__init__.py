"""sinkops: exact, fused attention with sinks on every backend.

Ops (also as torch.ops.sinkops.*): window_attention, sparse_mla_prefill, sparse_mla_decode.
Helpers: pack_kv_cache / unpack_kv_cache (byte-exact FP8 caches), merge_attention_states,
and sinkops.cp for context parallelism. See README.md and DESIGN.md.
"""
import importlib
import pkgutil

# Run from a source checkout (`python -m sinkops.demo` in the repo root), this in-tree package
# shadows the installed one and has no compiled modules; extending the package path lets
# `sinkops._C` / `sinkops._sycl` resolve to the installed build while the Python stays in-tree.
__path__ = pkgutil.extend_path(__path__, __name__)

__version__ = "0.1.0"

# Attributes resolve lazily so that `import sinkops.reference` (tests, benchmarks) does not
# pull in torch.library registration, and importing sinkops never needs a compiled module.
_EXPORTS = {
    "window_attention": "sinkops.ops",
    "sparse_mla_prefill": "sinkops.ops",
    "sparse_mla_decode": "sinkops.ops",
    "pack_kv_cache": "sinkops.kv_cache",
    "unpack_kv_cache": "sinkops.kv_cache",
    "merge_attention_states": "sinkops.merge",
}
__all__ = list(_EXPORTS)

from sinkops import ops as _ops  # noqa: E402,F401  registers torch.ops.sinkops.*


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in ("cp", "reference", "ops", "kv_cache", "merge"):
        return importlib.import_module(f"sinkops.{name}")
    raise AttributeError(f"module 'sinkops' has no attribute {name!r}")
