// The forward of a regular convolution, shared by eager (csrc/aten/ops_convolution.cpp) and
// the engine (csrc/engine/ops/convolution.cpp) so both take the same GEMMs and round alike:
// plan_conv_forward picks the pieces (passes of images, tiles of one image's output rows)
// and each piece's way of making the GEMM's B (x itself for 1x1, gathered from x by the
// implicit GEMM, or im2col columns); the caller allocates the scratch the plan names and
// record_conv_forward records the pieces.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace twgpu {

class Context;

enum class ConvColumns { Pointwise, Gather, Im2col };

struct ConvPiece {
  ConvGeometry g;       // batch: the pass's images; with `tile`, ys/y_first: the tile's rows
  uint64_t image0 = 0;  // first image of the pass
  bool tile = false;
  ConvColumns columns = ConvColumns::Im2col;
};

struct ConvForwardPlan {
  ConvGeometry g;  // the whole convolution
  uint64_t y_channels = 0;
  std::vector<ConvPiece> pieces;
  uint64_t col_elements = 0;  // float32 scratch the im2col pieces need (0: none)
  uint64_t tap_words = 0;     // int32 scratch for the implicit GEMM's taps (0: none)
};

struct ConvOperand {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
  DType dtype = DType::Float32;
};

bool conv_is_pointwise(const ConvGeometry& g);

// Whether a GEMM of m x n outputs over the columns of `g` gathers them from x in its tile
// loads (implicit GEMM): where GEMMs run shared-memory tiles (m, n >= 16), unless
// TORCH_WEBGPU_CONV_IMPLICIT=0; =1 forces it for any product.
bool conv_gather_columns(Context& ctx, const ConvGeometry& g, uint64_t m, uint64_t n);

// Images per pass: a pass's float32 columns, input and output each within one storage
// binding (and a bounded amount of memory).
uint64_t conv_images_per_pass(Context& ctx, const ConvGeometry& g, uint64_t y_channels);

// Whether one pass's float32 columns fit one storage binding.
bool conv_columns_fit(Context& ctx, const ConvGeometry& g);

// One image whose columns exceed a binding: tiles of output rows along its outermost
// spatial dim of more than one row, each tile's columns within one binding. Empty when
// that cannot be done (the kernels then refuse by name).
std::vector<ConvGeometry> conv_row_tiles(Context& ctx, const ConvGeometry& g);

ConvForwardPlan plan_conv_forward(Context& ctx, const ConvGeometry& g, uint64_t y_channels);

// y (N, groups * cy, ys) = conv(x (N, groups * cx, xs), w (groups * cy, cx, k)) + bias:
// x, w and y contiguous; bias (buffer null: none) has `bias_stride` elements between
// channels; col and taps: the plan's scratch (may be null when it names none).
void record_conv_forward(Context& ctx, const ConvForwardPlan& plan, const ConvOperand& x,
                         const ConvOperand& w, const ConvOperand& bias, uint64_t bias_stride,
                         const ConvOperand& y, WGPUBuffer col, WGPUBuffer taps);

}  // namespace twgpu
