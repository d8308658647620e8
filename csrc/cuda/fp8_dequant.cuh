// FP8 (e4m3) -> bf16 dequantization of the paged KV caches (kv_cache_layout.h), shared by the
// sm80 decode kernel and the sm90 one. Two exact forms:
//  * dequant_8_e4m3(raw, float scale): e4m3 -> f16 -> f32 (both exact), one f32 multiply and one
//    rounding to bf16: any fp32 scale (v32). Runs on the conversion units (16 results/clk/SM).
//  * dequant_8_e4m3_pow2(raw, bf16x2 scale): integer bit moves put each e4m3 into a bf16 whose
//    value is exactly the e4m3 value * 2^-120, then two bf16 multiplies (by 2^120, by the
//    power-of-two scale) give the same bf16 as the first form, subnormals included; only on the
//    integer and FMA pipes (v4's e8m0 scales). It maps the e4m3 NaN bytes 0x7F / 0xFF to +-480
//    instead of NaN (docs/DECISIONS.md): the quantizers saturate at 448 and never write them.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "mma_sm80.cuh"

namespace sinkops::cuda {

// e8m0: 2^(byte - 127). Byte 0 is 2^-127, a float32 denormal, so it cannot come from shifting
// the byte into the exponent field.
__device__ __forceinline__ float e8m0_to_float(uint8_t byte) {
  return __uint_as_float(byte == 0 ? 0x00400000u : uint32_t(byte) << 23);
}

// 8 e4m3 values (little-endian in `raw`) times `scale`, rounded once to bf16.
__device__ __forceinline__ uint4 dequant_8_e4m3(uint2 raw, float scale) {
  using ptx::pack_bf16x2;
  uint32_t words[2] = {raw.x, raw.y};
  uint32_t out[4];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const auto pair = static_cast<__nv_fp8x2_storage_t>(words[w] >> (16 * half));
      const __half2 h2 = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
      const float2 f = __half22float2(h2);  // e4m3 -> f16 is exact
      out[w * 2 + half] = pack_bf16x2(f.x * scale, f.y * scale);
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// e8m0 byte -> the bf16 2^(byte - 127) in both halves (byte 0: the bf16 subnormal 2^-127; 255: inf,
// as e8m0_to_float).
__device__ __forceinline__ uint32_t e8m0_to_bf16x2(uint32_t byte) {
  const uint32_t b = byte == 0 ? 0x0040u : byte << 7;
  return b | (b << 16);
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// e8m0 byte <= 134 -> the bf16 2^(byte - 7) in both halves: 2^120 times the scale, which
// dequant_8_e4m3_pow2<true> multiplies into its x 2^-120 bits at once. The product x 2^(byte - 127)
// is rounded once either way, so the bf16 is the two multiplies' (byte 0: x 2^-127 as well).
__device__ __forceinline__ uint32_t e8m0_times_2pow120_bf16x2(uint32_t byte) {
  const uint32_t b = (byte + 120u) << 7;
  return b | (b << 16);
}

// 8 e4m3 values (little-endian in `raw`) times a power-of-two scale (bf16x2, both halves equal);
// kFolded: the scale is e8m0_times_2pow120_bf16x2's (one multiply instead of two).
// Per byte pair: prmt builds [sign-replicated byte | byte & 0x7f] per 16-bit lane, << 4 moves the
// exponent and mantissa under bf16's (bits 10..4) and the mask keeps the sign (bit 15) and them.
template <bool kFolded = false>
__device__ __forceinline__ uint4 dequant_8_e4m3_pow2(uint2 raw, uint32_t scale_bf16x2) {
  constexpr uint32_t kTwoPow120 = 0x7B807B80u;  // bf16x2 (2^120, 2^120)
  const uint32_t words[2] = {raw.x, raw.y};
  uint32_t out[4];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const uint32_t magnitude = words[w] & 0x7F7F7F7Fu;
    uint32_t lo, hi;
    asm("prmt.b32 %0, %1, %2, 0x9584;\n" : "=r"(lo) : "r"(words[w]), "r"(magnitude));  // bytes 0, 1
    asm("prmt.b32 %0, %1, %2, 0xB7A6;\n" : "=r"(hi) : "r"(words[w]), "r"(magnitude));  // bytes 2, 3
    lo = (lo << 4) & 0x87F087F0u;
    hi = (hi << 4) & 0x87F087F0u;
    if constexpr (kFolded) {
      out[2 * w] = bf16x2_mul(lo, scale_bf16x2);
      out[2 * w + 1] = bf16x2_mul(hi, scale_bf16x2);
    } else {
      out[2 * w] = bf16x2_mul(bf16x2_mul(lo, kTwoPow120), scale_bf16x2);
      out[2 * w + 1] = bf16x2_mul(bf16x2_mul(hi, kTwoPow120), scale_bf16x2);
    }
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

}  // namespace sinkops::cuda
