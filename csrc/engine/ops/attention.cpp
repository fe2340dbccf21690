// scaled_dot_product_attention as one fused launch (kernels/attention), with the arguments
// the eager op passes for the same call, so the engine's result equals eager's bit for bit.
// The exporter keeps SDPA undecomposed only for calls this op runs (aot/exporter.py:
// _sdpa_supported); anything else here fails at load naming the op.
#include "engine/op_registry.h"
#include "kernels/attention.h"
#include "kernels/binding_window.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace twgpu::engine {
namespace {

// Strides of `t` read as (batch, head, row, column): a 3-D operand gets a batch of one.
std::array<uint64_t, 4> strides4(const DeviceTensor& t) {
  std::array<uint64_t, 4> s{};
  const int64_t pad = 4 - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) s[pad + d] = static_cast<uint64_t>(t.strides[d]);
  return s;
}

attn::View view_of(const DeviceTensor& t) { return {t.buffer, t.offset, strides4(t)}; }

// The mask broadcast to (B, H, Lq, Lk) through strides (0 on broadcast dims), as eager's
// expand does: no copy.
attn::View broadcast_mask(OpBuilder& b, const DeviceTensor& m, const std::vector<int64_t>& full) {
  const int64_t n = static_cast<int64_t>(full.size());
  b.check(m.dim() <= n, "attn_mask " + m.describe() + " has more dims than the scores");
  attn::View v{m.buffer, m.offset, {}};
  for (int64_t d = 0; d < n; ++d) {
    const int64_t md = d - (n - m.dim());
    const int64_t size = md < 0 ? 1 : m.shape[md];
    b.check(size == full[d] || size == 1,
            "attn_mask " + m.describe() + " does not broadcast to the scores' shape");
    v.strides[4 - n + d] = size == 1 ? 0 : static_cast<uint64_t>(m.strides[md]);
  }
  return v;
}

// Bytes a view spans in its buffer (the kernel binds each operand once).
uint64_t span_bytes(const DeviceTensor& t) {
  if (t.numel() == 0) return 0;
  uint64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += uint64_t(t.shape[d] - 1) * uint64_t(t.strides[d]);
  return span * element_size(t.dtype);
}

// The output: memory of its own in the layout the program gives, which may be any dense
// order (the exporter writes the meta's: q's dim order, so HF's transpose back to
// (B, L, H*Dv) is a view, not a copy); the kernel writes through its strides.
const DeviceTensor& dense_output(OpBuilder& b, const std::vector<int64_t>& shape, DType dtype) {
  DeviceTensor& out = b.output(0);
  b.check(out.shape == shape && out.dtype == dtype,
          "output 0 is " + out.describe() + ", the op makes " + shape_text(dtype, shape));
  std::vector<int64_t> order;
  for (int64_t d = 0; d < out.dim(); ++d)
    if (out.shape[d] != 1) order.push_back(d);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return out.strides[x] < out.strides[y]; });
  int64_t expected = 1;
  bool dense = !out.is_view;
  for (int64_t d : order) {
    dense = dense && out.strides[d] == expected;
    expected *= out.shape[d];
  }
  b.check(dense || (!out.is_view && out.numel() == 0), "output 0 must be dense memory of its own (some dim order)");
  return out;
}

void sdpa(OpBuilder& b) {
  // aten::scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
  //   is_causal=False, *, scale=None, enable_gqa=False)
  const DeviceTensor& q = b.tensor(0);
  const DeviceTensor& k = b.tensor(1);
  const DeviceTensor& v = b.tensor(2);
  const DeviceTensor* mask = b.optional_tensor(3);
  const double dropout_p = b.real_or(4, 0.0);
  const bool causal = b.boolean_or(5, false);
  const bool has_scale = !b.is_none(6);
  const bool gqa = b.boolean_or(7, false);

  b.check(dropout_p == 0.0, "dropout_p must be 0 (inference), got " + std::to_string(dropout_p));
  b.check(!(causal && mask), "is_causal with an explicit attn_mask is not supported");
  b.check(q.dtype == DType::Float32 || q.dtype == DType::Float16 || q.dtype == DType::BFloat16,
          "needs float32, float16 or bfloat16 q, got " + q.describe());
  b.check(k.dtype == q.dtype && v.dtype == q.dtype,
          "q, k, v must share a dtype: " + q.describe() + ", " + k.describe() + ", " + v.describe());
  const int64_t n = q.dim();
  b.check((n == 3 || n == 4) && k.dim() == n && v.dim() == n,
          "needs 3-D or 4-D q, k, v of one rank, got " + q.describe() + ", " + k.describe() + ", " + v.describe());
  const int64_t B = n == 4 ? q.shape[0] : 1;
  const int64_t Hq = q.shape[n - 3], Lq = q.shape[n - 2], D = q.shape[n - 1];
  const int64_t Hkv = k.shape[n - 3], Lk = k.shape[n - 2], Dv = v.shape[n - 1];
  b.check(n == 3 || (k.shape[0] == B && v.shape[0] == B), "q, k, v batch sizes differ");
  b.check(v.shape[n - 3] == Hkv && k.shape[n - 1] == D && v.shape[n - 2] == Lk,
          "k " + k.describe() + " and v " + v.describe() + " do not match q " + q.describe());
  b.check(Hkv == Hq || (gqa && Hkv > 0 && Hq % Hkv == 0),
          "q heads " + std::to_string(Hq) + " vs k/v heads " + std::to_string(Hkv) +
              (gqa ? ": not a multiple" : " need enable_gqa"));
  b.check(D > 0 && Dv > 0 && D <= attn::kMaxHeadDim && Dv <= attn::kMaxHeadDim,
          "head dims must be in 1.." + std::to_string(attn::kMaxHeadDim));
  b.check(Lk > 0, "needs at least one key");
  const int64_t limit = std::numeric_limits<uint32_t>::max();
  for (const DeviceTensor* t : {&q, &k, &v})
    for (int64_t d = 0; d < n; ++d)
      b.check(t->shape[d] <= limit && t->strides[d] >= 0 && t->strides[d] <= limit,
              "sizes and strides must fit u32: " + t->describe());

  std::vector<int64_t> out_shape = q.shape;
  out_shape.back() = Dv;
  const DeviceTensor& out = dense_output(b, out_shape, q.dtype);

  const uint64_t budget = window_budget(b.gpu());
  for (const DeviceTensor* t : {&q, &k, &v, mask, &out})
    if (t) b.check(span_bytes(*t) <= budget, t->describe() + " exceeds one storage binding");

  attn::AttentionArgs a;
  a.dtype = q.dtype;
  a.batch = B, a.heads = Hq, a.kv_heads = Hkv, a.q_len = Lq, a.kv_len = Lk, a.dim = D, a.v_dim = Dv;
  a.causal = causal;
  // Eager's default: 1/sqrt(D) in double, then float.
  a.scale = static_cast<float>(has_scale ? b.real(6) : 1.0 / std::sqrt(static_cast<double>(D)));
  a.q = view_of(q), a.k = view_of(k), a.v = view_of(v), a.out = view_of(out);
  if (mask) {
    b.check(mask->dtype == DType::Bool || mask->dtype == q.dtype,
            "attn_mask must be bool or q's dtype, got " + mask->describe());
    a.mask = broadcast_mask(b, *mask, {B, Hq, Lq, Lk});
    a.mask_kind = mask->dtype == DType::Bool ? attn::MaskKind::Bool : attn::MaskKind::Float;
  }
  // The kernel also writes the logsumexp (eager returns it for backward); scratch here.
  const DeviceTensor lse = b.scratch(DType::Float32, {B, Hq, Lq});
  a.lse = lse.buffer, a.lse_offset = lse.offset;
  if (out.numel() == 0) return;
  b.record([a](twgpu::Context& ctx) { attn::scaled_dot_product_attention(ctx, a); });
}

}  // namespace

TWGPU_ENGINE_OP("aten::scaled_dot_product_attention", sdpa);

}  // namespace twgpu::engine
