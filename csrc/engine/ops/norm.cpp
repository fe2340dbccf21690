// native_layer_norm and batch norm in evaluation (_native_batch_norm_legit_no_training),
// with the normalization kernels called as the eager layer calls them (csrc/aten/ops_norm.cpp).
#include "engine/op_registry.h"
#include "engine/ops/nn_operand.h"
#include "engine/ops/pointwise.h"
#include "kernels/nn_norm.h"

namespace twgpu::engine {
namespace {

const DeviceTensor* optional_contiguous(OpBuilder& b, size_t i, DeviceTensor& keep) {
  const DeviceTensor* t = b.optional_tensor(i);
  if (!t) return nullptr;
  keep = b.contiguous(*t);
  return &keep;
}

// A float32 statistic output written directly, or through scratch for other dtypes.
DeviceTensor stat_target(OpBuilder& b, size_t i, int64_t n) {
  DeviceTensor& o = b.output(i);
  if (o.dtype == DType::Float32 && !o.is_view && o.is_contiguous() && o.numel() == static_cast<uint64_t>(n))
    return o;
  return b.scratch(DType::Float32, {n});
}

void layer_norm(OpBuilder& b) {
  const DeviceTensor& input = b.tensor(0);
  const std::vector<int64_t> normalized = b.ints(1);
  b.check(is_floating(input.dtype), "needs a floating input, got " + input.describe());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized.size());
  b.check(axis >= 0, "normalized_shape has more dims than " + input.describe());
  int64_t M = 1, N = 1;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d < axis) M *= input.shape[d];
    else {
      b.check(input.shape[d] == normalized[d - axis], "normalized_shape does not match " + input.describe());
      N *= input.shape[d];
    }
  }
  DeviceTensor wk, bk;
  const DeviceTensor* w = optional_contiguous(b, 2, wk);
  const DeviceTensor* bias = optional_contiguous(b, 3, bk);
  for (const DeviceTensor* p : {w, bias})
    if (p) b.check(p->numel() == static_cast<uint64_t>(N) && p->dtype == input.dtype,
                   "weight/bias " + p->describe() + " do not match normalized_shape");
  const float eps = static_cast<float>(b.real(4));
  const DeviceTensor x = b.contiguous(input);
  const DeviceTensor& y = b.checked_output(0, x.shape, x.dtype);
  if (M == 0) return;
  b.check(N > 0, "layer norm over an empty normalized shape");
  const DeviceTensor mean = b.num_outputs() > 1 ? stat_target(b, 1, M) : b.scratch(DType::Float32, {M});
  const DeviceTensor rstd = b.num_outputs() > 2 ? stat_target(b, 2, M) : b.scratch(DType::Float32, {M});
  nn::Operand ox = nn_operand(&x), omean = nn_operand(&mean), orstd = nn_operand(&rstd),
              ow = nn_operand(w), ob = nn_operand(bias), oy = nn_operand(&y);
  const uint64_t rows = static_cast<uint64_t>(M);
  const uint32_t len = u32(N);
  b.record([=](twgpu::Context& ctx) { nn::layer_norm_rows(ctx, ox, ow, ob, oy, omean, orstd, rows, len, eps); });
  // Statistics in another dtype than float32: converted as eager's mean.to(dtype).
  for (size_t i = 1; i < 3 && i < b.num_outputs(); ++i) {
    const DeviceTensor& src = i == 1 ? mean : rstd;
    if (src.buffer != b.output(i).buffer || src.offset != b.output(i).offset) {
      DeviceTensor flat = b.checked_output(i, b.output(i).shape, b.output(i).dtype);
      flat.shape = {M};
      flat.strides = {1};
      b.record(copy_launch(src, flat));
    }
  }
}

void batch_norm_eval(OpBuilder& b) {
  const DeviceTensor& input = b.tensor(0);
  b.check(is_floating(input.dtype) && input.dim() >= 2, "needs a floating input of >= 2 dims, got " + input.describe());
  const int64_t N = input.shape[0], C = input.shape[1];
  int64_t S = 1;
  for (int64_t d = 2; d < input.dim(); ++d) S *= input.shape[d];
  DeviceTensor wk, bk, mk, vk;
  const DeviceTensor* w = optional_contiguous(b, 1, wk);
  const DeviceTensor* bias = optional_contiguous(b, 2, bk);
  const DeviceTensor* rm = optional_contiguous(b, 3, mk);
  const DeviceTensor* rv = optional_contiguous(b, 4, vk);
  b.check(rm && rv, "running_mean and running_var must be defined in evaluation mode");
  for (const DeviceTensor* p : {w, bias, rm, rv})
    if (p) b.check(p->numel() == static_cast<uint64_t>(C), "parameter " + p->describe() + " does not have " + std::to_string(C) + " channels");
  const float eps = static_cast<float>(b.real(6));
  const DeviceTensor x = b.contiguous(input);
  const DeviceTensor& y = b.checked_output(0, x.shape, x.dtype);
  if (x.numel() == 0) return;
  const DeviceTensor invstd = b.scratch(DType::Float32, {C});
  nn::ElementMap em{u32(S), u32(C), u32(S), u32(C)};
  nn::Operand ox = nn_operand(&x), om = nn_operand(rm), ov = nn_operand(rv), oi = nn_operand(&invstd),
              ow = nn_operand(w), ob = nn_operand(bias), oy = nn_operand(&y);
  const uint64_t count = x.numel();
  (void)N;
  b.record([=](twgpu::Context& ctx) {
    nn::norm_invstd(ctx, ov, eps, oi, static_cast<uint64_t>(C));
    nn::norm_apply(ctx, ox, om, oi, ow, ob, oy, count, em, false);
  });
  // save_mean / save_invstd are empty in evaluation, as on the CPU.
}

}  // namespace

TWGPU_ENGINE_OP("aten::native_layer_norm", layer_norm);
TWGPU_ENGINE_OP("aten::layer_norm", layer_norm);
TWGPU_ENGINE_OP("aten::_native_batch_norm_legit_no_training", batch_norm_eval);

}  // namespace twgpu::engine
