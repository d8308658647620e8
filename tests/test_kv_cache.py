"""FP8 paged KV-cache layouts: byte offsets checked by hand against raw storage, round trips,
power-of-two scales."""
import struct

import pytest
import torch

import helpers
from sinkops import kv_cache
from sinkops.kv_cache import block_stride_bytes, bytes_per_token, pack_kv_cache, unpack_kv_cache


def raw_bytes(cache):
    """The whole underlying allocation as a flat uint8 tensor, independent of the view's strides."""
    return torch.tensor([], dtype=torch.uint8).set_(cache.untyped_storage())


def block_rows(cache):
    return torch.as_strided(cache, (cache.shape[0], cache.stride(0)), (cache.stride(0), 1))


def random_latent(n, layout):
    return helpers.make_latent(n, layout, torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()))))


def test_sizes_and_strides():
    assert bytes_per_token("v4") == 584 and bytes_per_token("v32") == 656
    assert block_stride_bytes("v4", 64) == 37440                  # 64*584 = 37376 -> 65*576
    assert block_stride_bytes("v4", 1) == 1152
    assert block_stride_bytes("v32", 64) == 64 * 656
    assert block_stride_bytes("v32", 64, spare_rows=1) == 65 * 656
    for bs in (1, 2, 16, 64):
        assert block_stride_bytes("v4", bs) % 576 == 0 and block_stride_bytes("v4", bs) >= bs * 584
    c = pack_kv_cache(random_latent(70, "v4"), "v4", 64)
    assert c.shape == (2, 64, 1, 584) and c.stride(0) == 37440 and c.dtype == torch.uint8
    c = pack_kv_cache(random_latent(70, "v32"), "v32", 16, spare_rows=2)
    assert c.shape == (5, 16, 1, 656) and c.stride(0) == 18 * 656
    with pytest.raises(ValueError):
        pack_kv_cache(random_latent(4, "v4"), "v32")
    with pytest.raises(ValueError):
        bytes_per_token("v3")


def _expected_scale_exponent(group):
    """Hand rule: smallest integer e with amax / 2^e <= 464 (0 for an all-zero group)."""
    amax = float(group.abs().max())
    if amax == 0:
        return 0
    e = -140
    while amax / 2.0 ** e > 464:
        e += 1
    return e


def test_v32_token_bytes_by_hand():
    bs, n = 4, 11
    x = random_latent(n, "v32")
    x[6, 128:256] = 0                                              # an all-zero group -> scale 1
    cache = pack_kv_cache(x, "v32", bs, spare_rows=1)
    raw = raw_bytes(cache)
    stride = (bs + 1) * 656
    assert raw.numel() == 3 * stride
    for tok in (0, 6, 10):
        blk, off = divmod(tok, bs)
        base = blk * stride + off * 656
        for g in range(4):
            e = _expected_scale_exponent(x[tok, g * 128:(g + 1) * 128].float())
            scale = struct.unpack("<f", bytes(raw[base + 512 + 4 * g: base + 516 + 4 * g].tolist()))[0]
            assert scale == 2.0 ** e
            fp8 = (x[tok, g * 128:(g + 1) * 128].float() / scale).to(torch.float8_e4m3fn).view(torch.uint8)
            assert torch.equal(raw[base + g * 128: base + (g + 1) * 128], fp8)
        rope = x[tok, 512:].contiguous().view(torch.uint8)
        assert torch.equal(raw[base + 528: base + 656], rope)
    assert struct.unpack("<f", bytes(raw[1 * stride + 2 * 656 + 516: 1 * stride + 2 * 656 + 520].tolist()))[0] == 1.0
    # Spare rows and unused slots (tokens 11) are zero bytes.
    for blk in range(3):
        assert (raw[blk * stride + bs * 656: (blk + 1) * stride] == 0).all()
    assert (raw[2 * stride + 3 * 656: 2 * stride + 4 * 656] == 0).all()


def test_v4_token_bytes_by_hand():
    bs, n = 3, 7
    x = random_latent(n, "v4")
    x[4, 64:128] = 0
    cache = pack_kv_cache(x, "v4", bs)
    raw = raw_bytes(cache)
    stride = block_stride_bytes("v4", bs)                          # 3*584 = 1752 -> 4*576
    assert stride == 2304 and cache.stride(0) == stride and raw.numel() == 3 * stride
    for tok in (0, 4, 6):
        blk, off = divmod(tok, bs)
        data = blk * stride + off * 576
        scales = blk * stride + bs * 576 + off * 8
        for g in range(7):
            e = _expected_scale_exponent(x[tok, g * 64:(g + 1) * 64].float())
            assert int(raw[scales + g]) == e + 127
            fp8 = (x[tok, g * 64:(g + 1) * 64].float() / 2.0 ** e).to(torch.float8_e4m3fn).view(torch.uint8)
            assert torch.equal(raw[data + g * 64: data + (g + 1) * 64], fp8)
        assert int(raw[scales + 7]) == 0                            # pad byte
        assert torch.equal(raw[data + 448: data + 576], x[tok, 448:].contiguous().view(torch.uint8))
    assert int(raw[1 * stride + bs * 576 + 1 * 8 + 1]) == 127       # token 4, zero group -> 2^0
    for blk in range(3):                                           # padding up to the 576 multiple
        assert (raw[blk * stride + bs * 584: (blk + 1) * stride] == 0).all()


@pytest.mark.parametrize("layout", ["v4", "v32"])
@pytest.mark.parametrize("block_size,spare", [(64, 0), (16, 1), (1, 0), (5, 3)])
def test_round_trip_is_byte_exact(layout, block_size, spare):
    n = 97
    x = random_latent(n, layout)
    x[3] = 0
    x[5, :64] = 448 * 2.0 ** -3                                    # amax exactly 448 * 2^k
    x[7, :64] = 464 * 2.0 ** 2                                     # amax exactly at the scale threshold
    x[9, :64] = 230.0                                              # rounds to 224 * s: the idempotence trap
    x[11] = x[11] * 1e-30                                          # tiny values, clamped exponents
    cache = pack_kv_cache(x, layout, block_size, spare)
    y = unpack_kv_cache(cache, layout)
    assert y.dtype == torch.bfloat16 and y.shape == (cache.shape[0] * block_size, kv_cache.token_dim(layout))
    assert torch.equal(y[n:], torch.zeros_like(y[n:]))
    again = pack_kv_cache(y[:n], layout, block_size, spare)
    assert torch.equal(raw_bytes(again), raw_bytes(cache))
    # unpack(pack(x)) is x rounded through e4m3 at the power-of-two scale: close, rope exact.
    nope = kv_cache.token_dim(layout) - 64
    assert torch.equal(y[:n, nope:], x[:, nope:])
    rel = (y[:n, :nope].float() - x[:, :nope].float()).norm() / x[:, :nope].float().norm()
    assert rel < 0.05


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_scales_are_minimal_powers_of_two(layout):
    x = random_latent(40, layout)
    cache = pack_kv_cache(x, layout, 8)
    group = 64 if layout == "v4" else 128
    nope = kv_cache.token_dim(layout) - 64
    blocks = block_rows(cache)
    for tok in range(40):
        blk, off = divmod(tok, 8)
        if layout == "v4":
            scales = torch.exp2(blocks[blk, 8 * 576 + off * 8: 8 * 576 + off * 8 + 7].double() - 127)
        else:
            scales = blocks[blk, off * 656 + 512: off * 656 + 528].contiguous().view(torch.float32).double()
        for g in range(nope // group):
            s = float(scales[g])
            mant, _ = torch.frexp(torch.tensor(s))
            assert float(mant) == 0.5                              # a power of two
            amax = float(x[tok, g * group:(g + 1) * group].abs().max())
            assert amax / s <= 464 and (amax == 0 or amax / s > 232)


@pytest.mark.parametrize("layout", ["v4", "v32"])
def test_dequantize_tokens_slots_and_views(layout):
    x = random_latent(50, layout)
    cache = pack_kv_cache(x, layout, 16, spare_rows=1 if layout == "v32" else 0)
    full = unpack_kv_cache(cache, layout).float()
    slots = torch.tensor([3, 49, 0, 3, -1, 64, 10 ** 6, 17])
    got = kv_cache.dequantize_tokens(cache, layout, slots)
    assert got.dtype == torch.float32 and got.shape == (8, kv_cache.token_dim(layout))
    valid = torch.tensor([True, True, True, True, False, False, False, True])
    assert torch.equal(got[valid], full[slots[valid]])
    assert torch.equal(got[~valid], torch.zeros_like(got[~valid]))
    # An e4m3 view of the same bytes reads the same.
    e4m3 = torch.as_strided(block_rows(cache).view(torch.float8_e4m3fn), cache.shape, cache.stride())
    assert torch.equal(kv_cache.dequantize_tokens(e4m3, layout, slots), got)


def test_padded_stride_is_honoured():
    """The same tokens with and without spare rows dequantize identically: reads go through stride(0)."""
    x = random_latent(33, "v32")
    dense = unpack_kv_cache(pack_kv_cache(x, "v32", 8), "v32")
    padded = unpack_kv_cache(pack_kv_cache(x, "v32", 8, spare_rows=3), "v32")
    assert torch.equal(dense, padded)
