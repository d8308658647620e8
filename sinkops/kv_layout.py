"""Byte layouts of the paged FP8 KV caches (docs/DESIGN.md §2.3): the only place the Python side
spells them (the C++ side: csrc/include/sinkops/kv_cache_layout.h). Byte-exact with the DeepSeek
serving stacks.

``"v32"`` (DeepSeek-V3.2), 656 B per token, tokens ``656`` B apart inside a block:
    [0, 512)    512 x e4m3 nope values
    [512, 528)  4 x float32 scale, one per 128 nope values
    [528, 656)  64 x bf16 rope values
    dequantized token = 576 channels (512 nope * scale, 64 rope); values = the 512 nope channels.

``"v4"`` (DeepSeek-V4), per block of ``block_size`` tokens:
    [t*576, t*576 + 448)              448 x e4m3 nope values of token t
    [t*576 + 448, t*576 + 576)        64 x bf16 rope values of token t
    [bs*576 + t*8, bs*576 + t*8 + 7)  7 e8m0 scales of token t (scale = 2^(byte-127)), one per 64 values
    [bs*576 + t*8 + 7]                pad byte (0)
    block byte size padded up to a multiple of 576 by the serving stacks; dequantized token =
    512 channels, all of them values.

Caches are uint8 views ``[num_blocks, block_size, 1, bytes_per_token]`` whose ``stride(0)`` is the
block stride in bytes, which may exceed ``block_size * bytes_per_token``: always read through it.
"""
from __future__ import annotations

from dataclasses import dataclass

ROPE_DIM = 64
VALUE_DIM = 512  # d_v of sparse MLA: the first 512 dequantized channels


@dataclass(frozen=True)
class KvLayout:
    name: str
    id: int                  # sinkops::KvCacheLayout
    d_qk: int                # dequantized channels (= q's head dim)
    nope_dim: int            # e4m3 channels; the rest (ROPE_DIM) are bf16
    token_stride: int        # bytes from one token to the next inside a block
    bytes_per_token: int     # last dim of the cache view (v4: 576 data + 8 scale bytes)
    rope_offset: int         # byte offset of the bf16 rope inside a token
    scale_group: int         # e4m3 values per scale
    scales_in_token: bool    # v32: fp32 scales inside each token; v4: e8m0 bytes after the block's tokens
    scale_offset: int        # v32: byte offset of the fp32 scales inside a token (v4: 0, unused)
    scale_stride: int        # v4: bytes of scales per token (7 e8m0 + 1 pad); v32: 4 (one fp32)

    @property
    def scales_per_token(self) -> int:
        return self.nope_dim // self.scale_group

    def block_stride(self, block_size: int, spare_rows: int = 0) -> int:
        """Bytes from one block to the next as pack_kv_cache allocates them: v4 rounds
        block_size * 584 up to a multiple of 576 (plus spare_rows * 576); v32 is
        (block_size + spare_rows) * 656."""
        if self.name == "v4":
            return -(-block_size * self.bytes_per_token // self.token_stride) * self.token_stride + \
                spare_rows * self.token_stride
        return (block_size + spare_rows) * self.bytes_per_token


V4 = KvLayout("v4", 0, d_qk=512, nope_dim=448, token_stride=576, bytes_per_token=584, rope_offset=448,
              scale_group=64, scales_in_token=False, scale_offset=0, scale_stride=8)
V32 = KvLayout("v32", 1, d_qk=576, nope_dim=512, token_stride=656, bytes_per_token=656, rope_offset=528,
               scale_group=128, scales_in_token=True, scale_offset=512, scale_stride=4)
LAYOUTS = {"v4": V4, "v32": V32}


def get(layout: str) -> KvLayout:
    try:
        return LAYOUTS[layout]
    except (KeyError, TypeError):
        raise ValueError(f"layout: expected one of {tuple(LAYOUTS)}, got {layout!r}") from None
