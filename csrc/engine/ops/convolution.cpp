// convolution (not transposed, 1 to 3 spatial dims, float dtypes): eager's forward
// (kernels/convolution.h: 1x1 as a GEMM, implicit GEMM on GPUs, im2col elsewhere), so the
// engine's results equal eager's bit for bit on every adapter class.
#include <algorithm>

#include "engine/op_registry.h"
#include "kernels/convolution.h"
#include "runtime/context.h"

namespace twgpu::engine {
namespace {

ConvOperand operand(const DeviceTensor& t) { return ConvOperand{t.buffer, t.offset, t.dtype}; }

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
  const ConvForwardPlan plan = plan_conv_forward(b.gpu(), g, static_cast<uint64_t>(w.shape[0]));
  WGPUBuffer col = nullptr, taps = nullptr;
  if (plan.col_elements) col = b.scratch(DType::Float32, {static_cast<int64_t>(plan.col_elements)}).buffer;
  if (plan.tap_words) taps = b.scratch(DType::Int32, {static_cast<int64_t>(plan.tap_words)}).buffer;
  const ConvOperand xo = operand(x), wo = operand(w), yo = operand(y);
  const ConvOperand bo = bias ? operand(*bias) : ConvOperand{};
  const uint64_t bias_stride = bias ? static_cast<uint64_t>(bias->strides[0]) : 0;
  b.record([=](twgpu::Context& ctx) { record_conv_forward(ctx, plan, xo, wo, bo, bias_stride, yo, col, taps); });
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
