// convolution (not transposed, 1 to 3 spatial dims, float dtypes): im2col into float32
// scratch (skipped for pointwise kernels) and one gemm per pass of images, set up as the
// eager layer does (csrc/aten/ops_convolution.cpp) so the sums round the same way.
#include <algorithm>

#include "engine/op_registry.h"
#include "kernels/matmul.h"
#include "runtime/context.h"

namespace twgpu::engine {
namespace {

MatOperand mat(const DeviceTensor& t, uint64_t offset, uint64_t bo, uint64_t bi, uint64_t rows,
               uint64_t cols) {
  return MatOperand{t.buffer, t.offset + offset, t.dtype, bo, bi, rows, cols};
}

bool is_pointwise(const ConvGeometry& g) {
  for (int d = 0; d < 3; ++d)
    if (g.ks[d] != 1 || g.stride[d] != 1 || g.pad[d] != 0 || g.xs[d] != g.ys[d]) return false;
  return true;
}

std::vector<int64_t> per_dim(OpBuilder& b, size_t i, int64_t nd, int64_t dflt) {
  std::vector<int64_t> v = b.is_none(i) ? std::vector<int64_t>{} : b.ints(i);
  if (v.empty()) return std::vector<int64_t>(nd, dflt);
  if (v.size() == 1) return std::vector<int64_t>(nd, v[0]);
  b.check(static_cast<int64_t>(v.size()) == nd, "argument " + std::to_string(i) + " needs " + std::to_string(nd) + " values");
  return v;
}

void convolve(OpBuilder& b, size_t groups_arg) {
  const DeviceTensor &in = b.tensor(0), &wt = b.tensor(1);
  const DeviceTensor* bias = b.optional_tensor(2);
  const int64_t nd = in.dim() - 2;
  b.check(nd >= 1 && nd <= 3 && wt.dim() == in.dim(), "input " + in.describe() + " and weight " + wt.describe() + " do not make a 1-3 d convolution");
  b.check(is_floating(in.dtype) && wt.dtype == in.dtype && (!bias || bias->dtype == in.dtype),
          "needs float operands of one dtype, got " + in.describe() + ", " + wt.describe());
  const std::vector<int64_t> stride = per_dim(b, 3, nd, 1), pad = per_dim(b, 4, nd, 0),
                             dil = per_dim(b, 5, nd, 1);
  const int64_t groups = b.integer_or(groups_arg, 1);
  b.check(groups >= 1 && in.shape[1] == wt.shape[1] * groups && wt.shape[0] % groups == 0,
          "channels of input " + in.describe() + " and weight " + wt.describe() + " do not match groups=" + std::to_string(groups));
  b.check(in.numel() > 0 && wt.numel() > 0, "empty convolution operands");
  ConvGeometry g;
  g.batch = static_cast<uint32_t>(in.shape[0]);
  g.groups = static_cast<uint32_t>(groups);
  g.cx = static_cast<uint32_t>(wt.shape[1]);
  std::vector<int64_t> out_shape = {in.shape[0], wt.shape[0]};
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t slot = 3 - nd + d, k = wt.shape[2 + d], x = in.shape[2 + d];
    b.check(stride[d] > 0 && pad[d] >= 0 && dil[d] > 0, "bad stride / padding / dilation");
    const int64_t y = (x + 2 * pad[d] - dil[d] * (k - 1) - 1) / stride[d] + 1;
    b.check(y > 0, "kernel larger than the padded input " + in.describe());
    g.xs[slot] = static_cast<uint32_t>(x);
    g.ys[slot] = static_cast<uint32_t>(y);
    g.ks[slot] = static_cast<uint32_t>(k);
    g.stride[slot] = static_cast<uint32_t>(stride[d]);
    g.pad[slot] = static_cast<uint32_t>(pad[d]);
    g.dil[slot] = static_cast<uint32_t>(dil[d]);
    out_shape.push_back(y);
  }
  const DeviceTensor x = b.contiguous(in), w = b.contiguous(wt);
  const DeviceTensor& y = b.checked_output(0, out_shape, in.dtype);
  const uint64_t G = g.groups, R = g.rows(), L = g.y_spatial(), C = G * g.cx;
  const uint64_t Cy = static_cast<uint64_t>(w.shape[0]), cy = Cy / G;
  // Images per pass keep one pass's float32 columns within a storage binding (as eager).
  uint64_t budget = uint64_t(256) << 20;
  const uint64_t binding = b.gpu().caps().max_storage_binding_size;
  if (binding && binding < budget) budget = binding;
  const uint64_t per_image = G * R * L * 4;
  const uint64_t step = std::max<uint64_t>(1, budget / std::max<uint64_t>(per_image, 1));
  const bool pointwise = is_pointwise(g);
  DeviceTensor col;
  if (!pointwise) col = b.scratch(DType::Float32, {static_cast<int64_t>(std::min<uint64_t>(step, g.batch) * G * R * L)});
  const uint64_t x_image = C * g.x_spatial();
  for (uint64_t n0 = 0; n0 < g.batch; n0 += step) {
    ConvGeometry p = g;
    p.batch = static_cast<uint32_t>(std::min<uint64_t>(step, g.batch - n0));
    GemmDesc d;
    d.batch_outer = p.batch;
    d.batch_inner = G;
    d.m = cy;
    d.n = L;
    d.k = R;
    d.compute = Compute::F32;
    d.a = mat(w, 0, 0, cy * R, R, 1);
    if (pointwise) d.b = mat(x, n0 * x_image, C * L, g.cx * L, L, 1);
    else d.b = mat(col, 0, G * R * L, R * L, L, 1);
    if (bias) {
      const uint64_t bs = static_cast<uint64_t>(bias->strides[0]);
      d.c = mat(*bias, 0, 0, cy * bs, bs, 0);
      d.beta = ScalarBits::from_f32(1.0f);
    }
    d.out = mat(y, n0 * Cy * L, Cy * L, cy * L, L, 1);
    const ColLayout lay{G * R * L, R * L, L, 1};
    const WGPUBuffer xb = x.buffer, cb = col.buffer;
    const uint64_t xo = x.offset + n0 * x_image;
    const DType xt = x.dtype;
    b.record([=](twgpu::Context& ctx) {
      if (!pointwise) conv_im2col(ctx, p, xb, xo, xt, cb, lay);
      gemm(ctx, d);
    });
  }
}

void convolution(OpBuilder& b) {
  b.check(!b.boolean_or(6, false), "transposed convolution is not supported by the engine yet");
  convolve(b, 8);
}
void conv2d(OpBuilder& b) { convolve(b, 6); }

}  // namespace

TWGPU_ENGINE_OP("aten::convolution", convolution);
TWGPU_ENGINE_OP("aten::conv2d", conv2d);

}  // namespace twgpu::engine
