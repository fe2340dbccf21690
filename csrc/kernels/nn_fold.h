// im2col (unfold) and col2im (fold) over [planes, H, W] images and
// [planes * kH * kW, oH * oW] column matrices (both contiguous). col2im gathers, for each
// image pixel, the columns that cover it in (kh, kw) order, as the CPU accumulates them.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct FoldGeometry {
  uint32_t planes = 0, H = 0, W = 0, oH = 0, oW = 0;
  uint32_t kH = 1, kW = 1, dH = 1, dW = 1, pH = 0, pW = 0, sH = 1, sW = 1;
};

void im2col(Context& ctx, const Operand& image, const FoldGeometry& g, const Operand& cols);
void col2im(Context& ctx, const Operand& cols, const FoldGeometry& g, const Operand& image);

}  // namespace twgpu::nn
