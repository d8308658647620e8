"""Pack and unpack the byte-exact FP8 paged KV caches (docs/DESIGN.md §2.3; the byte layouts
themselves are spelled in sinkops/kv_layout.py, and only there).

Caches are uint8 views ``[num_blocks, block_size, 1, bytes_per_token]`` whose ``stride(0)`` is the
block stride in bytes, which may exceed ``block_size * bytes_per_token``: always read through it.
"""
from __future__ import annotations

import torch

from sinkops import kv_layout
from sinkops.kv_layout import ROPE_DIM

_E4M3_MAX = 448.0
# Scale rule: the smallest power of two s with amax / s <= 464. 464 is the midpoint between 448
# (the largest e4m3 value) and the next step 480, so values in (448, 464] saturate to 448 exactly
# as round-to-nearest would. Using 464 rather than 448 makes pack(unpack(pack(x))) == pack(x):
# with 448, an amax/s in (224, 232) rounds down to 224 and the repack would pick s/2.
_SCALE_TARGET = 464.0


def bytes_per_token(layout: str) -> int:
    return kv_layout.get(layout).bytes_per_token


def token_dim(layout: str) -> int:
    """Channels of one dequantized token (= Dqk of q)."""
    return kv_layout.get(layout).d_qk


def block_stride_bytes(layout: str, block_size: int, spare_rows: int = 0) -> int:
    """Bytes from one block to the next as pack_kv_cache allocates them (kv_layout.KvLayout.block_stride)."""
    return kv_layout.get(layout).block_stride(block_size, spare_rows)


def _power_of_two_exponent(amax: torch.Tensor) -> torch.Tensor:
    """int64 e with 2^e the smallest power of two such that amax / 2^e <= 464 (e = 0 for amax = 0),
    clamped to [-127, 127] so it fits an e8m0 byte. Exact: uses frexp, no log rounding."""
    ratio = amax.to(torch.float64) / _SCALE_TARGET
    mantissa, exponent = torch.frexp(ratio)        # ratio = mantissa * 2^exponent, mantissa in [0.5, 1)
    e = exponent.long() - (mantissa == 0.5).long()  # exact powers of two need no extra step
    e = torch.where(amax > 0, e, torch.zeros_like(e))
    return e.clamp(-127, 127)


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2^e as float32, exact (float64 ldexp, then a representable cast, subnormals included)."""
    return torch.ldexp(torch.ones_like(e, dtype=torch.float64), e).to(torch.float32)


def _quantize_nope(nope: torch.Tensor, group: int):
    """nope [N, n] -> (e4m3 bytes uint8 [N, n], exponents int64 [N, n // group])."""
    n_tok, n = nope.shape
    x = nope.to(torch.float32).reshape(n_tok, n // group, group)
    e = _power_of_two_exponent(x.abs().amax(dim=-1))
    scaled = (x / _pow2(e).unsqueeze(-1)).clamp(-_E4M3_MAX, _E4M3_MAX)  # division by 2^e is exact
    fp8 = scaled.to(torch.float8_e4m3fn).reshape(n_tok, n)
    return fp8.view(torch.uint8), e


def _bf16_bytes(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).contiguous().view(torch.uint8)


def pack_kv_cache(latent: torch.Tensor, layout: str, block_size: int = 64, spare_rows: int = 0) -> torch.Tensor:
    """latent bf16 [N, token_dim(layout)] -> uint8 view [num_blocks, block_size, 1, bytes_per_token]
    with stride(0) = block_stride_bytes(layout, block_size, spare_rows). Token n goes to slot n
    (block n // block_size, offset n % block_size); unused slots and padding are zero bytes."""
    lay = kv_layout.get(layout)
    if latent.dim() != 2 or latent.shape[1] != lay.d_qk:
        raise ValueError(f"latent must be [N, {lay.d_qk}] for layout {layout!r}, got {tuple(latent.shape)}")
    n_tok = latent.shape[0]
    nope, ts = lay.nope_dim, lay.token_stride
    stride = lay.block_stride(block_size, spare_rows)
    num_blocks = -(-n_tok // block_size)
    latent = latent.to(torch.bfloat16)
    fp8, e = _quantize_nope(latent[:, :nope], lay.scale_group)
    rope = _bf16_bytes(latent[:, nope:])                                      # [N, 2 * ROPE_DIM]

    # Pad the token list to whole blocks so every token has a (block, offset) row.
    n_pad = num_blocks * block_size
    buf = torch.zeros(num_blocks, stride, dtype=torch.uint8, device=latent.device)
    tok = torch.zeros(n_pad, ts, dtype=torch.uint8, device=latent.device)
    tok[:n_tok, :nope] = fp8
    tok[:n_tok, lay.rope_offset:lay.rope_offset + 2 * ROPE_DIM] = rope
    if lay.scales_in_token:  # fp32 scales, little endian, inside the token
        tok[:n_tok, lay.scale_offset:lay.scale_offset + 4 * lay.scales_per_token] = \
            _pow2(e).contiguous().view(torch.uint8)
    buf[:, :block_size * ts] = tok.reshape(num_blocks, block_size * ts)
    if not lay.scales_in_token:  # e8m0 bytes after the block's tokens; the last byte of each is padding
        scales = torch.zeros(n_pad, lay.scale_stride, dtype=torch.uint8, device=latent.device)
        scales[:n_tok, :lay.scales_per_token] = (e + 127).to(torch.uint8)
        buf[:, block_size * ts:block_size * (ts + lay.scale_stride)] = scales.reshape(num_blocks, -1)
    bpt = lay.bytes_per_token
    return torch.as_strided(buf, (num_blocks, block_size, 1, bpt), (stride, bpt, bpt, 1))


def _block_bytes(kv_cache: torch.Tensor, lay: kv_layout.KvLayout) -> torch.Tensor:
    """uint8 [num_blocks, block_size * bytes_per_token]: each block's bytes, read through stride(0)."""
    if kv_cache.element_size() != 1:
        raise ValueError(f"kv_cache must be a 1-byte (uint8 / e4m3) view, got {kv_cache.dtype}")
    kv = kv_cache if kv_cache.dtype == torch.uint8 else kv_cache.view(torch.uint8)
    num_blocks, block_size, _, bpt = kv.shape
    if bpt != lay.bytes_per_token:
        raise ValueError(f"kv_cache last dim must be {lay.bytes_per_token} for {lay.name!r}, got {bpt}")
    return torch.as_strided(kv, (num_blocks, block_size * bpt), (kv.stride(0), 1))


def dequantize_tokens(kv_cache: torch.Tensor, layout: str, slots: torch.Tensor) -> torch.Tensor:
    """float32 [len(slots), token_dim(layout)]: the dequantized tokens at the given slots
    (slot = block * block_size + offset). Slots outside [0, num_blocks*block_size) give zero rows."""
    lay = kv_layout.get(layout)
    blocks = _block_bytes(kv_cache, lay)
    num_blocks, block_size = kv_cache.shape[0], kv_cache.shape[1]
    slots = slots.reshape(-1).long().to(blocks.device)
    valid = (slots >= 0) & (slots < num_blocks * block_size)
    slots = torch.where(valid, slots, torch.zeros_like(slots))
    blk, off = (slots // block_size).unsqueeze(1), (slots % block_size).unsqueeze(1)
    ar = lambda n: torch.arange(n, device=blocks.device).unsqueeze(0)  # noqa: E731
    ts, nope_dim, groups = lay.token_stride, lay.nope_dim, lay.scales_per_token
    tok = blocks[blk, off * ts + ar(ts)]                                       # [n, token_stride]
    nope = tok[:, :nope_dim].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
    if lay.scales_in_token:
        scale = tok[:, lay.scale_offset:lay.scale_offset + 4 * groups].contiguous().view(torch.float32)
    else:
        e8m0 = blocks[blk, block_size * ts + off * lay.scale_stride + ar(groups)]
        scale = _pow2(e8m0.long() - 127)
    rope_bytes = tok[:, lay.rope_offset:lay.rope_offset + 2 * ROPE_DIM]
    n = nope.shape[0]
    nope = (nope.reshape(n, groups, lay.scale_group) * scale.unsqueeze(-1)).reshape(n, -1)
    rope = rope_bytes.contiguous().view(torch.bfloat16).to(torch.float32)
    out = torch.cat([nope, rope], dim=1)
    return torch.where(valid.unsqueeze(1), out, torch.zeros_like(out))


def unpack_kv_cache(kv_cache: torch.Tensor, layout: str) -> torch.Tensor:
    """bf16 [num_blocks * block_size, token_dim(layout)]: every slot dequantized (exact in bf16 for
    power-of-two scales, so pack_kv_cache(unpack_kv_cache(c)) reproduces c's token bytes)."""
    num_slots = kv_cache.shape[0] * kv_cache.shape[1]
    slots = torch.arange(num_slots, device=kv_cache.device)
    return dequantize_tokens(kv_cache, layout, slots).to(torch.bfloat16)
