// max_pool2d (with indices), avg_pool2d and _adaptive_avg_pool2d over [N, C, H, W] or
// [C, H, W] inputs, with
// the pooling kernels' geometry set up as the eager layer does (csrc/aten/ops_pool.cpp).
#include "engine/op_registry.h"
#include "engine/ops/nn_operand.h"
#include "kernels/nn_pool.h"

namespace twgpu::engine {
namespace {

constexpr int kDims = 2;

// Expands a pooling parameter list (one value for all dims, or one per dim).
std::vector<int64_t> per_dim(OpBuilder& b, size_t i, int64_t dflt, bool allow_empty) {
  std::vector<int64_t> v = b.is_none(i) ? std::vector<int64_t>{} : b.ints(i);
  if (v.empty()) {
    b.check(allow_empty, "argument " + std::to_string(i) + " must not be empty");
    return std::vector<int64_t>(kDims, dflt);
  }
  if (v.size() == 1) return std::vector<int64_t>(kDims, v[0]);
  b.check(v.size() == kDims, "argument " + std::to_string(i) + " needs 1 or 2 values");
  return v;
}

int64_t output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Arguments from index 1: kernel_size, stride, padding, then dilation (max) or none.
struct Pool {
  nn::PoolGeometry g;
  std::vector<int64_t> out_shape;
};

// Planes (all dims before the spatial ones) and the input's spatial sizes.
Pool planes_of(OpBuilder& b, const DeviceTensor& x) {
  b.check(is_floating(x.dtype), "needs a floating input, got " + x.describe());
  b.check(x.dim() == 3 || x.dim() == 4, "expects a 3-D or 4-D input, got " + x.describe());
  for (int64_t d = 1; d < x.dim(); ++d) b.check(x.shape[d] > 0, "empty spatial or channel dims in " + x.describe());
  Pool p;
  int64_t planes = 1;
  for (int64_t d = 0; d < x.dim() - kDims; ++d) planes *= x.shape[d];
  p.g.planes = u32(planes);
  p.out_shape.assign(x.shape.begin(), x.shape.end() - kDims);
  for (int j = 0; j < kDims; ++j) p.g.in[3 - kDims + j] = u32(x.shape[x.dim() - kDims + j]);
  return p;
}

Pool geometry(OpBuilder& b, const DeviceTensor& x, bool ceil_mode, bool has_dilation) {
  Pool p = planes_of(b, x);
  const std::vector<int64_t> k = per_dim(b, 1, 0, false), s0 = per_dim(b, 2, 0, true),
                             pad = per_dim(b, 3, 0, false),
                             dil = has_dilation ? per_dim(b, 4, 1, false) : std::vector<int64_t>(kDims, 1);
  const bool stride_given = !b.is_none(2) && !b.ints(2).empty();
  for (int j = 0; j < kDims; ++j) {
    const int64_t s = stride_given ? s0[j] : k[j];
    b.check(k[j] > 0 && s > 0 && dil[j] > 0 && pad[j] >= 0 && pad[j] <= k[j] / 2,
            "bad kernel_size / stride / padding / dilation");
    const int64_t in = x.shape[x.dim() - kDims + j];
    const int64_t o = output_size(in, k[j], pad[j], s, dil[j], ceil_mode);
    b.check(o >= 1, "output size is too small for input " + x.describe());
    const int jj = 3 - kDims + j;
    p.g.out[jj] = u32(o);
    p.g.k[jj] = u32(k[j]);
    p.g.s[jj] = u32(s);
    p.g.p[jj] = u32(pad[j]);
    p.g.d[jj] = u32(dil[j]);
    p.out_shape.push_back(o);
  }
  return p;
}

void max_pool(OpBuilder& b) {
  const DeviceTensor& in = b.tensor(0);
  const Pool p = geometry(b, in, b.boolean_or(5, false), true);
  const DeviceTensor x = b.contiguous(in);
  const DeviceTensor& y = b.checked_output(0, p.out_shape, x.dtype);
  // max_pool2d alone has no indices output: they go to scratch.
  const DeviceTensor idx = b.num_outputs() > 1 ? b.checked_output(1, p.out_shape, DType::Int64)
                                               : b.scratch(DType::Int64, p.out_shape);
  nn::Operand ox = nn_operand(&x), oy = nn_operand(&y), oi = nn_operand(&idx);
  const nn::PoolGeometry g = p.g;
  if (y.numel() == 0) return;
  b.record([=](twgpu::Context& ctx) { nn::pool_max_forward(ctx, ox, g, oy, oi); });
}

void avg_pool(OpBuilder& b) {
  const DeviceTensor& in = b.tensor(0);
  const Pool p = geometry(b, in, b.boolean_or(4, false), false);
  const bool count_include_pad = b.boolean_or(5, true);
  const int64_t divisor = b.integer_or(6, 0);
  const DeviceTensor x = b.contiguous(in);
  const DeviceTensor& y = b.checked_output(0, p.out_shape, x.dtype);
  nn::Operand ox = nn_operand(&x), oy = nn_operand(&y);
  const nn::PoolGeometry g = p.g;
  if (y.numel() == 0) return;
  b.record([=](twgpu::Context& ctx) { nn::pool_avg_forward(ctx, ox, g, count_include_pad, divisor, oy); });
}

// Windows [floor(o * I / O), ceil((o + 1) * I / O)), averaged over the elements inside.
void adaptive_avg_pool(OpBuilder& b) {
  const DeviceTensor& in = b.tensor(0);
  Pool p = planes_of(b, in);
  const std::vector<int64_t> size = b.ints(1);
  b.check(size.size() == kDims, "output_size needs 2 values");
  p.g.adaptive = true;
  for (int j = 0; j < kDims; ++j) {
    b.check(size[j] >= 0, "negative output_size");
    p.g.out[3 - kDims + j] = u32(size[j]);
    p.out_shape.push_back(size[j]);
  }
  const DeviceTensor x = b.contiguous(in);
  const DeviceTensor& y = b.checked_output(0, p.out_shape, x.dtype);
  nn::Operand ox = nn_operand(&x), oy = nn_operand(&y);
  const nn::PoolGeometry g = p.g;
  if (y.numel() == 0) return;
  b.record([=](twgpu::Context& ctx) { nn::pool_avg_forward(ctx, ox, g, false, 0, oy); });
}

}  // namespace

TWGPU_ENGINE_OP("aten::_adaptive_avg_pool2d", adaptive_avg_pool);
TWGPU_ENGINE_OP("aten::max_pool2d_with_indices", max_pool);
TWGPU_ENGINE_OP("aten::max_pool2d", max_pool);
TWGPU_ENGINE_OP("aten::avg_pool2d", avg_pool);

}  // namespace twgpu::engine
