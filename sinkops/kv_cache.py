"""Byte-exact FP8 paged KV-cache layouts of the DeepSeek serving stacks (DESIGN.md §2.3).

``"v32"`` (DeepSeek-V3.2), 656 B per token, tokens at ``offset * 656`` inside a block:
    [0, 512)    512 x e4m3 nope values
    [512, 528)  4 x float32 scale, one per 128 nope values
    [528, 656)  64 x bf16 rope values (raw bytes)
    dequantized token = 576 channels (512 nope * scale, 64 rope); values = the 512 nope channels.

``"v4"`` (DeepSeek-V4), per block of ``block_size`` tokens:
    [t*576, t*576 + 448)              448 x e4m3 nope values of token t
    [t*576 + 448, t*576 + 576)        64 x bf16 rope values of token t
    [bs*576 + t*8, bs*576 + t*8 + 7)  7 e8m0 scales of token t (scale = 2^(byte-127)), one per 64 values
    [bs*576 + t*8 + 7]                pad byte (0)
    block byte size padded up to a multiple of 576; dequantized token = 512 channels, all of them values.

Caches are uint8 views ``[num_blocks, block_size, 1, bytes_per_token]`` whose ``stride(0)`` is the
block stride in bytes, which may exceed ``block_size * bytes_per_token``: always read through it.
"""
from __future__ import annotations

import torch

_LAYOUTS = ("v4", "v32")
_E4M3_MAX = 448.0
# Scale rule: the smallest power of two s with amax / s <= 464. 464 is the midpoint between 448
# (the largest e4m3 value) and the next step 480, so values in (448, 464] saturate to 448 exactly
# as round-to-nearest would. Using 464 rather than 448 makes pack(unpack(pack(x))) == pack(x):
# with 448, an amax/s in (224, 232) rounds down to 224 and the repack would pick s/2.
_SCALE_TARGET = 464.0
_ROPE_DIM = 64


def _check_layout(layout: str) -> None:
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be 'v4' or 'v32', got {layout!r}")


def bytes_per_token(layout: str) -> int:
    _check_layout(layout)
    return 584 if layout == "v4" else 656


def token_dim(layout: str) -> int:
    """Channels of one dequantized token (= Dqk): v4 448 nope + 64 rope, v32 512 nope + 64 rope."""
    _check_layout(layout)
    return 512 if layout == "v4" else 576


def _nope_dim(layout: str) -> int:
    return token_dim(layout) - _ROPE_DIM


def _group_size(layout: str) -> int:
    return 64 if layout == "v4" else 128


def block_stride_bytes(layout: str, block_size: int, spare_rows: int = 0) -> int:
    """Bytes from one block to the next. v4: block_size*584 rounded up to a multiple of 576
    (plus spare_rows*576); v32: (block_size + spare_rows) * 656."""
    _check_layout(layout)
    if layout == "v4":
        return -(-block_size * 584 // 576) * 576 + spare_rows * 576
    return (block_size + spare_rows) * 656


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
    _check_layout(layout)
    dim = token_dim(layout)
    if latent.dim() != 2 or latent.shape[1] != dim:
        raise ValueError(f"latent must be [N, {dim}] for layout {layout!r}, got {tuple(latent.shape)}")
    n_tok = latent.shape[0]
    nope_dim = _nope_dim(layout)
    bpt = bytes_per_token(layout)
    stride = block_stride_bytes(layout, block_size, spare_rows)
    num_blocks = -(-n_tok // block_size)
    latent = latent.to(torch.bfloat16)
    fp8, e = _quantize_nope(latent[:, :nope_dim], _group_size(layout))
    rope = _bf16_bytes(latent[:, nope_dim:])                                  # [N, 128]

    # Pad the token list to whole blocks so every token has a (block, offset) row.
    n_pad = num_blocks * block_size
    buf = torch.zeros(num_blocks, stride, dtype=torch.uint8, device=latent.device)
    if layout == "v32":
        tok = torch.zeros(n_pad, bpt, dtype=torch.uint8, device=latent.device)
        tok[:n_tok, :512] = fp8
        tok[:n_tok, 512:528] = _pow2(e).contiguous().view(torch.uint8)       # 4 float32, little endian
        tok[:n_tok, 528:656] = rope
        buf[:, :block_size * bpt] = tok.reshape(num_blocks, block_size * bpt)
    else:
        data = torch.zeros(n_pad, 576, dtype=torch.uint8, device=latent.device)
        data[:n_tok, :448] = fp8
        data[:n_tok, 448:576] = rope
        scales = torch.zeros(n_pad, 8, dtype=torch.uint8, device=latent.device)
        scales[:n_tok, :7] = (e + 127).to(torch.uint8)                        # e8m0; byte 7 is padding
        buf[:, :block_size * 576] = data.reshape(num_blocks, block_size * 576)
        buf[:, block_size * 576:block_size * 584] = scales.reshape(num_blocks, block_size * 8)
    return torch.as_strided(buf, (num_blocks, block_size, 1, bpt), (stride, bpt, bpt, 1))


def _block_bytes(kv_cache: torch.Tensor, layout: str) -> torch.Tensor:
    """uint8 [num_blocks, block_size * bytes_per_token]: each block's bytes, read through stride(0)."""
    if kv_cache.element_size() != 1:
        raise ValueError(f"kv_cache must be a 1-byte (uint8 / e4m3) view, got {kv_cache.dtype}")
    kv = kv_cache if kv_cache.dtype == torch.uint8 else kv_cache.view(torch.uint8)
    num_blocks, block_size, _, bpt = kv.shape
    if bpt != bytes_per_token(layout):
        raise ValueError(f"kv_cache last dim must be {bytes_per_token(layout)} for {layout!r}, got {bpt}")
    return torch.as_strided(kv, (num_blocks, block_size * bpt), (kv.stride(0), 1))


def dequantize_tokens(kv_cache: torch.Tensor, layout: str, slots: torch.Tensor) -> torch.Tensor:
    """float32 [len(slots), token_dim(layout)]: the dequantized tokens at the given slots
    (slot = block * block_size + offset). Slots outside [0, num_blocks*block_size) give zero rows."""
    blocks = _block_bytes(kv_cache, layout)
    num_blocks, block_size = kv_cache.shape[0], kv_cache.shape[1]
    slots = slots.reshape(-1).long().to(blocks.device)
    valid = (slots >= 0) & (slots < num_blocks * block_size)
    slots = torch.where(valid, slots, torch.zeros_like(slots))
    blk, off = (slots // block_size).unsqueeze(1), (slots % block_size).unsqueeze(1)
    ar = lambda n: torch.arange(n, device=blocks.device).unsqueeze(0)  # noqa: E731
    if layout == "v32":
        tok = blocks[blk, off * 656 + ar(656)]                                 # [n, 656]
        nope = tok[:, :512].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
        scale = tok[:, 512:528].contiguous().view(torch.float32)              # [n, 4]
        rope_bytes = tok[:, 528:656]
        group = 128
    else:
        tok = blocks[blk, off * 576 + ar(576)]                                 # [n, 576]
        nope = tok[:, :448].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
        e8m0 = blocks[blk, block_size * 576 + off * 8 + ar(7)]                 # [n, 7]
        scale = _pow2(e8m0.long() - 127)
        rope_bytes = tok[:, 448:576]
        group = 64
    n = nope.shape[0]
    nope = (nope.reshape(n, -1, group) * scale.unsqueeze(-1)).reshape(n, -1)
    rope = rope_bytes.contiguous().view(torch.bfloat16).to(torch.float32)
    out = torch.cat([nope, rope], dim=1)
    return torch.where(valid.unsqueeze(1), out, torch.zeros_like(out))


def unpack_kv_cache(kv_cache: torch.Tensor, layout: str) -> torch.Tensor:
    """bf16 [num_blocks * block_size, token_dim(layout)]: every slot dequantized (exact in bf16 for
    power-of-two scales, so pack_kv_cache(unpack_kv_cache(c)) reproduces c's token bytes)."""
    num_slots = kv_cache.shape[0] * kv_cache.shape[1]
    slots = torch.arange(num_slots, device=kv_cache.device)
    return dequantize_tokens(kv_cache, layout, slots).to(torch.bfloat16)
