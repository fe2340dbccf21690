#include "kernels/convolution.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/binding_window.h"
#include "runtime/context.h"

namespace twgpu {

bool conv_is_pointwise(const ConvGeometry& g) {
  for (int d = 0; d < 3; ++d)
    if (g.ks[d] != 1 || g.stride[d] != 1 || g.pad[d] != 0 || g.xs[d] != g.ys[d]) return false;
  return true;
}

bool conv_gather_columns(Context& ctx, const ConvGeometry& g, uint64_t m, uint64_t n) {
  // The gather addresses x's elements of a pass with u32 arithmetic.
  if (uint64_t(g.batch) * g.groups * g.cx * g.x_spatial() >= (uint64_t(1) << 31)) return false;
  const char* e = std::getenv("TORCH_WEBGPU_CONV_IMPLICIT");
  if (e && *e) return std::string(e) != "0";
  return m >= 16 && n >= 16 && gemm_uses_tiles(ctx);
}

uint64_t conv_images_per_pass(Context& ctx, const ConvGeometry& g, uint64_t y_channels) {
  uint64_t budget = uint64_t(256) << 20;
  const uint64_t binding = ctx.caps().max_storage_binding_size;
  if (binding && binding < budget) budget = binding;
  // Per image: its columns, and (bound through windows of larger buffers) its input and
  // output, at most 4 bytes an element.
  const uint64_t per_image = std::max({uint64_t(g.groups) * g.rows() * g.y_spatial() * 4,
                                       uint64_t(g.groups) * g.cx * g.x_spatial() * 4,
                                       y_channels * g.y_spatial() * 4});
  return std::max<uint64_t>(1, budget / std::max<uint64_t>(per_image, 1));
}

bool conv_columns_fit(Context& ctx, const ConvGeometry& g) {
  return conv_is_pointwise(g) ||
         uint64_t(g.batch) * g.groups * g.rows() * g.y_spatial() * 4 <= window_budget(ctx);
}

std::vector<ConvGeometry> conv_row_tiles(Context& ctx, const ConvGeometry& g) {
  const int dim = g.ys[0] > 1 ? 0 : (g.ys[1] > 1 ? 1 : -1);
  if (dim < 0 || g.batch != 1) return {};
  const uint64_t row_cols = uint64_t(g.groups) * g.rows() * (g.y_spatial() / g.ys[dim]) * 4;
  const uint64_t budget = window_budget(ctx);
  if (row_cols > budget) return {};
  const uint32_t rows = static_cast<uint32_t>(std::min<uint64_t>(g.ys[dim], budget / row_cols));
  std::vector<ConvGeometry> tiles;
  for (uint32_t r0 = 0; r0 < g.ys[dim]; r0 += rows) {
    ConvGeometry t = g;
    t.ys[dim] = std::min(rows, g.ys[dim] - r0);
    t.y_first[dim] = r0;
    tiles.push_back(t);
  }
  return tiles;
}

ConvForwardPlan plan_conv_forward(Context& ctx, const ConvGeometry& g, uint64_t y_channels) {
  ConvForwardPlan plan;
  plan.g = g;
  plan.y_channels = y_channels;
  const uint64_t cy = y_channels / g.groups;
  const uint64_t step = conv_images_per_pass(ctx, g, y_channels);
  auto add = [&](const ConvGeometry& pg, uint64_t n0, bool tile) {
    ConvPiece piece{pg, n0, tile, ConvColumns::Im2col};
    const uint64_t L = pg.y_spatial();
    if (conv_is_pointwise(pg) && !tile) piece.columns = ConvColumns::Pointwise;
    else if (conv_gather_columns(ctx, pg, cy, L)) piece.columns = ConvColumns::Gather;
    if (piece.columns == ConvColumns::Im2col)
      plan.col_elements = std::max(plan.col_elements, uint64_t(pg.batch) * pg.groups * pg.rows() * L);
    if (piece.columns == ConvColumns::Gather) plan.tap_words = pg.rows() * 4;
    plan.pieces.push_back(piece);
  };
  for (uint64_t n0 = 0; n0 < g.batch; n0 += step) {
    ConvGeometry p = g;
    p.batch = static_cast<uint32_t>(std::min<uint64_t>(step, g.batch - n0));
    const std::vector<ConvGeometry> tiles = conv_columns_fit(ctx, p) ? std::vector<ConvGeometry>() : conv_row_tiles(ctx, p);
    if (tiles.empty()) add(p, n0, false);
    for (const ConvGeometry& t : tiles) add(t, n0, true);
  }
  return plan;
}

void record_conv_forward(Context& ctx, const ConvForwardPlan& plan, const ConvOperand& x,
                         const ConvOperand& w, const ConvOperand& bias, uint64_t bias_stride,
                         const ConvOperand& y, WGPUBuffer col, WGPUBuffer taps) {
  auto mat = [](const ConvOperand& t, uint64_t offset, uint64_t bo, uint64_t bi, uint64_t rows, uint64_t cols) {
    return MatOperand{t.buffer, t.offset + offset, t.dtype, bo, bi, rows, cols};
  };
  const ConvGeometry& all = plan.g;
  const uint64_t G = all.groups, R = all.rows(), Ly = all.y_spatial(), X = all.x_spatial();
  const uint64_t Cy = plan.y_channels, cy = Cy / G, C = G * all.cx;
  if (plan.tap_words) conv_gather_taps(ctx, all, taps);  // the taps depend on x and k only
  for (const ConvPiece& piece : plan.pieces) {
    const ConvGeometry& g = piece.g;
    const uint64_t L = g.y_spatial();
    const uint64_t x0 = piece.image0 * C * X;
    // A tile's output rows are contiguous within each channel plane of Y.
    const uint64_t y0 = piece.image0 * Cy * Ly + uint64_t(g.y_first[0]) * all.ys[1] * all.ys[2] +
                        uint64_t(g.y_first[1]) * all.ys[2];
    GemmDesc d;
    d.batch_outer = g.batch;
    d.batch_inner = G;
    d.m = cy;
    d.n = L;
    d.k = R;
    d.compute = Compute::F32;
    d.a = mat(w, 0, 0, cy * R, R, 1);
    if (piece.columns == ConvColumns::Pointwise) {
      d.b = mat(x, x0, C * L, all.cx * L, L, 1);
    } else if (piece.columns == ConvColumns::Gather) {
      d.b = mat(x, x0, C * X, all.cx * X, 0, 0);
      d.conv = &g;
      d.conv_taps = taps;
    } else {
      const ColLayout lay{G * R * L, R * L, L, 1};
      conv_im2col(ctx, g, x.buffer, x.offset + x0, x.dtype, col, lay);
      d.b = MatOperand{col, 0, DType::Float32, G * R * L, R * L, L, 1};
    }
    if (bias.buffer) {
      d.c = mat(bias, 0, 0, cy * bias_stride, bias_stride, 0);
      d.beta = ScalarBits::from_f32(1.0f);
    }
    d.out = mat(y, y0, Cy * Ly, cy * Ly, Ly, 1);
    gemm(ctx, d);
  }
}

}  // namespace twgpu
