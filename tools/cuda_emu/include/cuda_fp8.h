// CPU emulator stand-in for <cuda_fp8.h>: the e4m3 -> fp16 pair conversion the decode kernel uses.
#pragma once
#include "cuda_fp16.h"

typedef unsigned short __nv_fp8x2_storage_t;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };

// One e4m3 byte (bias 7, no infinities, S.1111.111 = NaN) as a float; exact in fp16.
inline float sinkops_emu_e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  float v;
  if (exp == 15 && man == 7) v = NAN;
  else if (exp == 0) v = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  else v = std::ldexp(1.f + man / 8.f, exp - 7);
  return sign ? -v : v;
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t pair, __nv_fp8_interpretation_t) {
  const __half lo = __float2half_rn(sinkops_emu_e4m3_to_float(uint8_t(pair & 0xff)));
  const __half hi = __float2half_rn(sinkops_emu_e4m3_to_float(uint8_t(pair >> 8)));
  return {lo.x, hi.x};
}
