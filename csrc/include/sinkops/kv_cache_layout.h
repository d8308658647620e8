// Byte layouts of the paged FP8 KV caches (docs/DESIGN.md §2.3): the only place the C++ side
// spells them (the Python side: sinkops/kv_layout.py). Byte-exact with the DeepSeek stacks.
//
//   v32 (DeepSeek-V3.2): 656 B per token, tokens 656 B apart inside a block:
//        [0, 512) e4m3 | [512, 528) 4 x fp32 scale, one per 128 values | [528, 656) 64 x bf16 rope
//   v4  (DeepSeek-V4): per block, block_size tokens 576 B apart: [0, 448) e4m3 | [448, 576) 64 x bf16
//        rope; then block_size x 8 B: 7 e8m0 scales (2^(byte - 127), one per 64 values) + 1 pad
//        byte; the block's byte size padded up to a multiple of 576.
// Caches are read through their block stride, which may exceed the block_size * kBytesPerToken
// bytes a block holds (the reads of one block never pass that). Device-safe.
#pragma once
#include <cstdint>

#include "sinkops/types.h"

namespace sinkops {

template <KvCacheLayout L>
struct KvLayout;

template <>
struct KvLayout<KvCacheLayout::kV4> {
  static constexpr int kDqk = 512;            // dequantized channels = kNope + kRope (all of them values)
  static constexpr int kNope = 448;           // e4m3 channels
  static constexpr int kRope = 64;            // bf16 channels
  static constexpr int kTokenStride = 576;    // bytes from one token to the next in the token area
  static constexpr int kBytesPerToken = 584;  // last dim of the cache view: 576 data + 8 scale bytes
  static constexpr int kRopeOffset = 448;     // of the bf16 rope inside a token
  static constexpr int kScaleGroup = 64;      // e4m3 values per scale
  static constexpr int kScaleBytes = 8;       // per token, after the block's token area
  // Scale bytes of token `offset` of a block: block + block_size * kTokenStride + offset * kScaleBytes.
  static constexpr int64_t scale_offset(int block_size, int64_t offset) {
    return int64_t(block_size) * kTokenStride + offset * kScaleBytes;
  }
};

template <>
struct KvLayout<KvCacheLayout::kV32> {
  static constexpr int kDqk = 576;            // dequantized channels = kNope + kRope; values = the kNope
  static constexpr int kNope = 512;
  static constexpr int kRope = 64;
  static constexpr int kTokenStride = 656;
  static constexpr int kBytesPerToken = 656;
  static constexpr int kRopeOffset = 528;
  static constexpr int kScaleGroup = 128;
  static constexpr int kScaleOffset = 512;    // 4 x fp32 inside the token
};

// The same numbers for host code that holds the layout as a runtime value.
struct KvLayoutInfo {
  const char* name;
  int d_qk, bytes_per_token;
};
constexpr KvLayoutInfo kv_layout_info(KvCacheLayout layout) {
  return layout == KvCacheLayout::kV4
             ? KvLayoutInfo{"v4", KvLayout<KvCacheLayout::kV4>::kDqk, KvLayout<KvCacheLayout::kV4>::kBytesPerToken}
             : KvLayoutInfo{"v32", KvLayout<KvCacheLayout::kV32>::kDqk, KvLayout<KvCacheLayout::kV32>::kBytesPerToken};
}

}  // namespace sinkops
