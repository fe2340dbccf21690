// Matrix products and the gathers that turn convolutions into them (no torch headers).
//
// gemm: out[b] = alpha * A[b] @ B[b] (+ beta * C[b]) over a batch given as two levels
// (outer, inner) so that e.g. (image, group) pairs of a grouped convolution are one
// dispatch. Every operand is addressed by an element offset and strides, so transposed,
// sliced and broadcast (stride 0) views need no copy. Accumulation runs in the compute
// type: f32 for float32/float16/bfloat16, wrapping i32 for the narrow integers, exact
// int64 emulation for int64.
#pragma once
#include <optional>
#include <webgpu/webgpu.h>

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

// A batch of matrices inside one buffer: element (bo, bi, r, c) sits at
// offset + bo * batch_outer + bi * batch_inner + r * rows + c * cols.
struct MatOperand {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;
  DType dtype = DType::Float32;
  uint64_t batch_outer = 0, batch_inner = 0, rows = 0, cols = 0;
};

// Geometry of a convolution with up to 3 spatial dims (unused dims: size 1, stride 1,
// padding 0, dilation 1). X is the "image" side (N, groups * cx, xs...), Y the
// "feature" side (N, groups * cy, ys...): y[o] gathers x[o * stride - pad + k * dil].
struct ConvGeometry {
  uint32_t batch = 0, groups = 1, cx = 0;  // cx: channels of X per group
  uint32_t xs[3] = {1, 1, 1}, ys[3] = {1, 1, 1}, ks[3] = {1, 1, 1};
  uint32_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  // im2col of a tile of output rows: the first output position along dims 0 and 1 (ys
  // then holds the tile's extent there).
  uint32_t y_first[2] = {0, 0};
  uint64_t x_spatial() const { return uint64_t(xs[0]) * xs[1] * xs[2]; }
  uint64_t y_spatial() const { return uint64_t(ys[0]) * ys[1] * ys[2]; }
  uint64_t k_spatial() const { return uint64_t(ks[0]) * ks[1] * ks[2]; }
  uint64_t rows() const { return uint64_t(cx) * k_spatial(); }  // R = cx * K
};

// A norm over rows of A before a product (linear_group_normed, gemm_normed): A's rows
// become h = a + residual (residual.buffer null: h = a), written to `h` (m x k), then in
// float32 the RMSNorm h * rsqrt(mean(h^2) + eps) * weight, or with `layer` the LayerNorm
// (h - mean(h)) * rsqrt(mean((h - mean(h))^2) + eps) * weight + bias (bias.buffer null:
// none); weight and bias are k values at their cols stride. That is what the products read.
// Activations the GEMV kernels apply: linear_gated's act(gate) * up, and an output's act
// where a norm folds (gemm_normed, linear_group_normed with one linear).
enum class GateAct : uint32_t { None, Silu, Gelu, GeluTanh, Relu };  // Gelu: erf's

struct RowNorm {
  MatOperand residual, weight, bias, h;
  float eps = 0.0f;
  bool layer = false;
};

struct GemmDesc {
  uint64_t batch_outer = 1, batch_inner = 1;
  uint64_t m = 0, n = 0, k = 0;
  MatOperand a;    // m x k
  MatOperand b;    // k x n
  MatOperand c;    // m x n input term; buffer null: none
  MatOperand out;  // m x n; must not share a buffer with a, b or c
  Compute compute = Compute::F32;
  ScalarBits alpha = ScalarBits::from_f32(1.0f), beta = ScalarBits::from_f32(0.0f);
  // Implicit GEMM (set conv and conv_taps): B is gathered from a convolution's input
  // instead of a column buffer: B[r, l] (or B[l, r] with conv_positions_along_k, the weight
  // gradient's orientation) = x[image, group * cx + c, o * stride - pad + k * dil] (0
  // outside) for row r = (c, k...) and output position l = (o...) of the geometry's (tile
  // of) outputs; b's buffer, offset, dtype and batch strides address x's images (outer)
  // and groups (inner). `conv_taps` holds conv_gather_taps' table for the geometry. Runs
  // the shared-memory tile variant on any adapter; never splits N (positions or taps).
  const ConvGeometry* conv = nullptr;
  WGPUBuffer conv_taps = nullptr;
  bool conv_positions_along_k = false;
  // gemm_normed only: the norm A's rows go through first, and an activation applied to
  // each output (after alpha and beta * C).
  const RowNorm* norm = nullptr;
  GateAct act{};
};

// Whether gemm picks shared-memory tiles for large products here (GPUs, or forced by
// TORCH_WEBGPU_GEMM_VARIANT=tiled*): where an implicit GEMM costs no more than im2col.
bool gemm_uses_tiles(Context& ctx);

// The implicit GEMM's table: for each row r = (c, k...) of the columns, 4 u32 words: x's
// element offset of (c, k * dil) within an image's group, and k * dil per spatial dim.
// `taps`: at least g.rows() * 16 bytes.
void conv_gather_taps(Context& ctx, const ConvGeometry& g, WGPUBuffer taps);

// Records the product. With k == 0 the product term is zero (a and b may then be any
// readable buffer). Nothing happens for an empty output.
void gemm(Context& ctx, const GemmDesc& d);

// The product of d.norm(A) and B as one dispatch, where gemm would take the GEMV over
// N-contiguous weights (GPT-2's Conv1D at decode: GPU adapters, up to 4 rows) without
// splitting K, float32 throughout, one matrix, K of whole vec4 words whose row fits in
// workgroup memory (each workgroup normalizes it there; the first column group's also
// store h): records it and returns true. Returns false, recording nothing, elsewhere (the
// caller composes the norm and the product).
bool gemm_normed(Context& ctx, const GemmDesc& d);

// Linears sharing their input (decode's q/k/v, gate/up), side by side in one output:
// out[r, col_i + j] = sum_k a[r, k] * w_i[j, k] (+ bias_i[j]) for j < n_i, col_i = n_0 +
// ... + n_(i-1). Weights are [n_i, k] with K contiguous (w.cols == 1), all of a's float
// dtype, as are the biases and out. On GPU adapters and few rows of A (decode) one GEMV
// dispatch computes up to kLinearGroupMax weights (fewer where the stage's storage-buffer
// limit binds, the rest in further dispatches); elsewhere each linear runs through gemm.
// k > 0 (a caller fills the biases itself without products).
constexpr size_t kLinearGroupMax = 4;
constexpr uint64_t kLinearGroupMaxRows = 4;
struct LinearGroupDesc {
  uint64_t m = 0, k = 0;
  MatOperand a;  // m x k (rows, cols strides)
  struct Linear {
    uint64_t n = 0;
    MatOperand weight;  // n x k: rows stride (between output columns), cols == 1
    MatOperand bias;    // n values at cols stride; buffer null: none
  };
  std::vector<Linear> linears;
  MatOperand out;  // m x (sum of n): rows, cols strides; must not share a buffer with the inputs
  using Norm = RowNorm;
  std::optional<Norm> norm;
};
void linear_group(Context& ctx, const LinearGroupDesc& d);
// Whether linear_group here takes the group kernel (for up to kLinearGroupMaxRows rows):
// GPU adapters, or forced by TORCH_WEBGPU_GEMM_VARIANT=gemv; never with no_gemv. The
// compile pass fuses linears only then (elsewhere the group saves no dispatch).
bool linear_group_fuses(Context& ctx);

// The gated MLP's product act(x @ w_gate^T + b_gate) * (x @ w_up^T + b_up) as one GEMV
// dispatch: d holds the two linears (gate first) of one width n and out is m x n. Records
// it and returns true where linear_group would be one dispatch (GPU adapters, up to
// kLinearGroupMaxRows rows, operands within one binding); returns false, recording
// nothing, elsewhere (the caller composes linears and pointwise ops).
bool linear_gated(Context& ctx, const LinearGroupDesc& d, GateAct act);

// A decoder layer's residual add + RMSNorm or LayerNorm and the linears after it (q/k/v;
// gate/up with `act`; one linear with `act`: act applied to its outputs) as one GEMV
// dispatch: d.norm set, float32. Each workgroup normalizes its row of A
// in workgroup memory (the row is short at decode: K floats); the first column tile's
// workgroups also store h. Records it and returns true where linear_group / linear_gated
// would be one dispatch and A's row fits in workgroup memory; returns false, recording
// nothing, elsewhere (the caller composes the norm and the linears).
bool linear_group_normed(Context& ctx, const LinearGroupDesc& d, GateAct act);

// Column layout strides: col[n, g, r, l] at n*sn + g*sg + r*sr + l*sl (float32).
struct ColLayout {
  uint64_t sn = 0, sg = 0, sr = 0, sl = 0;
};

// col[n, g, r = (c, k...), l = (o...)] = x[n, g * cx + c, o * stride - pad + k * dil]
// (0 outside). x: contiguous (N, C, xs...) of a float dtype; col: float32.
void conv_im2col(Context& ctx, const ConvGeometry& g, WGPUBuffer x, uint64_t x_offset,
                 DType x_dtype, WGPUBuffer col, const ColLayout& layout);

// The adjoint: x[n, g * cx + c, i] = sum of col[n, g, (c, k), o] over every (k, o) with
// o * stride - pad + k * dil == i. col: float32 with `layout`; x: contiguous elements of
// `x_dtype` from `x_offset` on. `bias` (buffer null: none; rows = its stride) adds bias[channel] to the
// float32 sum before the one rounding. With g.y_first set, col holds a tile of Y's rows
// (g.ys: the tile's extent) and only its taps count; `accumulate` adds the sum to x (then
// float32, no bias), so that the tiles of one image add up.
void conv_col2im(Context& ctx, const ConvGeometry& g, WGPUBuffer col, const ColLayout& layout,
                 WGPUBuffer x, uint64_t x_offset, DType x_dtype, const MatOperand& bias = {},
                 bool accumulate = false);

}  // namespace twgpu

namespace twgpu {

// out[i, j] = beta * self[i, j] + alpha * vec1[i] * vec2[j] (the outer-product update),
// computed as the CPU computes it: in the dtype itself, each product and sum rounded to
// it (float16/bfloat16 through float32), logical and/or for bool. `self` is addressed
// through (rows, cols) strides, so broadcasting is stride 0; buffer null: beta is zero.
// out: contiguous m x n. alpha/beta: already in the dtype's compute type (bool: 0/1).
struct AddrDesc {
  uint64_t m = 0, n = 0;
  MatOperand self, vec1, vec2, out;  // vec1: rows stride; vec2: cols stride
  ScalarBits alpha, beta;
};
void addr(Context& ctx, const AddrDesc& d);

}  // namespace twgpu
