// Matrix products: mm, addmm, bmm, linear, all through the kernel library's gemm with
// operands addressed by strides (transposed and broadcast views need no copy), set up as
// the eager ATen layer sets them (csrc/aten/ops_matmul.cpp) so results match eager.
#include "engine/op_registry.h"
#include "engine/ops/pointwise.h"
#include "kernels/matmul.h"

namespace twgpu::engine {
namespace {

// A 2-D or 3-D tensor as a batch of matrices (a 2-D one as eager's unsqueeze(0)).
MatOperand mat(const DeviceTensor& t) {
  MatOperand o;
  o.buffer = t.buffer;
  o.offset = t.offset;
  o.dtype = t.dtype;
  const bool batched = t.dim() == 3;
  o.batch_outer = batched ? t.strides[0] : static_cast<uint64_t>(t.shape[0] * t.strides[0]);
  o.rows = t.strides[batched ? 1 : 0];
  o.cols = t.strides[batched ? 2 : 1];
  return o;
}

bool gemm_dtype(DType t) { return is_computable(t); }

// out = alpha * a @ b + beta * c (c: null or broadcastable to out as a matrix batch).
void record_gemm(OpBuilder& b, const DeviceTensor& a, const DeviceTensor& m2, const DeviceTensor* c,
                 double beta, double alpha, const DeviceTensor& out) {
  for (const DeviceTensor* t : {&a, &m2})
    if (t->dtype != out.dtype || !gemm_dtype(t->dtype))
      b.fail("operands must share the output's dtype, got " + a.describe() + " @ " + m2.describe() +
             " -> " + out.describe());
  const bool batched = out.dim() == 3;
  const Compute compute = compute_type_for(out.dtype);
  GemmDesc d;
  d.batch_outer = batched ? out.shape[0] : 1;
  d.m = out.shape[batched ? 1 : 0];
  d.n = out.shape[batched ? 2 : 1];
  d.k = a.shape[batched ? 2 : 1];
  d.compute = compute;
  d.alpha = compute == Compute::F32 ? ScalarBits::from_f32(static_cast<float>(alpha))
                                    : ScalarBits::from_int(static_cast<int64_t>(alpha), compute);
  d.beta = compute == Compute::F32 ? ScalarBits::from_f32(static_cast<float>(beta))
                                   : ScalarBits::from_int(static_cast<int64_t>(beta), compute);
  d.out = mat(out);
  d.a = mat(a);
  d.b = mat(m2);
  if (c && beta != 0.0) {
    // c broadcast to out's matrix shape (eager: self.expand({m, n})).
    DeviceTensor e = *c;
    const int64_t lead = out.dim() - c->dim();
    e.shape = out.shape;
    e.strides.assign(out.dim(), 0);
    for (int64_t dd = 0; dd < c->dim(); ++dd)
      if (c->shape[dd] != 1) e.strides[lead + dd] = c->strides[dd];
    d.c = mat(e);
  }
  if (d.k == 0) {
    d.a.dtype = d.b.dtype = out.dtype;
  }
  if (out.numel() == 0) return;
  b.record([d](twgpu::Context& ctx) { gemm(ctx, d); });
}

void mm(OpBuilder& b) {
  const DeviceTensor &a = b.tensor(0), &m2 = b.tensor(1);
  b.check(a.dim() == 2 && m2.dim() == 2 && a.shape[1] == m2.shape[0],
          "shapes cannot be multiplied: " + a.describe() + " @ " + m2.describe());
  const DeviceTensor& out = b.checked_output(0, {a.shape[0], m2.shape[1]}, a.dtype);
  record_gemm(b, a, m2, nullptr, 0.0, 1.0, out);
}

void bmm(OpBuilder& b) {
  const DeviceTensor &a = b.tensor(0), &m2 = b.tensor(1);
  b.check(a.dim() == 3 && m2.dim() == 3 && a.shape[0] == m2.shape[0] && a.shape[2] == m2.shape[1],
          "shapes cannot be multiplied: " + a.describe() + " @ " + m2.describe());
  const DeviceTensor& out = b.checked_output(0, {a.shape[0], a.shape[1], m2.shape[2]}, a.dtype);
  record_gemm(b, a, m2, nullptr, 0.0, 1.0, out);
}

void addmm(OpBuilder& b) {
  const DeviceTensor &self = b.tensor(0), &a = b.tensor(1), &m2 = b.tensor(2);
  b.check(a.dim() == 2 && m2.dim() == 2 && a.shape[1] == m2.shape[0],
          "shapes cannot be multiplied: " + a.describe() + " @ " + m2.describe());
  const std::vector<int64_t> shape = {a.shape[0], m2.shape[1]};
  b.check(self.dim() <= 2, "self " + self.describe() + " does not broadcast to the product");
  for (int64_t d = 0; d < self.dim(); ++d) {
    const int64_t want = shape[2 - self.dim() + d];
    b.check(self.shape[d] == 1 || self.shape[d] == want,
            "self " + self.describe() + " does not broadcast to the product");
  }
  const DeviceTensor& out = b.checked_output(0, shape, a.dtype);
  record_gemm(b, a, m2, &self, b.real_or(3, 1.0), b.real_or(4, 1.0), out);
}

// linear(input, weight, bias): input [..., k], weight [n, k]. As eager: 2-D inputs and
// contiguous 3-D ones are one addmm over the flattened rows; the rest a product, then + bias.
void linear(OpBuilder& b) {
  const DeviceTensor &x = b.tensor(0), &w = b.tensor(1);
  const DeviceTensor* bias = b.optional_tensor(2);
  b.check(x.dim() >= 1 && w.dim() == 2 && x.shape.back() == w.shape[1],
          "shapes cannot be multiplied: " + x.describe() + " and weight " + w.describe());
  std::vector<int64_t> shape = x.shape;
  shape.back() = w.shape[0];
  const DeviceTensor& out = b.checked_output(0, shape, x.dtype);
  DeviceTensor rows = x.dim() == 2 ? x : b.contiguous(x);
  const int64_t k = x.shape.back();
  rows.shape = {static_cast<int64_t>(x.numel() / std::max<int64_t>(k, 1)), k};
  if (x.dim() != 2) rows.strides = {k, 1};
  DeviceTensor wt = w;  // weight.t()
  wt.shape = {w.shape[1], w.shape[0]};
  wt.strides = {w.strides[1], w.strides[0]};
  DeviceTensor o2 = out;
  o2.shape = {rows.shape[0], w.shape[0]};
  o2.strides = contiguous_strides(o2.shape);
  const bool fused = x.dim() == 2 || (x.dim() == 3 && x.is_contiguous());
  record_gemm(b, rows, wt, fused ? bias : nullptr, 1.0, 1.0, o2);
  if (bias && !fused) b.record(pointwise_launch("add", compute_type_for(out.dtype), out,
                                                {{&out, {}}, {bias, {}}}, ScalarBits::from_double(1.0, compute_type_for(out.dtype))));
}

}  // namespace

TWGPU_ENGINE_OP("aten::mm", mm);
TWGPU_ENGINE_OP("aten::bmm", bmm);
TWGPU_ENGINE_OP("aten::addmm", addmm);
TWGPU_ENGINE_OP("aten::linear", linear);

}  // namespace twgpu::engine
