// Native grid sampling: grid_sampler_2d (bilinear, nearest, bicubic) and grid_sampler_3d
// (trilinear, nearest) with zeros/border/reflection padding and both corner alignments,
// and their backward ops (the input gradient only when output_mask[0], as on the CPU; the
// grid gradient always). float32, float16 and bfloat16 compute in f32; gradients
// accumulate in f32 and are rounded once. PyTorch's own argument checks run first (the
// CPU's messages); other dtypes and modes go to the CPU fallback. F.grid_sample and
// torch.grid_sampler reach these through PyTorch's composites.
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/grid_sampler_2d_backward_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/grid_sampler_3d_backward_ops.h>
#include <ATen/ops/grid_sampler_3d_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/binding_window.h"
#include "kernels/nn_grid_sample.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

void check_arguments(const Tensor& input, const Tensor& grid, int64_t interp, int nd) {
  at::native::check_grid_sampler_common(input, grid);
  if (nd == 2) at::native::check_grid_sampler_2d(input, grid);
  else at::native::check_grid_sampler_3d(input, grid, interp);
}

// The geometry when the call is native (after the checks), nullopt otherwise.
std::optional<nn::GridGeometry> geometry(const Tensor& input, const Tensor& grid, int64_t interp,
                                         int64_t padding, bool align, int nd) {
  if (!nn_float(input) || grid.scalar_type() != input.scalar_type() || interp < 0 ||
      interp > (nd == 2 ? 2 : 1) || padding < 0 || padding > 2)
    return std::nullopt;
  if (input.numel() > INT32_MAX || grid.numel() > INT32_MAX) return std::nullopt;
  nn::GridGeometry g;
  g.nd = nd;
  g.n = u32(input.size(0));
  g.channels = u32(input.size(1));
  g.w = u32(input.size(-1));
  g.h = u32(input.size(-2));
  g.d = nd == 3 ? u32(input.size(2)) : 1u;
  int64_t points = 1;
  for (int k = 1; k <= nd; ++k) points *= grid.size(k);
  if (points * std::max<int64_t>(input.size(0), 1) * std::max<int64_t>(input.size(1), 1) > INT32_MAX)
    return std::nullopt;
  g.points = u32(points);
  g.interp = static_cast<nn::GridInterp>(interp);
  g.padding = static_cast<nn::GridPadding>(padding);
  g.align_corners = align;
  return g;
}

std::vector<int64_t> output_shape(const Tensor& input, const Tensor& grid, int nd) {
  std::vector<int64_t> shape = {input.size(0), input.size(1)};
  for (int k = 1; k <= nd; ++k) shape.push_back(grid.size(k));
  return shape;
}

// Inputs, grids or outputs larger than one binding: pieces of one image and a range of
// its channels (a channel's samples need only its plane and the image's grid). Channels
// per piece, or nullopt when everything fits (or one image's grid or plane does not).
std::optional<int64_t> channels_per_piece(const Tensor& input, const Tensor& grid, const nn::GridGeometry& g) {
  const uint64_t budget = window_budget(Context::get());
  const uint64_t e = 4;  // the widest element either side holds (f32 gradients)
  const uint64_t plane = uint64_t(g.d) * g.h * g.w * e, samples = uint64_t(g.points) * e;
  const uint64_t image_grid = uint64_t(g.points) * g.nd * e;
  if (uint64_t(input.numel()) * e <= budget && uint64_t(grid.numel()) * e <= budget &&
      uint64_t(g.n) * g.channels * samples <= budget)
    return std::nullopt;
  if (image_grid > budget || plane > budget || samples > budget) return std::nullopt;
  return static_cast<int64_t>(std::max<uint64_t>(1, budget / std::max(plane, samples)));
}

// `piece(n, c, k, geometry)` over images n and channel ranges [c, c + k).
template <typename Piece>
void over_pieces(const nn::GridGeometry& g, int64_t per_piece, Piece piece) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.channels; c += per_piece) {
      nn::GridGeometry q = g;
      q.n = 1;
      q.channels = u32(std::min<int64_t>(per_piece, g.channels - c));
      piece(n, c, static_cast<int64_t>(q.channels), q);
    }
}

std::optional<Tensor> forward(const Tensor& input, const Tensor& grid, int64_t interp,
                              int64_t padding, bool align, int nd) {
  check_arguments(input, grid, interp, nd);
  auto g = geometry(input, grid, interp, padding, align, nd);
  if (!g) return std::nullopt;
  Tensor out = at::empty(output_shape(input, grid, nd), input.options());
  if (out.numel() == 0) return out;
  Tensor x = input.contiguous(), gr = grid.contiguous();
  if (auto per_piece = channels_per_piece(x, gr, *g)) {
    over_pieces(*g, *per_piece, [&](int64_t n, int64_t c, int64_t k, const nn::GridGeometry& q) {
      TWGPU_TRY
      RuntimeLock lock;
      nn::grid_sample_forward(lock.ctx(), operand(x.narrow(0, n, 1).narrow(1, c, k)),
                              operand(gr.narrow(0, n, 1)), q, operand(out.narrow(0, n, 1).narrow(1, c, k)));
      TWGPU_CATCH
    });
    return out;
  }
  TWGPU_TRY
  RuntimeLock lock;
  nn::grid_sample_forward(lock.ctx(), operand(x), operand(gr), *g, operand(out));
  TWGPU_CATCH
  return out;
}

std::optional<std::tuple<Tensor, Tensor>> backward(const Tensor& grad_out, const Tensor& input,
                                                   const Tensor& grid, int64_t interp,
                                                   int64_t padding, bool align,
                                                   std::array<bool, 2> mask, int nd) {
  check_arguments(input, grid, interp, nd);
  auto g = geometry(input, grid, interp, padding, align, nd);
  if (!g || grad_out.scalar_type() != input.scalar_type() ||
      grad_out.sizes() != at::IntArrayRef(output_shape(input, grid, nd)))
    return std::nullopt;
  Tensor gi = mask[0] ? at::zeros(input.sizes(), input.options().dtype(at::kFloat)) : Tensor();
  Tensor gg = at::zeros(grid.sizes(), grid.options().dtype(at::kFloat));
  if (uint64_t(g->n) * g->points > 0 && g->channels > 0) {
    Tensor go = grad_out.contiguous(), x = input.contiguous(), gr = grid.contiguous();
    if (auto per_piece = channels_per_piece(x, gr, *g)) {
      // The grid's gradient sums over channels: each piece's into a fresh buffer, added.
      over_pieces(*g, *per_piece, [&](int64_t n, int64_t c, int64_t k, const nn::GridGeometry& q) {
        Tensor gg_piece = at::zeros(gg.narrow(0, n, 1).sizes(), gg.options());
        TWGPU_TRY
        RuntimeLock lock;
        nn::grid_sample_backward(lock.ctx(), operand(go.narrow(0, n, 1).narrow(1, c, k)),
                                 operand(x.narrow(0, n, 1).narrow(1, c, k)), operand(gr.narrow(0, n, 1)), q,
                                 gi.defined() ? operand(gi.narrow(0, n, 1).narrow(1, c, k)) : operand(gi),
                                 operand(gg_piece));
        TWGPU_CATCH
        gg.narrow(0, n, 1).add_(gg_piece);
      });
    } else {
      TWGPU_TRY
      RuntimeLock lock;
      nn::grid_sample_backward(lock.ctx(), operand(go), operand(x), operand(gr), *g, operand(gi),
                               operand(gg));
      TWGPU_CATCH
    }
  }
  if (gi.defined() && input.scalar_type() != at::kFloat) gi = gi.to(input.scalar_type());
  if (grid.scalar_type() != at::kFloat) gg = gg.to(grid.scalar_type());
  return std::make_tuple(gi, gg);
}

Tensor grid_sampler_2d(const Tensor& input, const Tensor& grid, int64_t interp, int64_t padding,
                       bool align) {
  if (auto out = forward(input, grid, interp, padding, align, 2)) return *out;
  return call_cpu_fallback<at::_ops::grid_sampler_2d>(input, grid, interp, padding, align);
}

Tensor grid_sampler_3d(const Tensor& input, const Tensor& grid, int64_t interp, int64_t padding,
                       bool align) {
  if (auto out = forward(input, grid, interp, padding, align, 3)) return *out;
  return call_cpu_fallback<at::_ops::grid_sampler_3d>(input, grid, interp, padding, align);
}

std::tuple<Tensor, Tensor> grid_sampler_2d_backward(const Tensor& grad_out, const Tensor& input,
                                                    const Tensor& grid, int64_t interp,
                                                    int64_t padding, bool align,
                                                    std::array<bool, 2> mask) {
  if (auto r = backward(grad_out, input, grid, interp, padding, align, mask, 2)) return *r;
  return call_cpu_fallback<at::_ops::grid_sampler_2d_backward>(grad_out, input, grid, interp,
                                                               padding, align, mask);
}

std::tuple<Tensor, Tensor> grid_sampler_3d_backward(const Tensor& grad_out, const Tensor& input,
                                                    const Tensor& grid, int64_t interp,
                                                    int64_t padding, bool align,
                                                    std::array<bool, 2> mask) {
  if (auto r = backward(grad_out, input, grid, interp, padding, align, mask, 3)) return *r;
  return call_cpu_fallback<at::_ops::grid_sampler_3d_backward>(grad_out, input, grid, interp,
                                                               padding, align, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_2d", TORCH_FN(grid_sampler_2d));
  m.impl("grid_sampler_3d", TORCH_FN(grid_sampler_3d));
  m.impl("grid_sampler_2d_backward", TORCH_FN(grid_sampler_2d_backward));
  m.impl("grid_sampler_3d_backward", TORCH_FN(grid_sampler_3d_backward));
}

}  // namespace twgpu::aten
