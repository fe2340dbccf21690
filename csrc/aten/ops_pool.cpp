// Native pooling: max (with indices) and average pooling in 2-d and 3-d, adaptive average
// and max pooling, and their backward kernels (1-d pooling reaches these through
// PyTorch's composites). Float32/16/bf16 run natively; other dtypes and arguments the
// CPU would reject go to the CPU fallback, which raises the CPU's error.
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward_ops.h>
#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/_adaptive_avg_pool3d_backward_ops.h>
#include <ATen/ops/_adaptive_avg_pool3d_ops.h>
#include <ATen/ops/adaptive_max_pool2d_backward_ops.h>
#include <ATen/ops/adaptive_max_pool2d_ops.h>
#include <ATen/ops/adaptive_max_pool3d_backward_ops.h>
#include <ATen/ops/adaptive_max_pool3d_ops.h>
#include <ATen/ops/avg_pool2d_backward_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/avg_pool3d_backward_ops.h>
#include <ATen/ops/avg_pool3d_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/fractional_max_pool2d_backward_ops.h>
#include <ATen/ops/fractional_max_pool2d_ops.h>
#include <ATen/ops/fractional_max_pool3d_backward_ops.h>
#include <ATen/ops/fractional_max_pool3d_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/max_pool3d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool3d_with_indices_ops.h>
#include <ATen/ops/channel_shuffle_ops.h>
#include <ATen/ops/max_unpool2d_ops.h>
#include <ATen/ops/max_unpool3d_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_pool.h"

namespace twgpu::aten {
namespace {

using at::IntArrayRef;
using at::Tensor;

// A pooling call's geometry, or nullopt when the CPU would reject the arguments (the
// caller then runs the fallback, which raises the CPU's error).
struct Pool {
  nn::PoolGeometry g;
  std::vector<int64_t> out_shape;  // full output shape
  int nd = 2;
};

bool expand(IntArrayRef v, int nd, int64_t* out, int64_t dflt, bool allow_empty) {
  if (v.empty()) {
    if (!allow_empty) return false;
    for (int j = 0; j < nd; ++j) out[j] = dflt;
    return true;
  }
  if (v.size() == 1) {
    for (int j = 0; j < nd; ++j) out[j] = v[0];
    return true;
  }
  if (static_cast<int>(v.size()) != nd) return false;
  for (int j = 0; j < nd; ++j) out[j] = v[j];
  return true;
}

// Input [N, C, *spatial] or [C, *spatial] with nd spatial dims, all nonzero but N.
bool split_input(const Tensor& x, int nd, Pool& p) {
  const int64_t dims = x.dim();
  if (dims != nd + 1 && dims != nd + 2) return false;
  int64_t planes = 1;
  for (int64_t d = 0; d < dims - nd; ++d) planes *= x.size(d);
  for (int64_t d = 1; d < dims; ++d)
    if (x.size(d) == 0) return false;
  if (dims == nd + 1 && x.size(0) == 0) return false;
  p.nd = nd;
  p.g.planes = u32(planes);
  for (int j = 0; j < nd; ++j) p.g.in[3 - nd + j] = u32(x.size(dims - nd + j));
  p.out_shape.assign(x.sizes().begin(), x.sizes().end() - nd);
  return true;
}

std::optional<Pool> window_pool(const Tensor& x, int nd, IntArrayRef ks, IntArrayRef stride,
                                IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Pool p;
  if (!nn_float(x) || !split_input(x, nd, p)) return std::nullopt;
  int64_t k[3], s[3], pd[3], dl[3];
  if (!expand(ks, nd, k, 0, false) || !expand(stride, nd, s, 0, true) ||
      !expand(padding, nd, pd, 0, false) || !expand(dilation, nd, dl, 1, false))
    return std::nullopt;
  if (stride.empty())
    for (int j = 0; j < nd; ++j) s[j] = k[j];
  for (int j = 0; j < nd; ++j) {
    if (k[j] <= 0 || s[j] <= 0 || dl[j] <= 0 || pd[j] < 0 || pd[j] > k[j] / 2)
      return std::nullopt;
    const int64_t in = p.g.in[3 - nd + j];
    int64_t o = at::native::pooling_output_shape_pad_lr<int64_t>(in, k[j], pd[j], pd[j], s[j],
                                                                 dl[j], ceil_mode);
    if (o < 1) return std::nullopt;
    const int jj = 3 - nd + j;
    p.g.out[jj] = u32(o);
    p.g.k[jj] = u32(k[j]);
    p.g.s[jj] = u32(s[j]);
    p.g.p[jj] = u32(pd[j]);
    p.g.d[jj] = u32(dl[j]);
    p.out_shape.push_back(o);
  }
  return p;
}

std::optional<Pool> adaptive_pool(const Tensor& x, int nd, IntArrayRef output_size) {
  Pool p;
  if (!nn_float(x) || !split_input(x, nd, p) || static_cast<int>(output_size.size()) != nd)
    return std::nullopt;
  p.g.adaptive = true;
  for (int j = 0; j < nd; ++j) {
    if (output_size[j] < 0) return std::nullopt;
    p.g.out[3 - nd + j] = u32(output_size[j]);
    p.out_shape.push_back(output_size[j]);
  }
  return p;
}

bool aliases(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage().is_alias_of(b.storage());
}

// Runs `fill` on `out` itself when it is contiguous and apart from the inputs, else on a
// fresh tensor copied into it.
template <class F>
void into(Tensor& out, std::initializer_list<const Tensor*> inputs, F fill) {
  bool direct = out.is_contiguous();
  for (const Tensor* t : inputs) direct = direct && !aliases(out, *t);
  if (direct) return fill(out);
  Tensor tmp = at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
  fill(tmp);
  out.copy_(tmp);
}

void max_forward(const Tensor& self, const Pool& p, Tensor& out, Tensor& indices) {
  at::native::resize_output(out, p.out_shape);
  at::native::resize_output(indices, p.out_shape);
  if (out.numel() == 0) return;
  Tensor x = self.contiguous();
  into(out, {&self}, [&](Tensor& y) {
    into(indices, {&self}, [&](Tensor& idx) {
      TWGPU_TRY
      RuntimeLock lock;
      nn::pool_max_forward(lock.ctx(), operand(x), p.g, operand(y), operand(idx));
      TWGPU_CATCH
    });
  });
}

// Scatter backward: a float32 accumulator, converted into grad_input.
template <class F>
void scatter_backward(const Tensor& self, Tensor& grad_input, F scatter) {
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return;
  Tensor acc = at::zeros(self.sizes(), self.options().dtype(at::kFloat));
  TWGPU_TRY
  RuntimeLock lock;
  scatter(lock.ctx(), operand(acc));
  TWGPU_CATCH
  grad_input.copy_(acc);
}

bool grad_matches(const Tensor& grad_out, const Tensor& self, const Pool& p) {
  return grad_out.scalar_type() == self.scalar_type() &&
         grad_out.sizes() == IntArrayRef(p.out_shape);
}

// ---- max pool with indices ----------------------------------------------------------------

std::tuple<Tensor&, Tensor&> max_pool2d_out(const Tensor& self, IntArrayRef ks, IntArrayRef st,
                                            IntArrayRef pad, IntArrayRef dil, bool ceil,
                                            Tensor& out, Tensor& indices) {
  auto p = window_pool(self, 2, ks, st, pad, dil, ceil);
  if (!p || out.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return call_cpu_fallback<at::_ops::max_pool2d_with_indices_out>(self, ks, st, pad, dil, ceil,
                                                                    out, indices);
  max_forward(self, *p, out, indices);
  return {out, indices};
}

std::tuple<Tensor&, Tensor&> max_pool3d_out(const Tensor& self, IntArrayRef ks, IntArrayRef st,
                                            IntArrayRef pad, IntArrayRef dil, bool ceil,
                                            Tensor& out, Tensor& indices) {
  auto p = window_pool(self, 3, ks, st, pad, dil, ceil);
  if (!p || out.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return call_cpu_fallback<at::_ops::max_pool3d_with_indices_out>(self, ks, st, pad, dil, ceil,
                                                                    out, indices);
  max_forward(self, *p, out, indices);
  return {out, indices};
}

std::tuple<Tensor, Tensor> max_pool3d(const Tensor& self, IntArrayRef ks, IntArrayRef st,
                                      IntArrayRef pad, IntArrayRef dil, bool ceil) {
  auto p = window_pool(self, 3, ks, st, pad, dil, ceil);
  if (!p) return call_cpu_fallback<at::_ops::max_pool3d_with_indices>(self, ks, st, pad, dil, ceil);
  Tensor out = at::empty({0}, self.options()), idx = at::empty({0}, self.options().dtype(at::kLong));
  max_forward(self, *p, out, idx);
  return {out, idx};
}

Tensor& max_pool_backward(const Tensor& grad_out, const Tensor& self, const Tensor& indices,
                          const Pool& p, Tensor& grad_input) {
  Tensor go = grad_out.contiguous(), idx = indices.contiguous();
  scatter_backward(self, grad_input, [&](Context& ctx, const nn::Operand& acc) {
    nn::pool_max_backward(ctx, operand(go), operand(idx), p.g, acc);
  });
  return grad_input;
}

Tensor& max_pool2d_backward_out(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                                IntArrayRef st, IntArrayRef pad, IntArrayRef dil, bool ceil,
                                const Tensor& indices, Tensor& grad_input) {
  auto p = window_pool(self, 2, ks, st, pad, dil, ceil);
  if (!p || !grad_matches(grad_out, self, *p) || indices.scalar_type() != at::kLong ||
      indices.sizes() != grad_out.sizes())
    return call_cpu_fallback<at::_ops::max_pool2d_with_indices_backward_grad_input>(
        grad_out, self, ks, st, pad, dil, ceil, indices, grad_input);
  return max_pool_backward(grad_out, self, indices, *p, grad_input);
}

Tensor& max_pool3d_backward_out(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                                IntArrayRef st, IntArrayRef pad, IntArrayRef dil, bool ceil,
                                const Tensor& indices, Tensor& grad_input) {
  auto p = window_pool(self, 3, ks, st, pad, dil, ceil);
  if (!p || !grad_matches(grad_out, self, *p) || indices.scalar_type() != at::kLong ||
      indices.sizes() != grad_out.sizes())
    return call_cpu_fallback<at::_ops::max_pool3d_with_indices_backward_grad_input>(
        grad_out, self, ks, st, pad, dil, ceil, indices, grad_input);
  return max_pool_backward(grad_out, self, indices, *p, grad_input);
}

Tensor max_pool3d_backward(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                           IntArrayRef st, IntArrayRef pad, IntArrayRef dil, bool ceil,
                           const Tensor& indices) {
  Tensor gi = at::empty({0}, self.options());
  return max_pool3d_backward_out(grad_out, self, ks, st, pad, dil, ceil, indices, gi);
}

// ---- average pool --------------------------------------------------------------------------

void avg_forward(const Tensor& self, const Pool& p, bool cip, int64_t div, Tensor& out) {
  at::native::resize_output(out, p.out_shape);
  if (out.numel() == 0) return;
  Tensor x = self.contiguous();
  into(out, {&self}, [&](Tensor& y) {
    TWGPU_TRY
    RuntimeLock lock;
    nn::pool_avg_forward(lock.ctx(), operand(x), p.g, cip, div, operand(y));
    TWGPU_CATCH
  });
}

void avg_backward(const Tensor& grad_out, const Tensor& self, const Pool& p, bool cip,
                  int64_t div, Tensor& grad_input) {
  Tensor go = grad_out.contiguous();
  scatter_backward(self, grad_input, [&](Context& ctx, const nn::Operand& acc) {
    nn::pool_avg_backward(ctx, operand(go), p.g, cip, div, acc);
  });
}

bool divisor_ok(std::optional<int64_t> d) { return !d.has_value() || *d != 0; }

Tensor& avg_pool2d_out(const Tensor& self, IntArrayRef ks, IntArrayRef st, IntArrayRef pad,
                       bool ceil, bool cip, std::optional<int64_t> div, Tensor& out) {
  auto p = window_pool(self, 2, ks, st, pad, {1}, ceil);
  if (!p || !divisor_ok(div) || out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::avg_pool2d_out>(self, ks, st, pad, ceil, cip, div, out);
  avg_forward(self, *p, cip, div.value_or(0), out);
  return out;
}

Tensor& avg_pool3d_out(const Tensor& self, IntArrayRef ks, IntArrayRef st, IntArrayRef pad,
                       bool ceil, bool cip, std::optional<int64_t> div, Tensor& out) {
  auto p = window_pool(self, 3, ks, st, pad, {1}, ceil);
  if (!p || !divisor_ok(div) || out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::avg_pool3d_out>(self, ks, st, pad, ceil, cip, div, out);
  avg_forward(self, *p, cip, div.value_or(0), out);
  return out;
}

Tensor& avg_pool2d_backward_out(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                                IntArrayRef st, IntArrayRef pad, bool ceil, bool cip,
                                std::optional<int64_t> div, Tensor& grad_input) {
  auto p = window_pool(self, 2, ks, st, pad, {1}, ceil);
  if (!p || !divisor_ok(div) || !grad_matches(grad_out, self, *p))
    return call_cpu_fallback<at::_ops::avg_pool2d_backward_grad_input>(grad_out, self, ks, st, pad,
                                                                       ceil, cip, div, grad_input);
  avg_backward(grad_out, self, *p, cip, div.value_or(0), grad_input);
  return grad_input;
}

Tensor& avg_pool3d_backward_out(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                                IntArrayRef st, IntArrayRef pad, bool ceil, bool cip,
                                std::optional<int64_t> div, Tensor& grad_input) {
  auto p = window_pool(self, 3, ks, st, pad, {1}, ceil);
  if (!p || !divisor_ok(div) || !grad_matches(grad_out, self, *p))
    return call_cpu_fallback<at::_ops::avg_pool3d_backward_grad_input>(grad_out, self, ks, st, pad,
                                                                       ceil, cip, div, grad_input);
  avg_backward(grad_out, self, *p, cip, div.value_or(0), grad_input);
  return grad_input;
}

// ---- adaptive pools -------------------------------------------------------------------------

Tensor adaptive_avg2d(const Tensor& self, IntArrayRef size) {
  auto p = adaptive_pool(self, 2, size);
  if (!p) return call_cpu_fallback<at::_ops::_adaptive_avg_pool2d>(self, size);
  Tensor out = at::empty({0}, self.options());
  avg_forward(self, *p, false, 0, out);
  return out;
}

Tensor adaptive_avg3d(const Tensor& self, IntArrayRef size) {
  auto p = adaptive_pool(self, 3, size);
  if (!p) return call_cpu_fallback<at::_ops::_adaptive_avg_pool3d>(self, size);
  Tensor out = at::empty({0}, self.options());
  avg_forward(self, *p, false, 0, out);
  return out;
}

Tensor adaptive_avg2d_backward(const Tensor& grad_out, const Tensor& self) {
  std::optional<Pool> p;
  if (grad_out.dim() == self.dim() && grad_out.dim() >= 3)
    p = adaptive_pool(self, 2, grad_out.sizes().slice(grad_out.dim() - 2));
  if (!p || !grad_matches(grad_out, self, *p))
    return call_cpu_fallback<at::_ops::_adaptive_avg_pool2d_backward>(grad_out, self);
  Tensor gi = at::empty({0}, self.options());
  avg_backward(grad_out, self, *p, false, 0, gi);
  return gi;
}

Tensor adaptive_avg3d_backward(const Tensor& grad_out, const Tensor& self) {
  std::optional<Pool> p;
  if (grad_out.dim() == self.dim() && grad_out.dim() >= 4)
    p = adaptive_pool(self, 3, grad_out.sizes().slice(grad_out.dim() - 3));
  if (!p || !grad_matches(grad_out, self, *p))
    return call_cpu_fallback<at::_ops::_adaptive_avg_pool3d_backward>(grad_out, self);
  Tensor gi = at::empty({0}, self.options());
  avg_backward(grad_out, self, *p, false, 0, gi);
  return gi;
}

std::tuple<Tensor&, Tensor&> adaptive_max2d_out(const Tensor& self, IntArrayRef size, Tensor& out,
                                                Tensor& indices) {
  auto p = adaptive_pool(self, 2, size);
  if (!p || out.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong ||
      p->g.out_count() == 0)
    return call_cpu_fallback<at::_ops::adaptive_max_pool2d_out>(self, size, out, indices);
  max_forward(self, *p, out, indices);
  return {out, indices};
}

std::tuple<Tensor&, Tensor&> adaptive_max3d_out(const Tensor& self, IntArrayRef size, Tensor& out,
                                                Tensor& indices) {
  auto p = adaptive_pool(self, 3, size);
  if (!p || out.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong ||
      p->g.out_count() == 0)
    return call_cpu_fallback<at::_ops::adaptive_max_pool3d_out>(self, size, out, indices);
  max_forward(self, *p, out, indices);
  return {out, indices};
}

Tensor& adaptive_max2d_backward_out(const Tensor& grad_out, const Tensor& self,
                                    const Tensor& indices, Tensor& grad_input) {
  std::optional<Pool> p;
  if (grad_out.dim() == self.dim() && grad_out.dim() >= 3)
    p = adaptive_pool(self, 2, grad_out.sizes().slice(grad_out.dim() - 2));
  if (!p || !grad_matches(grad_out, self, *p) || indices.scalar_type() != at::kLong ||
      indices.sizes() != grad_out.sizes())
    return call_cpu_fallback<at::_ops::adaptive_max_pool2d_backward_grad_input>(grad_out, self,
                                                                               indices, grad_input);
  return max_pool_backward(grad_out, self, indices, *p, grad_input);
}

Tensor& adaptive_max3d_backward_out(const Tensor& grad_out, const Tensor& self,
                                    const Tensor& indices, Tensor& grad_input) {
  std::optional<Pool> p;
  if (grad_out.dim() == self.dim() && grad_out.dim() >= 4)
    p = adaptive_pool(self, 3, grad_out.sizes().slice(grad_out.dim() - 3));
  if (!p || !grad_matches(grad_out, self, *p) || indices.scalar_type() != at::kLong ||
      indices.sizes() != grad_out.sizes())
    return call_cpu_fallback<at::_ops::adaptive_max_pool3d_backward_grad_input>(grad_out, self,
                                                                               indices, grad_input);
  return max_pool_backward(grad_out, self, indices, *p, grad_input);
}

// ---- fractional max pooling ---------------------------------------------------------------

// Geometry of a fractional pool over nd spatial dims, or nullopt where the CPU would raise.
std::optional<Pool> fractional_pool(const Tensor& x, int nd, IntArrayRef ks, IntArrayRef os) {
  Pool p;
  if (!nn_float(x) || !split_input(x, nd, p) || static_cast<int>(ks.size()) != nd ||
      static_cast<int>(os.size()) != nd)
    return std::nullopt;
  for (int j = 0; j < nd; ++j) {
    const int jj = 3 - nd + j;
    const int64_t in = p.g.in[jj];
    // The CPU's checks: o + k - 1 <= in for 2-d, < in for 3-d.
    const int64_t reach = os[j] + ks[j] - 1;
    if (ks[j] <= 0 || os[j] <= 0 || reach > in || (nd == 3 && reach == in)) return std::nullopt;
    p.g.k[jj] = u32(ks[j]);
    p.g.out[jj] = u32(os[j]);
    p.out_shape.push_back(os[j]);
  }
  return p;
}

// Which sample moves which dim, as the CPU reads them: 2-d (W, H), 3-d (T, H, W).
nn::FractionalSamples fractional_samples(int nd, const Tensor& samples) {
  nn::FractionalSamples f;
  f.per_plane = static_cast<uint32_t>(nd);
  if (nd == 3) f.index[0] = 0, f.index[1] = 1, f.index[2] = 2;
  f.round = to_dtype_or_throw(samples.scalar_type());
  return f;
}

template <int ND>
std::tuple<Tensor&, Tensor&> fractional_out(const Tensor& self, IntArrayRef ks, IntArrayRef os,
                                            const Tensor& samples, Tensor& out, Tensor& indices) {
  auto fallback = [&]() -> std::tuple<Tensor&, Tensor&> {
    if constexpr (ND == 2)
      return call_cpu_fallback<at::_ops::fractional_max_pool2d_output>(self, ks, os, samples, out, indices);
    else
      return call_cpu_fallback<at::_ops::fractional_max_pool3d_output>(self, ks, os, samples, out, indices);
  };
  auto p = fractional_pool(self, ND, ks, os);
  // samples: [N (1 unbatched), C, ND] of the input's dtype.
  const int64_t batch = self.dim() == ND + 2 ? self.size(0) : 1;
  const int64_t channels = self.size(self.dim() - ND - 1);
  if (!p || out.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong ||
      samples.scalar_type() != self.scalar_type() || samples.dim() != 3 ||
      samples.size(0) < batch || samples.size(1) < channels || samples.size(2) != ND ||
      samples.device() != self.device())
    return fallback();
  at::native::resize_output(out, p->out_shape);
  at::native::resize_output(indices, p->out_shape);
  if (out.numel() == 0) return {out, indices};
  Tensor x = self.contiguous();
  Tensor u = samples.narrow(0, 0, batch).narrow(1, 0, channels).contiguous();
  into(out, {&self, &samples}, [&](Tensor& y) {
    into(indices, {&self, &samples}, [&](Tensor& idx) {
      TWGPU_TRY
      RuntimeLock lock;
      nn::pool_max_fractional(lock.ctx(), operand(x), operand(u), p->g, fractional_samples(ND, u),
                              operand(y), operand(idx));
      TWGPU_CATCH
    });
  });
  return {out, indices};
}

template <int ND>
Tensor& fractional_backward_out(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                                IntArrayRef os, const Tensor& indices, Tensor& grad_input) {
  auto p = fractional_pool(self, ND, ks, os);
  if (!p || !grad_matches(grad_out, self, *p) || indices.scalar_type() != at::kLong ||
      indices.sizes() != grad_out.sizes()) {
    if constexpr (ND == 2)
      return call_cpu_fallback<at::_ops::fractional_max_pool2d_backward_grad_input>(
          grad_out, self, ks, os, indices, grad_input);
    else
      return call_cpu_fallback<at::_ops::fractional_max_pool3d_backward_grad_input>(
          grad_out, self, ks, os, indices, grad_input);
  }
  return max_pool_backward(grad_out, self, indices, *p, grad_input);
}

template <int ND>
Tensor fractional_backward(const Tensor& grad_out, const Tensor& self, IntArrayRef ks,
                           IntArrayRef os, const Tensor& indices) {
  Tensor gi = at::empty({0}, self.options());
  return fractional_backward_out<ND>(grad_out, self, ks, os, indices, gi);
}

// ---- max unpooling -------------------------------------------------------------------------

// Unpools `self` ([N, C, *in] or [C, *in]) into `output_size`; false when not native, or
// when an index is out of range (the CPU raises its error).
bool unpool_native(const Tensor& self, const Tensor& indices, IntArrayRef output_size, int nd,
                   Tensor& out) {
  if (!nn_float(self) || indices.scalar_type() != at::kLong || indices.sizes() != self.sizes() ||
      static_cast<int>(output_size.size()) != nd || (self.dim() != nd + 1 && self.dim() != nd + 2) ||
      out.scalar_type() != self.scalar_type())
    return false;
  int64_t out_plane = 1, in_plane = 1, planes = 1;
  for (int j = 0; j < nd; ++j) {
    if (output_size[j] <= 0 || self.size(self.dim() - nd + j) <= 0) return false;
    out_plane *= output_size[j];
    in_plane *= self.size(self.dim() - nd + j);
  }
  for (int64_t d = 0; d < self.dim() - nd; ++d) planes *= self.size(d);
  if (self.dim() == nd + 2 && self.size(1) == 0) return false;
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - nd);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  Tensor x = self.contiguous(), idx = indices.contiguous();
  Tensor result = at::zeros(shape, x.options());
  if (x.numel() > 0) {
    Tensor bad = at::empty({1}, x.options().dtype(at::kFloat));
    TWGPU_TRY
    RuntimeLock lock;
    nn::count_bad_indices(lock.ctx(), operand(idx), static_cast<uint64_t>(idx.numel()),
                          u32(out_plane), operand(bad));
    TWGPU_CATCH
    if (bad.item<float>() > 0) return false;
    TWGPU_TRY
    RuntimeLock lock;
    nn::max_unpool(lock.ctx(), operand(x), operand(idx), u32(planes), u32(in_plane),
                   u32(out_plane), operand(result));
    TWGPU_CATCH
  }
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return true;
}

Tensor max_unpool2d(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
  Tensor out = at::empty({0}, self.options());
  if (!unpool_native(self, indices, output_size, 2, out))
    return call_cpu_fallback<at::_ops::max_unpool2d>(self, indices, output_size);
  return out;
}
Tensor& max_unpool2d_out(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                         Tensor& out) {
  if (!unpool_native(self, indices, output_size, 2, out))
    return call_cpu_fallback<at::_ops::max_unpool2d_out>(self, indices, output_size, out);
  return out;
}
bool unpool3d_args_ok(IntArrayRef stride, IntArrayRef padding) {
  if (stride.size() != 3 || padding.size() != 3) return false;
  for (int j = 0; j < 3; ++j)
    if (stride[j] <= 0) return false;
  return true;
}
Tensor max_unpool3d(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                    IntArrayRef stride, IntArrayRef padding) {
  Tensor out = at::empty({0}, self.options());
  if (!unpool3d_args_ok(stride, padding) || !unpool_native(self, indices, output_size, 3, out))
    return call_cpu_fallback<at::_ops::max_unpool3d>(self, indices, output_size, stride, padding);
  return out;
}
Tensor& max_unpool3d_out(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                         IntArrayRef stride, IntArrayRef padding, Tensor& out) {
  if (!unpool3d_args_ok(stride, padding) || !unpool_native(self, indices, output_size, 3, out))
    return call_cpu_fallback<at::_ops::max_unpool3d_out>(self, indices, output_size, stride,
                                                         padding, out);
  return out;
}

// channel_shuffle: a view, a transpose and a native copy.
Tensor channel_shuffle(const Tensor& self, int64_t groups) {
  if (self.dim() <= 2 || groups <= 0 || self.size(1) % groups != 0 || self.numel() == 0)
    return call_cpu_fallback<at::_ops::channel_shuffle>(self, groups);
  std::vector<int64_t> split = {self.size(0), groups, self.size(1) / groups};
  split.insert(split.end(), self.sizes().begin() + 2, self.sizes().end());
  return self.reshape(split)
      .transpose(1, 2)
      .contiguous()
      .view(self.sizes())
      .contiguous(self.suggest_memory_format());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_unpool2d", TORCH_FN(max_unpool2d));
  m.impl("max_unpool2d.out", TORCH_FN(max_unpool2d_out));
  m.impl("max_unpool3d", TORCH_FN(max_unpool3d));
  m.impl("max_unpool3d.out", TORCH_FN(max_unpool3d_out));
  m.impl("channel_shuffle", TORCH_FN(channel_shuffle));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(max_pool2d_out));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(max_pool2d_backward_out));
  m.impl("max_pool3d_with_indices", TORCH_FN(max_pool3d));
  m.impl("max_pool3d_with_indices.out", TORCH_FN(max_pool3d_out));
  m.impl("max_pool3d_with_indices_backward", TORCH_FN(max_pool3d_backward));
  m.impl("max_pool3d_with_indices_backward.grad_input", TORCH_FN(max_pool3d_backward_out));
  m.impl("avg_pool2d.out", TORCH_FN(avg_pool2d_out));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(avg_pool2d_backward_out));
  m.impl("avg_pool3d.out", TORCH_FN(avg_pool3d_out));
  m.impl("avg_pool3d_backward.grad_input", TORCH_FN(avg_pool3d_backward_out));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg2d_backward));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(adaptive_avg3d));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(adaptive_avg3d_backward));
  m.impl("fractional_max_pool2d.output", TORCH_FN(fractional_out<2>));
  m.impl("fractional_max_pool3d.output", TORCH_FN(fractional_out<3>));
  m.impl("fractional_max_pool2d_backward.grad_input", TORCH_FN(fractional_backward_out<2>));
  m.impl("fractional_max_pool3d_backward.grad_input", TORCH_FN(fractional_backward_out<3>));
  m.impl("fractional_max_pool2d_backward", TORCH_FN(fractional_backward<2>));
  m.impl("fractional_max_pool3d_backward", TORCH_FN(fractional_backward<3>));
  m.impl("adaptive_max_pool2d.out", TORCH_FN(adaptive_max2d_out));
  m.impl("adaptive_max_pool2d_backward.grad_input", TORCH_FN(adaptive_max2d_backward_out));
  m.impl("adaptive_max_pool3d.out", TORCH_FN(adaptive_max3d_out));
  m.impl("adaptive_max_pool3d_backward.grad_input", TORCH_FN(adaptive_max3d_backward_out));
}

}  // namespace twgpu::aten
