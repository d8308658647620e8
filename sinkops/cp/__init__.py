"""Context parallelism (DESIGN.md §2.4): load-balanced layout helpers (`layout`), the sequence
all-gather and halo exchange (`comm`), and CP-aware attention ops (`ops`)."""
from sinkops.cp.comm import all_gather_seq, exchange_halo
from sinkops.cp.layout import (document_ids, gather_order, load_balanced_slots,
                               order_by_positions, padded_length, restore_by_positions,
                               shard_sequence, window_halo_plan)
from sinkops.cp.ops import sparse_mla_prefill, window_attention, window_attention_from_halo

__all__ = [
    "all_gather_seq", "document_ids", "exchange_halo", "gather_order", "load_balanced_slots",
    "order_by_positions", "padded_length", "restore_by_positions", "shard_sequence",
    "sparse_mla_prefill", "window_attention", "window_attention_from_halo", "window_halo_plan",
]
