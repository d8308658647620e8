"""pytest plugin for device calls (`-p force_prefill_prefetch` with tools/prof on PYTHONPATH): every
Triton sparse MLA prefill tile takes PREFETCH=True (the gather one block ahead), so the whole
prefill suite checks that loop at every head count, topk and edge value, not only the tiles that
prefill_config gives it."""
import sinkops.triton.sparse_mla as SF

_default = SF.prefill_config
SF.prefill_config = lambda h: {**_default(h), "PREFETCH": True}
