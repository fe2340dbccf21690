// Grid sampling kernels (grid_sampler_2d / grid_sampler_3d): the input [N, C, (D,) H, W]
// sampled at the normalized grid points [N, (oD,) oH, oW, nd] with bilinear (trilinear),
// nearest or bicubic (2-d) interpolation, zeros/border/reflection padding and either
// corner alignment, and the backward pass (input gradient by f32 atomic adds, grid
// gradient per point). Source coordinates follow the CPU's formulas (ATen's
// GridSampler.h), computed in f32. Operands are contiguous.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

enum class GridInterp : uint8_t { Bilinear = 0, Nearest = 1, Bicubic = 2 };  // ATen's values
enum class GridPadding : uint8_t { Zeros = 0, Border = 1, Reflection = 2 };

struct GridGeometry {
  int nd = 2;                      // 2 or 3 spatial dims
  uint32_t n = 0, channels = 0;
  uint32_t points = 0;             // output points per batch entry: (oD *) oH * oW
  uint32_t w = 1, h = 1, d = 1;    // input spatial sizes
  GridInterp interp = GridInterp::Bilinear;
  GridPadding padding = GridPadding::Zeros;
  bool align_corners = false;
};

// out [N, C, points] in the input's dtype.
void grid_sample_forward(Context& ctx, const Operand& input, const Operand& grid,
                         const GridGeometry& g, const Operand& out);
// grad_input (f32, zeroed, input shape; absent: not computed) and grad_grid (f32,
// zeroed, grid shape) from grad_out [N, C, points].
void grid_sample_backward(Context& ctx, const Operand& grad_out, const Operand& input,
                          const Operand& grid, const GridGeometry& g, const Operand& grad_input,
                          const Operand& grad_grid);

}  // namespace twgpu::nn
