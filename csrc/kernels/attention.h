// Fused scaled dot-product attention (inference): softmax(q k^T * scale + mask) v in one
// pass over the keys with an online softmax (running max and sum, f32 accumulation), so
// the score matrix is never stored. q, k, v and the mask are read through their strides
// and element offsets (callers pass transposed views); grouped-query attention reads key
// head h / (Hq / Hkv) instead of repeating K and V.
#pragma once
#include <webgpu/webgpu.h>

#include <array>
#include <cstdint>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

namespace attn {

// One operand: its buffer, first element and strides over (batch, head, row, column).
struct View {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;
  std::array<uint64_t, 4> strides{};
};

enum class MaskKind : uint8_t { None, Bool, Float };  // Float: the mask has q's dtype

struct AttentionArgs {
  View q, k, v;       // (B, Hq, Lq, D), (B, Hkv, Lk, D), (B, Hkv, Lk, Dv); dtype `dtype`
  View mask;          // (B, Hq, Lq, Lk) after broadcasting (stride 0 on broadcast dims)
  MaskKind mask_kind = MaskKind::None;
  View out;           // (B, Hq, Lq, Dv); dtype `dtype`
  WGPUBuffer lse = nullptr;  // (B, Hq, Lq) float32, contiguous from element lse_offset
  uint64_t lse_offset = 0;
  DType dtype = DType::Float32;
  uint32_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, dim = 0, v_dim = 0;
  bool causal = false;  // key j visible to query i iff j <= i (top-left aligned)
  float scale = 1.0f;
};

// The largest head dims the kernel keeps in workgroup memory.
constexpr uint32_t kMaxHeadDim = 256;

// Rows whose keys are all masked give zeros and a logsumexp of -inf. A NaN score makes its
// row NaN; keys a row does not see (causal, bool mask) are skipped, as flash kernels do.
void scaled_dot_product_attention(Context& ctx, const AttentionArgs& a);

}  // namespace attn
}  // namespace twgpu
