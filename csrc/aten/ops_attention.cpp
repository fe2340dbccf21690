// Fused scaled_dot_product_attention. PyTorch's composite SDPA asks the device's
// _fused_sdp_choice_stub which kernel to run; for the cases the fused kernel covers
// (inference: no dropout, no gradient needed; float32/16/bf16; 3-D or 4-D q/k/v; GQA;
// a bool mask or one of q's dtype) it answers `overrideable`, and the composite calls
// _scaled_dot_product_fused_attention_overrideable, implemented here over
// kernels/attention. Everything else (and sdpa_kernel(MATH)) stays on the math path.
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/grad_mode.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/_safe_softmax.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include "aten/webgpu_tensor.h"
#include "kernels/attention.h"
#include "kernels/binding_window.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

bool fused_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

// Bytes a view spans in its buffer.
uint64_t span_bytes(const Tensor& t) {
  if (t.numel() == 0) return 0;
  uint64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += uint64_t(t.size(d) - 1) * uint64_t(t.stride(d));
  return span * t.element_size();
}

bool symbolic(const Tensor& t) { return t.unsafeGetTensorImpl()->has_symbolic_sizes_strides(); }

// True when the fused kernel computes this call as the math path would. Shapes may be
// symbolic (torch.compile with dynamic shapes): comparisons of sizes then add guards.
bool fused_supported(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                     double dropout_p, bool is_causal, bool enable_gqa) {
  const bool has_mask = mask.has_value() && mask->defined();
  if (dropout_p != 0.0 || (is_causal && has_mask)) return false;
  for (const Tensor* t : {&q, &k, &v})
    if (t->device().type() != kDeviceType || t->scalar_type() != q.scalar_type() ||
        t->layout() != at::kStrided || t->is_nested())
      return false;
  if (!fused_dtype(q.scalar_type())) return false;
  // Backward stays on the math path (the fused op has no backward here).
  if (at::GradMode::is_enabled() &&
      (q.requires_grad() || k.requires_grad() || v.requires_grad() || (has_mask && mask->requires_grad())))
    return false;
  const int64_t n = q.dim();
  if ((n != 3 && n != 4) || k.dim() != n || v.dim() != n) return false;
  if (n == 4 && (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0))) return false;
  const c10::SymInt hq = q.sym_size(-3), hkv = k.sym_size(-3);
  if (v.sym_size(-3) != hkv || k.sym_size(-1) != q.sym_size(-1) || v.sym_size(-2) != k.sym_size(-2))
    return false;
  if (hkv != hq && !(enable_gqa && hkv > 0 && hq % hkv == 0)) return false;
  // Head dims of 0 (nothing to bind) stay on the math path.
  if (q.sym_size(-1) > attn::kMaxHeadDim || v.sym_size(-1) > attn::kMaxHeadDim ||
      q.sym_size(-1) == 0 || v.sym_size(-1) == 0)
    return false;
  if (has_mask) {
    if (mask->device().type() != kDeviceType || mask->layout() != at::kStrided) return false;
    if (mask->scalar_type() != at::kBool && mask->scalar_type() != q.scalar_type()) return false;
    std::vector<c10::SymInt> full(q.sym_sizes().begin(), q.sym_sizes().end());
    full.back() = k.sym_size(-2);
    if (!at::is_expandable_to(mask->sym_sizes(), full)) return false;
  }
  return true;
}

// True when every operand fits the kernel: u32 sizes and strides, each view within one
// storage binding (the kernel binds each once).
bool fits_kernel(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask) {
  const int64_t limit = std::numeric_limits<uint32_t>::max();
  for (const Tensor* t : {&q, &k, &v})
    for (int64_t d = 0; d < t->dim(); ++d)
      if (t->size(d) > limit || t->stride(d) < 0 || t->stride(d) > limit) return false;
  const uint64_t budget = window_budget(Context::get());
  for (const Tensor* t : {&q, &k, &v})
    if (span_bytes(*t) > budget) return false;
  if (mask.has_value() && mask->defined() && span_bytes(*mask) > budget) return false;
  return uint64_t(q.numel()) / std::max<int64_t>(q.size(-1), 1) * std::max<int64_t>(v.size(-1), 1) *
             q.element_size() <= budget;
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::optional<Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> /*scale*/, bool enable_gqa) {
  // Symbolic shapes: the limits are checked when the compiled graph runs the op (past
  // them it computes through ATen ops).
  if (at::globalContext().userEnabledOverrideableSDP() &&
      fused_supported(q, k, v, mask, dropout_p, is_causal, enable_gqa) &&
      (symbolic(q) || symbolic(k) || symbolic(v) || (mask.has_value() && mask->defined() && symbolic(*mask)) ||
       fits_kernel(q, k, v, mask)))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  return static_cast<int64_t>(at::SDPBackend::math);
}

// Whether the installed torch's meta function gives the output q's dim order (newer
// releases) or a contiguous one (older): Inductor asserts the strides it gives, so ours
// follow it. Set at import from a probe of the meta function (torch_webgpu/__init__.py).
std::atomic<bool> output_follows_query{true};

// The output in the layout the meta function gives. q's dim order: for HF's transposed q
// that is (B, Lq, H, Dv) in memory, so out.transpose(1, 2).reshape(...) needs no copy.
Tensor alloc_output(const Tensor& q, at::IntArrayRef shape) {
  if (!output_follows_query.load()) return at::empty(shape, q.options());
  if (q.sizes() == shape) return at::empty_like(q);
  std::vector<int64_t> order(q.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  std::vector<int64_t> strides(q.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape[*it];
  }
  return at::empty_strided(shape, strides, q.options());
}

// Past the kernel's limits (a graph compiled for dynamic shapes meeting a huge cache):
// the same attention through ATen ops, which split their work over bindings, and its
// logsumexp. q, k, v 4-D; `mask` expanded to the scores' shape or undefined.
std::pair<Tensor, Tensor> attention_by_ops(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Tensor& mask, bool is_causal, double scale) {
  const int64_t rep = q.size(1) / k.size(1);
  const Tensor kk = (rep > 1 ? k.repeat_interleave(rep, 1) : k).to(at::kFloat);
  const Tensor vv = (rep > 1 ? v.repeat_interleave(rep, 1) : v).to(at::kFloat);
  Tensor scores = at::matmul(q.to(at::kFloat), kk.transpose(-2, -1)).mul_(scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (is_causal)
    scores.masked_fill_(at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).triu(1), -inf);
  if (mask.defined())
    scores = mask.scalar_type() == at::kBool ? scores.masked_fill(mask.logical_not(), -inf)
                                             : scores.add(mask.to(at::kFloat));
  Tensor lse = at::logsumexp(scores, -1);
  return {at::matmul(at::_safe_softmax(scores, -1), vv).to(q.scalar_type()), lse};
}

attn::View view_of(const Tensor& t) {
  attn::View v;
  DeviceRef r = device_ref(t);
  v.buffer = r.buffer;
  v.offset = r.offset;
  for (int i = 0; i < 4; ++i) v.strides[i] = static_cast<uint64_t>(t.stride(i));
  return v;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>
fused_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                const std::optional<Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0 && !return_debug_mask,
                              "torch_webgpu: fused attention has no dropout or debug mask");
  TORCH_CHECK_NOT_IMPLEMENTED(
      fused_supported(query, key, value, attn_bias, dropout_p, is_causal, true),
      "torch_webgpu: _scaled_dot_product_fused_attention_overrideable: unsupported inputs ",
      "(see ops_attention.cpp: fused_supported)");
  const bool three = query.dim() == 3;
  const Tensor q = three ? query.unsqueeze(0) : query;
  const Tensor k = three ? key.unsqueeze(0) : key;
  const Tensor v = three ? value.unsqueeze(0) : value;
  const int64_t B = q.size(0), H = q.size(1), Lq = q.size(2), D = q.size(3);
  const int64_t Lk = k.size(2), Dv = v.size(3);
  std::vector<int64_t> out_shape(query.sizes().begin(), query.sizes().end());
  out_shape.back() = Dv;
  Tensor out = alloc_output(query, out_shape);
  Tensor lse = at::empty({B, H, Lq}, query.options().dtype(at::kFloat));
  Tensor out4 = three ? out.unsqueeze(0) : out;

  attn::AttentionArgs a;
  a.dtype = to_dtype_or_throw(q.scalar_type());
  a.batch = B, a.heads = H, a.kv_heads = k.size(1), a.q_len = Lq, a.kv_len = Lk;
  a.dim = D, a.v_dim = Dv;
  a.causal = is_causal;
  a.scale = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(D)));
  if (!fits_kernel(query, key, value, attn_bias)) {
    Tensor mask = attn_bias.has_value() && attn_bias->defined() ? attn_bias->expand({B, H, Lq, Lk}) : Tensor();
    auto [o, l] = attention_by_ops(q, k, v, mask, is_causal, a.scale);
    out4.copy_(o);
    lse.copy_(l);
  } else if (Lk == 0) {
    // No keys: the math path's empty product (zeros) and an empty logsumexp (-inf). Not a
    // kernel launch: k and v have no storage to bind.
    out.zero_();
    lse.fill_(-std::numeric_limits<double>::infinity());
  } else if (out.numel() > 0 || lse.numel() > 0) {
    TWGPU_TRY
    a.q = view_of(q), a.k = view_of(k), a.v = view_of(v), a.out = view_of(out4);
    DeviceRef l = device_ref(lse);
    a.lse = l.buffer, a.lse_offset = l.offset;
    Tensor mask;
    if (attn_bias.has_value() && attn_bias->defined()) {
      mask = attn_bias->expand({B, H, Lq, Lk});
      a.mask_kind = mask.scalar_type() == at::kBool ? attn::MaskKind::Bool : attn::MaskKind::Float;
      a.mask = view_of(mask);
    }
    RuntimeLock lock;
    attn::scaled_dot_product_attention(lock.ctx(), a);
    TWGPU_CATCH
  }
  const Tensor none;
  // No dropout: zero Philox seed and offset, host tensors as CUDA's flash attention gives.
  Tensor seed = at::zeros({}, at::dtype(at::kLong));
  Tensor offset = at::zeros({}, at::dtype(at::kLong));
  return {out, lse, none, none, c10::SymInt(Lq), c10::SymInt(Lk), seed, offset, none};
}

}  // namespace

void set_sdpa_output_follows_query(bool follows) { output_follows_query.store(follows); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention));
}

}  // namespace twgpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &twgpu::aten::fused_sdp_choice)
}  // namespace at::native
