"""Triton fallbacks, one module per op family (same backend interface as sinkops.cuda)."""
