// Native pairwise distances: _cdist_forward / _cdist_backward and _pdist_forward /
// _pdist_backward (cdist and pdist themselves are composites over these). float32 runs
// natively; float64 and every case the CPU would reject go to the CPU kernels (which
// raise the CPU's errors). Like the CPU, _cdist_forward computes p = 2 through
// _euclidean_dist (a matmul) when compute_mode allows it and either side has more than
// 25 rows.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/_cdist_backward_ops.h>
#include <ATen/ops/_cdist_forward_ops.h>
#include <ATen/ops/_euclidean_dist.h>
#include <ATen/ops/_pdist_backward_ops.h>
#include <ATen/ops/_pdist_forward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/binding_window.h"
#include "kernels/distance.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

bool native_f32(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->scalar_type() != at::kFloat) return false;
  return true;
}
bool fits_u32(int64_t v) { return v >= 0 && v <= std::numeric_limits<uint32_t>::max(); }

bool use_mm(double p, int64_t mode, int64_t r1, int64_t r2) {
  return p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)));
}

// The broadcast batch dimensions of x1 [..., r1, m] and x2 [..., r2, m].
std::vector<int64_t> batch_shape(const Tensor& x1, const Tensor& x2) {
  return at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
}

// Operands or distances larger than one binding: blocks of (rows of x1) x (rows of x2),
// one batch at a time, each within a binding. Rows per block, or nullopt when all fits.
struct DistBlocks {
  int64_t rows1, rows2;
};
std::optional<DistBlocks> dist_blocks(int64_t nb, int64_t r1, int64_t r2, int64_t m) {
  const int64_t words = static_cast<int64_t>(window_budget(Context::get()) / 4);
  if (nb * r1 * m <= words && nb * r2 * m <= words && nb * r1 * r2 <= words) return std::nullopt;
  const int64_t rows2 = std::clamp<int64_t>(words / std::max<int64_t>(m, 1), 1, r2);
  const int64_t rows1 = std::clamp<int64_t>(std::min(words / std::max<int64_t>(m, 1), words / rows2), 1, r1);
  return DistBlocks{rows1, rows2};
}

// `block(batch, i, rows1, j, rows2)` over the blocks of a [nb, r1, r2] distance matrix.
template <typename Block>
void for_each_dist_block(const DistBlocks& blocks, int64_t nb, int64_t r1, int64_t r2, Block block) {
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < r1; i += blocks.rows1)
      for (int64_t j = 0; j < r2; j += blocks.rows2)
        block(b, i, std::min(blocks.rows1, r1 - i), j, std::min(blocks.rows2, r2 - j));
}

Tensor cdist_forward(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ",
              x1.size(-1), " X2: ", x2.size(-1));
  if (!native_f32({&x1, &x2}) || p < 0 || std::isnan(p))
    return call_cpu_fallback<at::_ops::_cdist_forward>(x1, x2, p, compute_mode);
  int64_t mode = compute_mode.value_or(0);
  TORCH_CHECK(mode >= 0 && mode <= 2, "possible modes: 0, 1, 2, but was: ", mode);
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2), m = x1.size(-1);
  std::vector<int64_t> batch = batch_shape(x1, x2);
  const int64_t nb = c10::multiply_integers(batch);
  std::vector<int64_t> s1(batch), s2(batch), out_shape(batch);
  s1.insert(s1.end(), {r1, m});
  s2.insert(s2.end(), {r2, m});
  out_shape.insert(out_shape.end(), {r1, r2});
  if (r1 == 0 || r2 == 0 || nb == 0) return at::empty(out_shape, x1.options());
  if (m == 0) return at::zeros(out_shape, x1.options());
  Tensor a = x1.expand(s1).contiguous().view({nb, r1, m});
  Tensor b = x2.expand(s2).contiguous().view({nb, r2, m});
  if (use_mm(p, mode, r1, r2)) {
    Tensor d = nb == 1 ? at::_euclidean_dist(x1, x2) : at::_euclidean_dist(a, b);
    return d.view(out_shape);
  }
  if (auto blocks = dist_blocks(nb, r1, r2, m)) {
    Tensor out = at::empty({nb, r1, r2}, x1.options());
    const Tensor& bm = b;
    for_each_dist_block(*blocks, nb, r1, r2, [&](int64_t b, int64_t i, int64_t n1, int64_t j, int64_t n2) {
      out[b].narrow(0, i, n1).narrow(1, j, n2).copy_(
          cdist_forward(a[b].narrow(0, i, n1), bm[b].narrow(0, j, n2), p, compute_mode));
    });
    return out.view(out_shape);
  }
  if (!fits_u32(nb * r1 * r2) || !fits_u32(nb * r1 * m) || !fits_u32(nb * r2 * m))
    return call_cpu_fallback<at::_ops::_cdist_forward>(x1, x2, p, compute_mode);
  Tensor out = at::empty(out_shape, x1.options());
  TWGPU_TRY
  RuntimeLock lock;
  dist::cdist_forward(lock.ctx(), operand(a), operand(b), operand(out), u32(nb), u32(r1), u32(r2),
                      u32(m), p);
  TWGPU_CATCH
  return out;
}

Tensor cdist_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p, const Tensor& cdist) {
  if (!native_f32({&grad, &x1, &x2, &cdist}) || x1.dim() < 2 || x2.dim() < 2 || std::isnan(p))
    return call_cpu_fallback<at::_ops::_cdist_backward>(grad, x1, x2, p, cdist);
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2), m = x1.size(-1);
  std::vector<int64_t> batch = batch_shape(x1, x2);
  const int64_t nb = c10::multiply_integers(batch);
  if (r1 == 0 || r2 == 0 || m == 0 || nb == 0) return at::zeros_like(x1, x1.options());
  std::vector<int64_t> s1(batch), s2(batch);
  s1.insert(s1.end(), {r1, m});
  s2.insert(s2.end(), {r2, x2.size(-1)});
  Tensor a = x1.expand(s1).contiguous();
  Tensor b = x2.expand(s2).contiguous();
  Tensor d = cdist.contiguous();
  Tensor g = grad.contiguous();
  if (x2.size(-1) != m || g.numel() != nb * r1 * r2 || d.numel() != nb * r1 * r2)
    return call_cpu_fallback<at::_ops::_cdist_backward>(grad, x1, x2, p, cdist);
  if (auto blocks = dist_blocks(nb, r1, r2, m)) {
    // The gradient of a row of x1 sums over the rows of x2: blocks of them add.
    Tensor out = at::zeros({nb, r1, m}, x1.options());
    Tensor a3 = a.view({nb, r1, m}), b3 = b.view({nb, r2, m});
    Tensor g3 = g.view({nb, r1, r2}), d3 = d.view({nb, r1, r2});
    for_each_dist_block(*blocks, nb, r1, r2, [&](int64_t k, int64_t i, int64_t n1, int64_t j, int64_t n2) {
      out[k].narrow(0, i, n1).add_(cdist_backward(
          g3[k].narrow(0, i, n1).narrow(1, j, n2), a3[k].narrow(0, i, n1), b3[k].narrow(0, j, n2), p,
          d3[k].narrow(0, i, n1).narrow(1, j, n2)));
    });
    return out.view(a.sizes());
  }
  if (!fits_u32(nb * r1 * r2) || !fits_u32(nb * r1 * m) || !fits_u32(nb * r2 * m))
    return call_cpu_fallback<at::_ops::_cdist_backward>(grad, x1, x2, p, cdist);
  Tensor out = at::empty({nb, r1, m}, x1.options());
  TWGPU_TRY
  RuntimeLock lock;
  dist::cdist_backward(lock.ctx(), operand(g), operand(a), operand(b), operand(d), operand(out),
                       u32(nb), u32(r1), u32(r2), u32(m), p);
  TWGPU_CATCH
  return out.view(a.sizes());
}

// Pairs are indexed in u32 arithmetic (a * n) inside the kernel.
bool pdist_native(const Tensor& self) {
  return self.scalar_type() == at::kFloat && self.dim() == 2 && self.size(0) < 46341 &&
         fits_u32(self.numel());
}

// pdist's operand or pairs larger than one binding: the full distance matrix by cdist's
// blocks (direct sums, no matmul), its upper triangle selected; the backward scatters the
// pairs' gradients (and distances) into symmetric matrices for cdist's backward.
bool pdist_beyond_binding(int64_t n, int64_t m) {
  const uint64_t budget = window_budget(Context::get());
  return uint64_t(n) * m * 4 > budget || uint64_t(n) * n * 4 > budget;
}

Tensor upper_pairs_mask(int64_t n, const Tensor& like) {
  return at::ones({n, n}, like.options().dtype(at::kBool)).triu(1);
}

Tensor symmetric_from_pairs(const Tensor& pairs, const Tensor& mask) {
  Tensor full = at::zeros(mask.sizes(), pairs.options()).masked_scatter_(mask, pairs);
  return full.add(full.t().contiguous());  // a transposed operand of add would span every window
}

Tensor pdist_forward(const Tensor& self, double p) {
  TORCH_CHECK(self.is_contiguous(), "_pdist_forward requires contiguous input");
  if (!pdist_native(self) || std::isnan(p) || p < 0)
    return call_cpu_fallback<at::_ops::_pdist_forward>(self, p);
  const int64_t n = self.size(0), m = self.size(1);
  if (n <= 1) return at::empty({0}, self.options());
  if (m == 0) return at::zeros({n * (n - 1) / 2}, self.options());
  if (pdist_beyond_binding(n, m))
    return cdist_forward(self, self, p, 2).masked_select(upper_pairs_mask(n, self));
  Tensor out = at::empty({n * (n - 1) / 2}, self.options());
  TWGPU_TRY
  RuntimeLock lock;
  dist::pdist_forward(lock.ctx(), operand(self), operand(out), u32(n), u32(m), p);
  TWGPU_CATCH
  return out;
}

Tensor pdist_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  TORCH_CHECK(self.is_contiguous(), "_pdist_backward requires self to be contiguous");
  TORCH_CHECK(pdist.is_contiguous(), "_pdist_backward requires pdist to be contiguous");
  if (!pdist_native(self) || !native_f32({&grad, &pdist}) || std::isnan(p))
    return call_cpu_fallback<at::_ops::_pdist_backward>(grad, self, p, pdist);
  const int64_t n = self.size(0), m = self.size(1);
  const int64_t pairs = n * (n - 1) / 2;
  if (grad.numel() != pairs || pdist.numel() != pairs)
    return call_cpu_fallback<at::_ops::_pdist_backward>(grad, self, p, pdist);
  Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  if (n <= 1) return out.zero_();
  if (pdist_beyond_binding(n, m)) {
    Tensor mask = upper_pairs_mask(n, self);
    return cdist_backward(symmetric_from_pairs(grad.contiguous(), mask), self, self, p,
                          symmetric_from_pairs(pdist, mask));
  }
  Tensor g = grad.contiguous();  // autograd may hand an expanded (stride 0) gradient
  TWGPU_TRY
  RuntimeLock lock;
  dist::pdist_backward(lock.ctx(), operand(g), operand(self), operand(pdist),
                       operand(out), u32(n), u32(m), p);
  TWGPU_CATCH
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
  m.impl("_pdist_forward", pdist_forward);
  m.impl("_pdist_backward", pdist_backward);
}

}  // namespace twgpu::aten
