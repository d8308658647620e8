// The PTX wrappers of csrc/cuda/mma_sm80.cuh, executed on the CPU. Fragment layouts follow the
// PTX ISA (mma.m16n8k16 .row.col, ldmatrix .m8n8 .b16), with g = lane / 4, t = lane % 4:
//   A 16x16: a[0] = (row g, cols 2t, 2t+1), a[1] = row g+8, a[2] = row g cols 2t+8.., a[3] = row g+8 cols 2t+8..
//   B 16x8:  b0 = (rows 2t, 2t+1; col g), b1 = rows 2t+8, 2t+9
//   C 16x8:  c[0..1] = row g, cols 2t, 2t+1; c[2..3] = row g+8
//   ldmatrix: lanes 8j..8j+7 address rows 0..7 of matrix j; lane L gets r[j] = row L/4,
//   cols 2(L%4), 2(L%4)+1 of matrix j (.trans: rows 2(L%4), 2(L%4)+1 of column L/4).
// The 16 products of a dot are exact and summed in double, rounded to fp32 once, then added to
// the fp32 accumulator (the tensor core's internal order differs; both are within fp32 rounding).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace sinkops::cuda::ptx {

inline uint32_t smem_addr(const void* p) { return ::sinkops_emu::smem_offset(p); }

inline void cp_async_16(uint32_t dst, const void* src, bool pred) { ::sinkops_emu::cp_async(dst, src, 16, pred ? 16 : 0); }
inline void cp_async_16(void* dst, const void* src) { ::sinkops_emu::cp_async(smem_addr(dst), src, 16, 16); }
inline void cp_async_8(void* dst, const void* src) { ::sinkops_emu::cp_async(smem_addr(dst), src, 8, 8); }
inline void cp_async_commit() { ::sinkops_emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() { ::sinkops_emu::cp_async_wait(N); }
inline void cp_async_wait_all() { ::sinkops_emu::cp_async_wait(0); }

namespace emu_detail {
inline uint32_t load_u32(uint32_t addr) {
  uint32_t v;
  std::memcpy(&v, ::sinkops_emu::smem_at(addr, 4), 4);
  return v;
}
inline uint16_t load_u16(uint32_t addr) {
  uint16_t v;
  std::memcpy(&v, ::sinkops_emu::smem_at(addr, 2), 2);
  return v;
}
// x`kMats` ldmatrix: every lane's row address, then each lane picks its words.
template <int kMats, bool kTrans>
inline void ldmatrix(uint32_t* r, uint32_t addr) {
  const unsigned char* slots = ::sinkops_emu::warp_exchange(&addr, 4);
  uint32_t rows[32];
  for (int i = 0; i < 32; ++i) std::memcpy(&rows[i], slots + 64 * i, 4);
  for (int i = 0; i < 8 * kMats; ++i)
    if (rows[i] % 16 != 0) ::sinkops_emu::fail("ldmatrix row address not 16-byte aligned");
  const int lane = ::sinkops_emu::lane_id(), g = lane / 4, t = lane % 4;
  for (int j = 0; j < kMats; ++j) {
    if (!kTrans) {
      r[j] = load_u32(rows[8 * j + g] + 4 * t);
    } else {
      const uint32_t lo = load_u16(rows[8 * j + 2 * t] + 2 * g), hi = load_u16(rows[8 * j + 2 * t + 1] + 2 * g);
      r[j] = lo | (hi << 16);
    }
  }
}
inline float bf16_lo(uint32_t w) { return __bfloat162float(__nv_bfloat16{uint16_t(w & 0xffff)}); }
inline float bf16_hi(uint32_t w) { return __bfloat162float(__nv_bfloat16{uint16_t(w >> 16)}); }
inline float f16_lo(uint32_t w) { return __half2float(__half{uint16_t(w & 0xffff)}); }
inline float f16_hi(uint32_t w) { return __half2float(__half{uint16_t(w >> 16)}); }

template <bool kBf16>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  struct Frag {
    uint32_t a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const unsigned char* slots = ::sinkops_emu::warp_exchange(&mine, sizeof(Frag));
  bool first;
  float* prod = reinterpret_cast<float*>(::sinkops_emu::warp_once(&first));  // A x B, [16][8]
  if (first) {  // one lane decodes the fragments and forms the whole product for the warp
    auto frag = [&](int lane) -> const Frag& { return *reinterpret_cast<const Frag*>(slots + 64 * lane); };
    auto lo = [](uint32_t w) { return kBf16 ? bf16_lo(w) : f16_lo(w); };
    auto hi = [](uint32_t w) { return kBf16 ? bf16_hi(w) : f16_hi(w); };
    float A[16][16], B[16][8];
    for (int row = 0; row < 16; ++row)  // lane (row % 8) * 4 + (k % 8) / 2, reg (row >= 8) + 2 (k >= 8)
      for (int k = 0; k < 16; ++k) {
        const uint32_t w = frag((row % 8) * 4 + (k % 8) / 2).a[(row >= 8) + 2 * (k >= 8)];
        A[row][k] = k % 2 ? hi(w) : lo(w);
      }
    for (int k = 0; k < 16; ++k)  // lane col * 4 + (k % 8) / 2, reg k >= 8
      for (int col = 0; col < 8; ++col) {
        const uint32_t w = frag(col * 4 + (k % 8) / 2).b[k >= 8];
        B[k][col] = k % 2 ? hi(w) : lo(w);
      }
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 8; ++col) {
        double acc = 0.0;
        for (int k = 0; k < 16; ++k) acc += double(A[row][k]) * double(B[k][col]);
        prod[row * 8 + col] = float(acc);
      }
  }
  const int lane = ::sinkops_emu::lane_id(), g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) d[e] += prod[(g + 8 * (e / 2)) * 8 + 2 * t + (e % 2)];
}
}  // namespace emu_detail

inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emu_detail::ldmatrix<4, false>(r, addr); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu_detail::ldmatrix<4, true>(r, addr); }
inline void ldmatrix_x2(uint32_t (&r)[2], const void* p) { emu_detail::ldmatrix<2, false>(r, smem_addr(p)); }
inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) { ldmatrix_x4(r, smem_addr(p)); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) { ldmatrix_x4_trans(r, smem_addr(p)); }

inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu_detail::mma_16816<true>(d, a, b0, b1);
}
inline void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu_detail::mma_16816<false>(d, a, b0, b1);
}

// ex2.approx.ftz: exp2 with subnormal results flushed to +0 (and ex2(-inf) = +0).
inline float exp2_approx(float x) {
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.f : y;
}
inline void named_barrier(int id, int threads) { ::sinkops_emu::barrier(id, threads); }

}  // namespace sinkops::cuda::ptx
