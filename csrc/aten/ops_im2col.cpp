// Native im2col / col2im (F.unfold / F.fold and their gradients: each is the other's
// backward). ATen's own shape checks raise the CPU's errors; non-float dtypes go to the
// CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/col2im_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/im2col_ops.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_fold.h"

namespace twgpu::aten {
namespace {

using at::IntArrayRef;
using at::Tensor;

bool pairs(std::initializer_list<IntArrayRef> args) {
  for (auto a : args)
    if (a.size() != 2) return false;
  return true;
}

nn::FoldGeometry fold_geometry(IntArrayRef k, IntArrayRef d, IntArrayRef p, IntArrayRef s) {
  nn::FoldGeometry g;
  g.kH = u32(k[0]); g.kW = u32(k[1]);
  g.dH = u32(d[0]); g.dW = u32(d[1]);
  g.pH = u32(p[0]); g.pW = u32(p[1]);
  g.sH = u32(s[0]); g.sW = u32(s[1]);
  return g;
}

bool im2col_native(const Tensor& self, IntArrayRef k, IntArrayRef d, IntArrayRef p,
                   IntArrayRef s, Tensor& out) {
  if (!nn_float(self) || !pairs({k, d, p, s}) || out.scalar_type() != self.scalar_type())
    return false;
  at::native::im2col_shape_check(self, Tensor(), k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]);
  const bool batched = self.dim() == 4;
  Tensor x = (batched ? self : self.unsqueeze(0)).contiguous();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t oH = (H + 2 * p[0] - (d[0] * (k[0] - 1) + 1)) / s[0] + 1;
  const int64_t oW = (W + 2 * p[1] - (d[1] * (k[1] - 1) + 1)) / s[1] + 1;
  std::vector<int64_t> shape = {N, C * k[0] * k[1], oH * oW};
  Tensor result = at::empty(shape, x.options());
  nn::FoldGeometry g = fold_geometry(k, d, p, s);
  g.planes = u32(N * C); g.H = u32(H); g.W = u32(W); g.oH = u32(oH); g.oW = u32(oW);
  if (result.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    nn::im2col(lock.ctx(), operand(x), g, operand(result));
    TWGPU_CATCH
  }
  if (!batched) result = result.squeeze(0);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return true;
}

bool col2im_native(const Tensor& self, IntArrayRef osz, IntArrayRef k, IntArrayRef d,
                   IntArrayRef p, IntArrayRef s, Tensor& out) {
  if (!nn_float(self) || !pairs({osz, k, d, p, s}) || out.scalar_type() != self.scalar_type())
    return false;
  at::native::col2im_shape_check(self, Tensor(), osz[0], osz[1], k[0], k[1], d[0], d[1], p[0],
                                 p[1], s[0], s[1]);
  const bool batched = self.dim() == 3;
  Tensor cols = (batched ? self : self.unsqueeze(0)).contiguous();
  const int64_t N = cols.size(0), C = cols.size(1) / (k[0] * k[1]);
  const int64_t H = osz[0], W = osz[1];
  const int64_t oH = (H + 2 * p[0] - (d[0] * (k[0] - 1) + 1)) / s[0] + 1;
  const int64_t oW = (W + 2 * p[1] - (d[1] * (k[1] - 1) + 1)) / s[1] + 1;
  Tensor result = at::empty({N, C, H, W}, cols.options());
  nn::FoldGeometry g = fold_geometry(k, d, p, s);
  g.planes = u32(N * C); g.H = u32(H); g.W = u32(W); g.oH = u32(oH); g.oW = u32(oW);
  if (result.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    nn::col2im(lock.ctx(), operand(cols), g, operand(result));
    TWGPU_CATCH
  }
  if (!batched) result = result.squeeze(0);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return true;
}

Tensor& im2col_out(const Tensor& self, IntArrayRef k, IntArrayRef d, IntArrayRef p, IntArrayRef s,
                   Tensor& out) {
  if (!im2col_native(self, k, d, p, s, out))
    return call_cpu_fallback<at::_ops::im2col_out>(self, k, d, p, s, out);
  return out;
}
Tensor im2col(const Tensor& self, IntArrayRef k, IntArrayRef d, IntArrayRef p, IntArrayRef s) {
  Tensor out = at::empty({0}, self.options());
  if (!im2col_native(self, k, d, p, s, out))
    return call_cpu_fallback<at::_ops::im2col>(self, k, d, p, s);
  return out;
}
Tensor& col2im_out(const Tensor& self, IntArrayRef osz, IntArrayRef k, IntArrayRef d,
                   IntArrayRef p, IntArrayRef s, Tensor& out) {
  if (!col2im_native(self, osz, k, d, p, s, out))
    return call_cpu_fallback<at::_ops::col2im_out>(self, osz, k, d, p, s, out);
  return out;
}
Tensor col2im(const Tensor& self, IntArrayRef osz, IntArrayRef k, IntArrayRef d, IntArrayRef p,
              IntArrayRef s) {
  Tensor out = at::empty({0}, self.options());
  if (!col2im_native(self, osz, k, d, p, s, out))
    return call_cpu_fallback<at::_ops::col2im>(self, osz, k, d, p, s);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("im2col", TORCH_FN(im2col));
  m.impl("im2col.out", TORCH_FN(im2col_out));
  m.impl("col2im", TORCH_FN(col2im));
  m.impl("col2im.out", TORCH_FN(col2im_out));
}

}  // namespace twgpu::aten
