// Native matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv (mv), dot, vdot, all
// on the one batched GEMM kernel (kernels/matmul.h), addr (the outer-product update,
// its own small kernel) and torch.ops.webgpu.linear_group (linears sharing their input). matmul, linear, einsum, tensordot, inner and outer are ATen
// composites over these.
//
// Structured ops (mm, bmm, addmm, baddbmm, addmv) register only `.out`; their checks and
// the out= resizing come from ATen's own meta functions (the same code the CPU runs), so
// errors read as on the CPU. bool products (which the CPU refuses), float64, complex and
// mixed dtypes go to the CPU fallback.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addbmm_ops.h>
#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/addmv_meta.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/addr_ops.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/imag.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm_meta.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/real.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/vdot_ops.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/structured_meta.h"
#include "aten/iterator_launch.h"
#include "aten/webgpu_tensor.h"
#include "kernels/matmul.h"

namespace twgpu::aten {
namespace {

using at::Tensor;


// Every tensor on the webgpu device, or the error PyTorch raises for mixed devices.
void check_devices(std::initializer_list<const Tensor*> ts) {
  std::optional<c10::Device> device;
  for (const Tensor* t : ts)
    if (t->defined() && t->device().type() == kDeviceType) {
      device = t->device();
      break;
    }
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    TORCH_CHECK(device && t->device() == *device,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                device ? *device : t->device(), " and ", t->device(), "!");
  }
}

// Dtypes the GEMM kernel computes (the CPU refuses bool for every product here).
bool gemm_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kLong: case at::kInt:
    case at::kShort: case at::kChar: case at::kByte:
      return true;
    default:
      return false;
  }
}

bool all_gemm(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && !gemm_dtype(t->scalar_type())) return false;
  return true;
}

// A scalar multiplier as the CPU converts it to the result's compute type.
ScalarBits multiplier(const c10::Scalar& s, Compute c) {
  if (c == Compute::F32) return ScalarBits::from_f32(s.to<float>());
  return ScalarBits::from_int(s.to<int64_t>(), c);
}

bool is_zero_bits(const ScalarBits& b, Compute c) {
  if (c == Compute::F32) return (b.lo & 0x7FFFFFFFu) == 0;
  if (c == Compute::I32) return b.lo == 0;
  return b.lo == 0 && b.hi == 0;
}

MatOperand operand3(const Tensor& t, uint64_t batch_inner_stride = 0) {
  DeviceRef r = device_ref(t);
  MatOperand o;
  o.buffer = r.buffer;
  o.offset = r.offset;
  o.dtype = r.dtype;
  o.batch_outer = static_cast<uint64_t>(t.stride(0));
  o.batch_inner = batch_inner_stride;
  o.rows = static_cast<uint64_t>(t.stride(1));
  o.cols = static_cast<uint64_t>(t.stride(2));
  return o;
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage().is_alias_of(b.storage());
}

// out = alpha * a @ b + beta * c on 3-D views (batch, rows, cols); c undefined or of
// out's shape (broadcast through stride 0). Writes in place when out is a plain,
// unaliased tensor, else through a temporary.
void batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const c10::Scalar& alpha,
                  const c10::Scalar& beta, const Tensor& out) {
  if (out.numel() == 0) return;
  const Compute compute = compute_type_of(out.scalar_type());
  GemmDesc d;
  d.batch_outer = static_cast<uint64_t>(out.size(0));
  d.m = static_cast<uint64_t>(out.size(1));
  d.n = static_cast<uint64_t>(out.size(2));
  d.k = static_cast<uint64_t>(a.size(2));
  d.compute = compute;
  d.alpha = multiplier(alpha, compute);
  d.beta = multiplier(beta, compute);
  const bool use_c = c.defined() && !is_zero_bits(d.beta, compute);

  const bool direct = at::has_internal_overlap(out) == at::MemOverlap::No &&
                      !shares_storage(out, a) && !shares_storage(out, b) &&
                      !(use_c && shares_storage(out, c));
  Tensor target = direct ? out : at::empty(out.sizes(), out.options());

  TWGPU_TRY
  d.out = operand3(target);
  if (d.k > 0) {
    d.a = operand3(a);
    d.b = operand3(b);
  } else {
    // No products to read: any readable buffer will do for the bindings.
    Tensor dummy = use_c ? c : at::empty({1}, out.options());
    d.a = d.b = operand3(dummy.dim() == 3 ? dummy : dummy.view({1, 1, 1}));
    d.a.dtype = d.b.dtype = d.out.dtype;
  }
  if (use_c) d.c = operand3(c);
  RuntimeLock lock;
  gemm(lock.ctx(), d);
  TWGPU_CATCH
  if (!direct) out.copy_(target);
}

// ---- mm / bmm / addmm / baddbmm ------------------------------------------------------

// complex64 products as four real ones through the real kernels:
// (A + iB)(C + iD) = (AC - BD) + i(AD + BC). Conjugate views are resolved first (CUDA's
// BLAS reads them through its op flags; ours reads plain values). False for other dtypes.
bool complex_gemm(const Tensor& a_in, const Tensor& b_in, Tensor& out) {
  if (a_in.scalar_type() != c10::kComplexFloat || b_in.scalar_type() != c10::kComplexFloat ||
      out.scalar_type() != c10::kComplexFloat)
    return false;
  Tensor a = a_in.resolve_conj().resolve_neg(), b = b_in.resolve_conj().resolve_neg();
  Tensor ar = at::real(a), ai = at::imag(a), br = at::real(b), bi = at::imag(b);
  Tensor re = at::matmul(ar, br).sub_(at::matmul(ai, bi));
  Tensor im = at::matmul(ar, bi).add_(at::matmul(ai, br));
  out.copy_(at::complex(re, im));
  return true;
}

Tensor& mm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_devices({&self, &mat2, &out});
  OutMeta<at::meta::structured_mm>(out).meta(self, mat2);
  TORCH_CHECK(self.dtype() == mat2.dtype(), "expected m1 and m2 to have the same dtype, but got: ",
              self.dtype(), " != ", mat2.dtype());
  if (complex_gemm(self, mat2, out)) return out;
  if (!all_gemm({&self, &mat2, &out})) return call_cpu_fallback<at::_ops::mm_out>(self, mat2, out);
  batched_gemm(self.unsqueeze(0), mat2.unsqueeze(0), Tensor(), 1, 0, out.unsqueeze(0));
  return out;
}

Tensor& bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_devices({&self, &mat2, &out});
  OutMeta<at::meta::structured_bmm>(out).meta(self, mat2);
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "expected scalar type ",
              self.scalar_type(), " but found ", mat2.scalar_type());
  if (complex_gemm(self, mat2, out)) return out;
  if (!all_gemm({&self, &mat2, &out})) return call_cpu_fallback<at::_ops::bmm_out>(self, mat2, out);
  batched_gemm(self, mat2, Tensor(), 1, 0, out);
  return out;
}

Tensor& addmm_out(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                  const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  check_devices({&self, &mat1, &mat2, &out});
  OutMeta<at::meta::structured_addmm>(out).meta(self, mat1, mat2, beta, alpha);
  TORCH_CHECK(mat1.dtype() == mat2.dtype(), "expected m1 and m2 to have the same dtype, but got: ",
              mat1.dtype(), " != ", mat2.dtype());
  if (!all_gemm({&self, &mat1, &mat2, &out}) || alpha.isComplex() || beta.isComplex())
    return call_cpu_fallback<at::_ops::addmm_out>(self, mat1, mat2, beta, alpha, out);
  Tensor c = self.expand({mat1.size(0), mat2.size(1)});
  batched_gemm(mat1.unsqueeze(0), mat2.unsqueeze(0), c.unsqueeze(0), alpha, beta,
               out.unsqueeze(0));
  return out;
}

Tensor& baddbmm_out(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                    const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  check_devices({&self, &batch1, &batch2, &out});
  OutMeta<at::meta::structured_baddbmm>(out).meta(self, batch1, batch2, beta, alpha);
  if (!all_gemm({&self, &batch1, &batch2, &out}) || alpha.isComplex() || beta.isComplex())
    return call_cpu_fallback<at::_ops::baddbmm_out>(self, batch1, batch2, beta, alpha, out);
  Tensor c = self.expand({batch1.size(0), batch1.size(1), batch2.size(2)});
  batched_gemm(batch1, batch2, c, alpha, beta, out);
  return out;
}

// ---- addbmm (not structured): sum over the batch folded into K ---------------------------

void addbmm_checks(const Tensor& batch1, const Tensor& batch2) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(batch1.size(0) == batch2.size(0),
              "batch1 and batch2 must have same number of batches, got ", batch1.size(0),
              " and ", batch2.size(0));
  TORCH_CHECK(batch1.size(2) == batch2.size(1), "Incompatible matrix sizes for bmm (",
              batch1.size(1), "x", batch1.size(2), " and ", batch2.size(1), "x",
              batch2.size(2), ")");
}

Tensor& addbmm_out(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  check_devices({&self, &batch1, &batch2, &out});
  if (!all_gemm({&self, &batch1, &batch2, &out}) || alpha.isComplex() || beta.isComplex() ||
      self.scalar_type() != batch1.scalar_type() || batch1.scalar_type() != batch2.scalar_type() ||
      out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::addbmm_out>(self, batch1, batch2, beta, alpha, out);
  // The CPU expands self before checking the batches.
  Tensor c = self.expand({batch1.size(1), batch2.size(2)});
  addbmm_checks(batch1, batch2);
  // In place on a self that only broadcasts: the CPU resizes self; leave that to it.
  if (out.is_same(self) && !self.sizes().equals(c.sizes()))
    return call_cpu_fallback<at::_ops::addbmm_out>(self, batch1, batch2, beta, alpha, out);
  const int64_t b = batch1.size(0), m = batch1.size(1), k = batch1.size(2), n = batch2.size(2);
  // As the CPU (resize_as_, no warning for a differently shaped out).
  if (!out.is_same(self)) out.resize_(c.sizes());
  if (b > 1 && (out.scalar_type() == at::kHalf || out.scalar_type() == at::kBFloat16)) {
    // The CPU adds one batch at a time into the half-precision result: round as it does.
    Tensor acc = at::empty({1, m, n}, out.options()), next = at::empty({1, m, n}, out.options());
    batched_gemm(batch1[0].unsqueeze(0), batch2[0].unsqueeze(0), c.unsqueeze(0), alpha, beta, acc);
    for (int64_t i = 1; i < b; ++i) {
      batched_gemm(batch1[i].unsqueeze(0), batch2[i].unsqueeze(0), acc, alpha, 1, next);
      std::swap(acc, next);
    }
    out.copy_(acc.squeeze(0));
    return out;
  }
  // A (m, b*k) with the batch as the slow part of K; B (b*k, n) matches.
  Tensor a = batch1.permute({1, 0, 2}).reshape({m, b * k});
  Tensor bb = batch2.reshape({b * k, n});
  batched_gemm(a.unsqueeze(0), bb.unsqueeze(0), c.unsqueeze(0), alpha, beta, out.unsqueeze(0));
  return out;
}

Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
              const c10::Scalar& beta, const c10::Scalar& alpha) {
  Tensor out = at::empty({0}, self.options());
  return addbmm_out(self, batch1, batch2, beta, alpha, out);
}

Tensor& addbmm_(Tensor& self, const Tensor& batch1, const Tensor& batch2, const c10::Scalar& beta,
                const c10::Scalar& alpha) {
  return addbmm_out(self, batch1, batch2, beta, alpha, self);
}

// ---- addmv (mv is its composite) -------------------------------------------------------

Tensor& addmv_out(const Tensor& self, const Tensor& mat, const Tensor& vec,
                  const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  check_devices({&self, &mat, &vec, &out});
  // Mixed dtypes: the CPU kernel raises (torch 2.11's meta function lets them through),
  // with the message of the installed release.
  if (self.scalar_type() != mat.scalar_type() || mat.scalar_type() != vec.scalar_type())
    return call_cpu_fallback<at::_ops::addmv_out>(self, mat, vec, beta, alpha, out);
  OutMeta<at::meta::structured_addmv>(out).meta(self, mat, vec, beta, alpha);
  if (!all_gemm({&self, &mat, &vec, &out}) || alpha.isComplex() || beta.isComplex())
    return call_cpu_fallback<at::_ops::addmv_out>(self, mat, vec, beta, alpha, out);
  const int64_t m = mat.size(0);
  if (mat.numel() == 0) {
    // As the CPU: beta * self, with self's own (broadcast) shape.
    if (beta.toComplexDouble() == 0.0) {
      out.zero_();
    } else {
      at::mul_out(out, self, at::scalar_tensor(beta, self.options().device(at::kCPU)));
    }
    return out;
  }
  Tensor c = self.expand({m});
  const int64_t k = vec.size(0);
  batched_gemm(mat.unsqueeze(0), vec.as_strided({1, k, 1}, {0, vec.stride(0), 0}, vec.storage_offset()),
               c.as_strided({1, m, 1}, {0, c.stride(0), 0}, c.storage_offset()), alpha, beta,
               out.as_strided({1, m, 1}, {0, out.stride(0), 0}, out.storage_offset()));
  return out;
}

// ---- dot / vdot -------------------------------------------------------------------------

void dot_checks(const Tensor& self, const Tensor& other, const char* name) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), name,
              " : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
}

Tensor dot_impl(const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({}, self.options());
  const int64_t k = self.numel();
  Tensor a = self.as_strided({1, 1, k}, {0, 0, self.stride(0)}, self.storage_offset());
  Tensor b = other.as_strided({1, k, 1}, {0, other.stride(0), 0}, other.storage_offset());
  batched_gemm(a, b, Tensor(), 1, 0, out.view({1, 1, 1}));
  return out;
}

Tensor dot(const Tensor& self, const Tensor& other) {
  check_devices({&self, &other});
  if (self.is_complex() || other.is_complex() || !all_gemm({&self, &other}))
    return call_cpu_fallback<at::_ops::dot>(self, other);
  dot_checks(self, other, "dot");
  return dot_impl(self, other);
}

Tensor vdot(const Tensor& self, const Tensor& other) {
  check_devices({&self, &other});
  if (self.is_complex() || other.is_complex() || !all_gemm({&self, &other}))
    return call_cpu_fallback<at::_ops::vdot>(self, other);
  dot_checks(self, other, "vdot");
  return dot_impl(self, other);
}

// ---- addr -----------------------------------------------------------------------------------

bool addr_native(const Tensor& self, const Tensor& vec1, const Tensor& vec2,
                 const c10::Scalar& beta, const c10::Scalar& alpha, const Tensor& out) {
  const auto st = out.scalar_type();
  if (!(gemm_dtype(st) || st == at::kBool)) return false;
  if (self.scalar_type() != st || vec1.scalar_type() != st || vec2.scalar_type() != st) return false;
  for (const c10::Scalar* x : {&beta, &alpha}) {
    if (x->isComplex()) return false;
    // The CPU's own messages for the scalar kinds it refuses.
    if (c10::isIntegralType(st, /*includeBool=*/true) && x->isFloatingPoint()) return false;
    if (st != at::kBool && x->isBoolean()) return false;
  }
  for (const Tensor* t : {&self, &vec1, &vec2, &out})
    if (t->device().type() != kDeviceType) return false;
  return true;
}

Tensor& addr_out(const Tensor& self, const Tensor& vec1, const Tensor& vec2,
                 const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  if (!addr_native(self, vec1, vec2, beta, alpha, out))
    return call_cpu_fallback<at::_ops::addr_out>(self, vec1, vec2, beta, alpha, out);
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  const int64_t m = vec1.size(0), n = vec2.size(0);
  Tensor c = self.expand({m, n});
  at::native::resize_output(out, c.sizes());
  if (out.numel() == 0) return out;
  const Compute compute = compute_type_of(out.scalar_type());
  AddrDesc d;
  d.m = static_cast<uint64_t>(m);
  d.n = static_cast<uint64_t>(n);
  d.alpha = multiplier(alpha, compute);
  d.beta = multiplier(beta, compute);
  const bool use_self = !is_zero_bits(d.beta, compute);
  const bool direct = out.is_contiguous() && !shares_storage(out, vec1) &&
                      !shares_storage(out, vec2) && !(use_self && shares_storage(out, self));
  Tensor target = direct ? out : at::empty(out.sizes(), out.options());
  TWGPU_TRY
  auto ref = [](const Tensor& t, uint64_t rows, uint64_t cols) {
    DeviceRef r = device_ref(t);
    MatOperand o;
    o.buffer = r.buffer;
    o.offset = r.offset;
    o.dtype = r.dtype;
    o.rows = rows;
    o.cols = cols;
    return o;
  };
  d.vec1 = ref(vec1, static_cast<uint64_t>(vec1.stride(0)), 0);
  d.vec2 = ref(vec2, 0, static_cast<uint64_t>(vec2.stride(0)));
  if (use_self) d.self = ref(c, static_cast<uint64_t>(c.stride(0)), static_cast<uint64_t>(c.stride(1)));
  d.out = ref(target, static_cast<uint64_t>(n), 1);
  RuntimeLock lock;
  addr(lock.ctx(), d);
  TWGPU_CATCH
  if (!direct) out.copy_(target);
  return out;
}

Tensor addr_functional(const Tensor& self, const Tensor& vec1, const Tensor& vec2,
                       const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (!addr_native(self, vec1, vec2, beta, alpha, self))
    return call_cpu_fallback<at::_ops::addr>(self, vec1, vec2, beta, alpha);
  Tensor out = at::empty({0}, self.options());
  return addr_out(self, vec1, vec2, beta, alpha, out);
}

// ---- linear_group ---------------------------------------------------------------------

// torch.ops.webgpu.linear_group(x, weights, biases) == cat([F.linear(x, w_i, b_i)], -1):
// the horizontal fusion of linears sharing their input (decode's q/k/v, gate/up) that the
// compile pass (compiler/horizontal_fusion.py) emits. Errors read as F.linear's.
void linear_group_checks(const Tensor& x, at::TensorList weights,
                         const c10::List<std::optional<Tensor>>& biases) {
  TORCH_CHECK(!weights.empty(), "linear_group: expected at least one weight");
  TORCH_CHECK(biases.size() == weights.size(), "linear_group: expected one bias (or None) per weight, got ",
              biases.size(), " biases for ", weights.size(), " weights");
  TORCH_CHECK(x.dim() >= 1, "both arguments to linear need to be at least 1D, but they are ", x.dim(), "D and ",
              weights[0].dim(), "D");
  const int64_t k = x.size(-1);
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    TORCH_CHECK(w.dim() == 2, "linear_group: weights must be 2-D, got ", w.dim(), "-D");
    TORCH_CHECK(w.size(1) == k, "mat1 and mat2 shapes cannot be multiplied (", x.numel() / std::max<int64_t>(k, 1),
                "x", k, " and ", w.size(1), "x", w.size(0), ")");
    TORCH_CHECK(w.scalar_type() == x.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
                x.dtype(), " != ", w.dtype());
    const std::optional<Tensor> b = biases.get(i);
    if (!b || !b->defined()) continue;
    TORCH_CHECK(b->dim() == 1 && b->size(0) == w.size(0), "linear_group: bias ", i, " must have shape [",
                w.size(0), "], got ", b->sizes());
    TORCH_CHECK(b->scalar_type() == x.scalar_type(), "expected self and mat2 to have the same dtype, but got: ",
                b->dtype(), " != ", x.dtype());
  }
  // (Any device: the composite runs on the CPU and on Meta for fake tensors.)
  auto same_device = [&](const Tensor& t) {
    TORCH_CHECK(t.device() == x.device(), "Expected all tensors to be on the same device, but found at least two "
                "devices, ", x.device(), " and ", t.device(), "!");
  };
  for (size_t i = 0; i < weights.size(); ++i) {
    same_device(weights[i]);
    if (auto b = biases.get(i); b && b->defined()) same_device(*b);
  }
}

// Every device but webgpu (the CPU, Meta for fake tensors): the definition itself.
Tensor linear_group_composite(const Tensor& x, at::TensorList weights,
                              const c10::List<std::optional<Tensor>>& biases) {
  linear_group_checks(x, weights, biases);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < weights.size(); ++i) parts.push_back(at::linear(x, weights[i], biases.get(i)));
  return at::cat(parts, -1);
}

// A 2-D (or 1-D: one row) view as a matrix operand.
MatOperand operand2(const Tensor& t) {
  return operand3(t.dim() == 2 ? t.unsqueeze(0) : t.view({1, 1, -1}));
}

// The linears of a group descriptor: weights made K-contiguous and biases, kept in `held`
// (alive until recorded).
void add_linears(LinearGroupDesc& d, at::TensorList weights, const c10::List<std::optional<Tensor>>& biases,
                 std::vector<Tensor>& held) {
  for (size_t i = 0; i < weights.size(); ++i) {
    held.push_back(weights[i].stride(1) == 1 ? weights[i] : weights[i].contiguous());
    LinearGroupDesc::Linear L;
    L.n = static_cast<uint64_t>(weights[i].size(0));
    L.weight = operand2(held.back());
    if (auto b = biases.get(i); b && b->defined()) {
      held.push_back(*b);
      L.bias = operand2(held.back());
    }
    d.linears.push_back(L);
  }
}

Tensor linear_group_webgpu(const Tensor& x, at::TensorList weights,
                           const c10::List<std::optional<Tensor>>& biases) {
  linear_group_checks(x, weights, biases);
  const c10::ScalarType st = x.scalar_type();
  if (st != at::kFloat && st != at::kHalf && st != at::kBFloat16) return linear_group_composite(x, weights, biases);
  const int64_t k = x.size(-1);
  int64_t width = 0;
  for (const Tensor& w : weights) width += w.size(0);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = width;
  Tensor out = at::empty(sizes, x.options());
  if (out.numel() == 0) return out;
  Tensor out2 = out.view({-1, width});
  if (k == 0) {  // no products: each linear's columns are its bias (or zeros)
    int64_t col = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      Tensor slice = out2.narrow(1, col, weights[i].size(0));
      if (auto b = biases.get(i); b && b->defined()) slice.copy_(b->expand_as(slice));
      else slice.zero_();
      col += weights[i].size(0);
    }
    return out;
  }
  const Tensor x2 = x.reshape({-1, k});
  std::vector<Tensor> held;  // weights made K-contiguous, biases: alive until recorded
  LinearGroupDesc d;
  d.m = static_cast<uint64_t>(x2.size(0));
  d.k = static_cast<uint64_t>(k);
  TWGPU_TRY
  d.a = operand2(x2);
  add_linears(d, weights, biases, held);
  d.out = operand2(out2);
  RuntimeLock lock;
  linear_group(lock.ctx(), d);
  TWGPU_CATCH
  return out;
}

// ---- linear_gated ---------------------------------------------------------------------

// torch.ops.webgpu.linear_gated(x, w_gate, w_up, b_gate, b_up, act) ==
// act(F.linear(x, w_gate, b_gate)) * F.linear(x, w_up, b_up): a gated MLP's gate/up half
// (Llama's silu, Gemma's gelu), which the compile pass (compiler/gated_mlp.py) emits.
GateAct gate_act(c10::string_view act) {
  if (act == "silu") return GateAct::Silu;
  if (act == "gelu") return GateAct::Gelu;
  if (act == "gelu_tanh") return GateAct::GeluTanh;
  if (act == "relu") return GateAct::Relu;
  TORCH_CHECK(false, "linear_gated: act must be 'silu', 'gelu', 'gelu_tanh' or 'relu', got '", act, "'");
}

// act(t) as eager ops (the composites' definition).
Tensor activated(const Tensor& t, c10::string_view act) {
  const GateAct a = gate_act(act);
  return a == GateAct::Silu ? at::silu(t) : a == GateAct::Relu ? at::relu(t) : at::gelu(t, a == GateAct::Gelu ? "none" : "tanh");
}

void linear_gated_checks(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                         const std::optional<Tensor>& b_gate, const std::optional<Tensor>& b_up,
                         c10::string_view act) {
  linear_group_checks(x, {w_gate, w_up}, c10::List<std::optional<Tensor>>({b_gate, b_up}));
  TORCH_CHECK(w_gate.size(0) == w_up.size(0), "linear_gated: w_gate and w_up must have as many rows, got ",
              w_gate.size(0), " and ", w_up.size(0));
  gate_act(act);
}

Tensor linear_gated_composite(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                              const std::optional<Tensor>& b_gate, const std::optional<Tensor>& b_up,
                              c10::string_view act) {
  linear_gated_checks(x, w_gate, w_up, b_gate, b_up, act);
  const Tensor gate = at::linear(x, w_gate, b_gate);
  return at::mul(activated(gate, act), at::linear(x, w_up, b_up));
}

Tensor linear_gated_webgpu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                           const std::optional<Tensor>& b_gate, const std::optional<Tensor>& b_up,
                           c10::string_view act) {
  linear_gated_checks(x, w_gate, w_up, b_gate, b_up, act);
  const c10::ScalarType st = x.scalar_type();
  const int64_t k = x.size(-1), n = w_gate.size(0);
  if ((st != at::kFloat && st != at::kHalf && st != at::kBFloat16) || k == 0)
    return linear_gated_composite(x, w_gate, w_up, b_gate, b_up, act);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = n;
  Tensor out = at::empty(sizes, x.options());
  if (out.numel() == 0) return out;
  const Tensor x2 = x.reshape({-1, k});
  std::vector<Tensor> held;  // weights made K-contiguous: alive until recorded
  LinearGroupDesc d;
  d.m = static_cast<uint64_t>(x2.size(0));
  d.k = static_cast<uint64_t>(k);
  bool recorded = false;
  TWGPU_TRY
  d.a = operand2(x2);
  const std::optional<Tensor>* biases[2] = {&b_gate, &b_up};
  for (const Tensor* w : {&w_gate, &w_up}) {
    held.push_back(w->stride(1) == 1 ? *w : w->contiguous());
    LinearGroupDesc::Linear L;
    L.n = static_cast<uint64_t>(n);
    L.weight = operand2(held.back());
    if (const std::optional<Tensor>& b = *biases[d.linears.size()]; b && b->defined()) L.bias = operand2(*b);
    d.linears.push_back(L);
  }
  d.out = operand2(out.view({-1, n}));
  RuntimeLock lock;
  recorded = linear_gated(lock.ctx(), d, gate_act(act));
  TWGPU_CATCH
  // Where it is not one dispatch (software adapters, more rows): linears and pointwise ops.
  return recorded ? out : linear_gated_composite(x, w_gate, w_up, b_gate, b_up, act);
}

// ---- rms_linear, layer_norm_linear -----------------------------------------------------

// torch.ops.webgpu.rms_linear(x, residual, norm_weight, eps, weights, biases, act) ->
// (out, h): h = x + residual (x without one), out = the linears (linear_group's columns
// side by side, or linear_gated's act(gate) * up with `act`) of RMSNorm(h) =
// h * rsqrt(mean(h^2, -1) + eps) * norm_weight. layer_norm_linear(x, residual, norm_weight,
// norm_bias, eps, weights, biases, act): the same over F.layer_norm(h, norm_weight,
// norm_bias, eps). A decoder layer's residual add, norm and the projections after it, which
// the compile pass (compiler/rms_linear.py) emits.
Tensor rms_norm_of(const Tensor& h, const Tensor& norm_weight, double eps) {
  return at::mul(at::mul(h, at::rsqrt(at::add(at::mean(at::pow(h, 2), {-1}, /*keepdim=*/true), eps))), norm_weight);
}

void norm_linear_checks(const char* op, const Tensor& x, const std::optional<Tensor>& residual,
                        const Tensor& norm_weight, const std::optional<Tensor>& norm_bias, at::TensorList weights,
                        c10::string_view act) {
  TORCH_CHECK(x.dim() >= 1, op, ": x must have a last dimension");
  TORCH_CHECK(norm_weight.dim() == 1 && norm_weight.size(0) == x.size(-1), op, ": norm_weight must be [",
              x.size(-1), "], got ", norm_weight.sizes());
  if (norm_bias && norm_bias->defined())
    TORCH_CHECK(norm_bias->dim() == 1 && norm_bias->size(0) == x.size(-1), op, ": norm_bias must be [", x.size(-1),
                "], got ", norm_bias->sizes());
  if (residual && residual->defined())
    TORCH_CHECK(residual->sizes() == x.sizes(), op, ": residual must be shaped as x, got ", residual->sizes(),
                " and ", x.sizes());
  if (!act.empty()) {
    TORCH_CHECK(weights.size() == 1 || weights.size() == 2, op,
                ": act takes one weight (act(linear)) or two (gate, up: act(gate) * up), got ", weights.size());
    gate_act(act);
  }
}

// The composite of both ops (norm_bias and `layer` pick the norm): the definition.
std::tuple<Tensor, Tensor> norm_linear_composite(const char* op, const Tensor& x,
                                                 const std::optional<Tensor>& residual, const Tensor& norm_weight,
                                                 const std::optional<Tensor>& norm_bias, bool layer, double eps,
                                                 at::TensorList weights,
                                                 const c10::List<std::optional<Tensor>>& biases,
                                                 c10::string_view act) {
  norm_linear_checks(op, x, residual, norm_weight, norm_bias, weights, act);
  const Tensor h = residual && residual->defined() ? at::add(x, *residual) : x.clone();
  const Tensor normed = layer ? at::layer_norm(h, {h.size(-1)}, norm_weight, norm_bias, eps)
                              : rms_norm_of(h, norm_weight, eps);
  if (act.empty()) return {linear_group_composite(normed, weights, biases), h};
  if (weights.size() == 1) return {activated(linear_group_composite(normed, weights, biases), act), h};
  return {linear_gated_composite(normed, weights[0], weights[1], biases.get(0), biases.get(1), act), h};
}

std::tuple<Tensor, Tensor> norm_linear_webgpu(const char* op, const Tensor& x, const std::optional<Tensor>& residual,
                                              const Tensor& norm_weight, const std::optional<Tensor>& norm_bias,
                                              bool layer, double eps, at::TensorList weights,
                                              const c10::List<std::optional<Tensor>>& biases,
                                              c10::string_view act) {
  norm_linear_checks(op, x, residual, norm_weight, norm_bias, weights, act);
  const bool gated = !act.empty() && weights.size() == 2;
  if (!gated) linear_group_checks(x, weights, biases);
  else linear_gated_checks(x, weights[0], weights[1], biases.get(0), biases.get(1), act);
  const bool has_residual = residual && residual->defined(), has_bias = norm_bias && norm_bias->defined();
  const int64_t k = x.size(-1);
  bool same_types = x.scalar_type() == at::kFloat && norm_weight.scalar_type() == at::kFloat &&
                    (!has_residual || residual->scalar_type() == at::kFloat) &&
                    (!has_bias || norm_bias->scalar_type() == at::kFloat);
  for (const Tensor& w : weights) same_types = same_types && w.scalar_type() == at::kFloat;
  int64_t width = 0;
  for (const Tensor& w : weights) width += w.size(0);
  auto composite = [&] {
    return norm_linear_composite(op, x, residual, norm_weight, norm_bias, layer, eps, weights, biases, act);
  };
  // (No columns: out is empty but h is not; the view of out as rows below needs columns.)
  if (!same_types || k == 0 || x.numel() == 0 || width == 0) return composite();
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = gated ? weights[0].size(0) : width;
  Tensor out = at::empty(sizes, x.options());
  Tensor h = at::empty(x.sizes(), x.options());
  const Tensor x2 = x.reshape({-1, k});
  std::vector<Tensor> held;  // operands made K-contiguous: alive until recorded
  // One linear whose weight has N contiguous (GPT-2's Conv1D weight [k, n], seen
  // transposed): the GEMV over such weights normalizes A itself, no copy of the weight.
  const bool n_contiguous = weights.size() == 1 && weights[0].stride(0) == 1 && weights[0].size(1) > 1 &&
                            weights[0].stride(1) != 1;
  bool recorded = false;
  TWGPU_TRY
  RowNorm norm;
  if (has_residual) {
    held.push_back(residual->reshape({-1, k}));
    norm.residual = operand2(held.back());
  }
  norm.weight = operand2(norm_weight);
  if (has_bias) norm.bias = operand2(*norm_bias);
  norm.h = operand2(h.view({-1, k}));
  norm.eps = static_cast<float>(eps);
  norm.layer = layer;
  if (n_contiguous) {
    GemmDesc g;
    g.m = static_cast<uint64_t>(x2.size(0));
    g.n = static_cast<uint64_t>(width);
    g.k = static_cast<uint64_t>(k);
    g.a = operand2(x2);
    g.b = operand2(weights[0].t());
    g.out = operand2(out.view({-1, width}));
    if (auto b = biases.get(0); b && b->defined()) {
      held.push_back(b->view({1, width}).expand({x2.size(0), width}));
      g.c = operand2(held.back());
      g.beta = ScalarBits::from_f32(1.0f);
    }
    g.norm = &norm;
    g.act = act.empty() ? GateAct::None : gate_act(act);
    RuntimeLock lock;
    recorded = gemm_normed(lock.ctx(), g);
  } else {
    LinearGroupDesc d;
    d.m = static_cast<uint64_t>(x2.size(0));
    d.k = static_cast<uint64_t>(k);
    d.a = operand2(x2);
    add_linears(d, weights, biases, held);
    d.norm = norm;
    d.out = operand2(out.view({-1, sizes.back()}));
    RuntimeLock lock;
    recorded = linear_group_normed(lock.ctx(), d, act.empty() ? GateAct::None : gate_act(act));
  }
  TWGPU_CATCH
  // Where it is not one dispatch (software adapters, more rows, rows too long to stage):
  // the add, the norm and the linears as their own ops.
  return recorded ? std::make_tuple(out, h) : composite();
}

std::tuple<Tensor, Tensor> rms_linear_composite(const Tensor& x, const std::optional<Tensor>& residual,
                                                const Tensor& norm_weight, double eps, at::TensorList weights,
                                                const c10::List<std::optional<Tensor>>& biases,
                                                c10::string_view act) {
  return norm_linear_composite("rms_linear", x, residual, norm_weight, std::nullopt, false, eps, weights, biases, act);
}

std::tuple<Tensor, Tensor> rms_linear_webgpu(const Tensor& x, const std::optional<Tensor>& residual,
                                             const Tensor& norm_weight, double eps, at::TensorList weights,
                                             const c10::List<std::optional<Tensor>>& biases, c10::string_view act) {
  return norm_linear_webgpu("rms_linear", x, residual, norm_weight, std::nullopt, false, eps, weights, biases, act);
}

std::tuple<Tensor, Tensor> layer_norm_linear_composite(const Tensor& x, const std::optional<Tensor>& residual,
                                                       const Tensor& norm_weight,
                                                       const std::optional<Tensor>& norm_bias, double eps,
                                                       at::TensorList weights,
                                                       const c10::List<std::optional<Tensor>>& biases,
                                                       c10::string_view act) {
  return norm_linear_composite("layer_norm_linear", x, residual, norm_weight, norm_bias, true, eps, weights, biases,
                               act);
}

std::tuple<Tensor, Tensor> layer_norm_linear_webgpu(const Tensor& x, const std::optional<Tensor>& residual,
                                                    const Tensor& norm_weight, const std::optional<Tensor>& norm_bias,
                                                    double eps, at::TensorList weights,
                                                    const c10::List<std::optional<Tensor>>& biases,
                                                    c10::string_view act) {
  return norm_linear_webgpu("layer_norm_linear", x, residual, norm_weight, norm_bias, true, eps, weights, biases,
                            act);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(webgpu, m) {
  m.def("linear_group(Tensor x, Tensor[] weights, Tensor?[] biases) -> Tensor");
  m.def("linear_gated(Tensor x, Tensor w_gate, Tensor w_up, Tensor? b_gate, Tensor? b_up, str act) -> Tensor");
  m.def("rms_linear(Tensor x, Tensor? residual, Tensor norm_weight, float eps, Tensor[] weights, Tensor?[] biases, "
        "str act) -> (Tensor, Tensor)");
  m.def("layer_norm_linear(Tensor x, Tensor? residual, Tensor norm_weight, Tensor? norm_bias, float eps, "
        "Tensor[] weights, Tensor?[] biases, str act) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(webgpu, CompositeExplicitAutograd, m) {
  m.impl("linear_group", TORCH_FN(linear_group_composite));
  m.impl("linear_gated", TORCH_FN(linear_gated_composite));
  m.impl("rms_linear", TORCH_FN(rms_linear_composite));
  m.impl("layer_norm_linear", TORCH_FN(layer_norm_linear_composite));
}

TORCH_LIBRARY_IMPL(webgpu, PrivateUse1, m) {
  m.impl("linear_group", TORCH_FN(linear_group_webgpu));
  m.impl("linear_gated", TORCH_FN(linear_gated_webgpu));
  m.impl("rms_linear", TORCH_FN(rms_linear_webgpu));
  m.impl("layer_norm_linear", TORCH_FN(layer_norm_linear_webgpu));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("addmv.out", TORCH_FN(addmv_out));
  m.impl("addbmm", TORCH_FN(addbmm));
  m.impl("addbmm.out", TORCH_FN(addbmm_out));
  m.impl("addbmm_", TORCH_FN(addbmm_));
  m.impl("dot", TORCH_FN(dot));
  m.impl("vdot", TORCH_FN(vdot));
  m.impl("addr", TORCH_FN(addr_functional));
  m.impl("addr.out", TORCH_FN(addr_out));
}

}  // namespace twgpu::aten
