// CPU emulator stand-in for <cuda_fp16.h>: fp16 storage; conversions through the compiler's
// _Float16 (IEEE round-to-nearest-even).
#pragma once
#include "cuda_runtime.h"

struct __half_raw {
  uint16_t x;
};
struct __half2_raw {
  uint16_t x, y;
};
struct __half {
  uint16_t x;
};
struct alignas(4) __half2 {
  __half x, y;
  __half2() = default;
  __half2(__half a, __half b) : x(a), y(b) {}
  explicit __half2(__half2_raw r) : x{r.x}, y{r.y} {}
};
inline __half __float2half_rn(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  __half r;
  std::memcpy(&r.x, &h, 2);
  return r;
}
inline float __half2float(__half h) {
  _Float16 v;
  std::memcpy(&v, &h.x, 2);
  return static_cast<float>(v);
}
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2(__float2half_rn(lo), __float2half_rn(hi)); }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
