// Native dense linear algebra (float32, batched): LU factorization and solves, inverse,
// determinants, Cholesky, triangular solves. Kernels work on fresh row-major copies (one
// invocation per matrix, see kernels/linalg.h); results are copied into the outputs, whose
// layout (column-major for LAPACK-style results) ATen's meta functions chose. Other dtypes
// and unsupported options go to the CPU.
#include <ATen/ExpandUtils.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_det_ops.h>
#include <ATen/ops/_linalg_slogdet_ops.h>
#include <ATen/ops/_linalg_solve_ex_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/_cholesky_solve_helper_ops.h>
#include <ATen/ops/cholesky_inverse_ops.h>
#include <ATen/ops/cholesky_ops.h>
#include <ATen/ops/linalg_cholesky_ex_ops.h>
#include <ATen/ops/linalg_inv_ex_ops.h>
#include <ATen/ops/geqrf_ops.h>
#include <ATen/ops/linalg_householder_product_ops.h>
#include <ATen/ops/linalg_qr_meta.h>
#include <ATen/ops/linalg_qr_ops.h>
#include <ATen/ops/ormqr_ops.h>
#include <ATen/ops/_linalg_eigh_meta.h>
#include <ATen/ops/_linalg_eigh_ops.h>
#include <ATen/ops/_linalg_svd_meta.h>
#include <ATen/ops/_linalg_svd_ops.h>
#include <ATen/ops/linalg_cross_meta.h>
#include <ATen/ops/linalg_cross_ops.h>
#include <ATen/ops/linalg_lu_meta.h>
#include <ATen/ops/lu_unpack_meta.h>
#include <ATen/ops/linalg_lu_factor_ex_ops.h>
#include <ATen/ops/linalg_lu_ops.h>
#include <ATen/ops/lu_unpack_ops.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/linalg_lu_solve_ops.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/triangular_solve_ops.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/any.h>
#include <ATen/ops/linalg_ldl_factor_ex_meta.h>
#include <ATen/ops/linalg_ldl_factor_ex_ops.h>
#include <ATen/ops/linalg_ldl_solve_meta.h>
#include <ATen/ops/linalg_ldl_solve_ops.h>
#include <ATen/ops/linalg_matrix_rank_ops.h>
#include <ATen/ops/linalg_pinv_ops.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/_linalg_eigh.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/linalg_lstsq_ops.h>
#include <ATen/ops/linalg_svdvals.h>
#include <ATen/ops/_linalg_svd.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "aten/cpu_fallback.h"
#include "aten/structured_meta.h"
#include "aten/webgpu_tensor.h"
#include "kernels/linalg.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

bool native(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->scalar_type() != c10::kFloat || t->device().type() != kDeviceType) return false;
  return true;
}

// A fresh dense row-major copy that kernels may update in place.
Tensor fresh(const Tensor& t, c10::ScalarType dtype = c10::kFloat) {
  Tensor r = at::empty(t.sizes(), t.options().dtype(dtype).memory_format(c10::MemoryFormat::Contiguous));
  r.copy_(t);
  return r;
}

MatrixBatch matrices(const Tensor& t) {
  DeviceRef r = device_ref(t);
  return {r.buffer, r.offset};
}

uint32_t u32(int64_t v) {
  TORCH_CHECK(v >= 0 && v <= 0xFFFFFFFFll, "torch_webgpu: linear algebra size out of range");
  return static_cast<uint32_t>(v);
}

std::vector<int64_t> batch_shape(const Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2);
}
int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}
std::vector<int64_t> concat(std::vector<int64_t> a, std::initializer_list<int64_t> b) {
  a.insert(a.end(), b);
  return a;
}

// False when a kernel whose busiest loop runs `iterations` times in one invocation would
// meet the adapter's loop limit (llvmpipe): the caller computes on the CPU instead.
bool loops_fit(double iterations) {
  RuntimeLock lock;
  uint64_t limit = lock.ctx().caps().max_loop_iterations;
  return limit == 0 || iterations < 0.9 * static_cast<double>(limit);
}
double cube(int64_t a, int64_t b, int64_t c) {
  return static_cast<double>(a) * static_cast<double>(b) * static_cast<double>(c);
}

void store(Tensor& out, const Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

// store() for results the CPU computes with LAPACK: an out resized here takes their
// column-major layout (column_major()).
void store_lapack(Tensor& out, const Tensor& value) {
  if (out.sizes() != value.sizes()) {
    at::native::resize_output(out, value.mT().sizes());
    out.transpose_(-2, -1);
  }
  out.copy_(value);
}

struct LU {
  Tensor lu, pivots, info;
};

// getrf on every matrix of A (..., m, n).
LU lu_factor(const Tensor& A) {
  auto batch = batch_shape(A);
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  LU r{fresh(A), at::empty(concat(batch, {k}), A.options().dtype(c10::kInt)),
       at::zeros(batch, A.options().dtype(c10::kInt))};
  if (r.lu.numel() == 0) return r;
  TWGPU_TRY
  RuntimeLock lock;
  ::twgpu::lu_factor(lock.ctx(), matrices(r.lu), matrices(r.pivots), matrices(r.info),
                     u32(product(batch)), u32(m), u32(n));
  TWGPU_CATCH
  return r;
}

// Solves op(A) X = B from A's factorization, op = transpose when `transpose`; LU/pivots and
// B broadcast over their batch dims.
Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& B, bool transpose) {
  int64_t n = lu.size(-1), k = B.size(-1);
  auto batch = at::infer_size(batch_shape(lu), batch_shape(B));
  Tensor X = fresh(B.expand(concat(batch, {n, k})));
  if (X.numel() == 0 || n == 0) return X;
  Tensor a = fresh(lu.expand(concat(batch, {n, n})));
  Tensor p = fresh(pivots.expand(concat(batch, {n})), c10::kInt);
  TWGPU_TRY
  RuntimeLock lock;
  ::twgpu::lu_solve(lock.ctx(), matrices(a), matrices(p), matrices(X), u32(product(batch)), u32(n),
                    u32(k), transpose);
  TWGPU_CATCH
  return X;
}

// Solves A X = B (left) or X A = B with A triangular; batch dims broadcast.
Tensor triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unit) {
  // X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way.
  Tensor a = left ? A : A.mT(), b = left ? B : B.mT();
  bool up = left ? upper : !upper;
  int64_t n = a.size(-1), k = b.size(-1);
  auto batch = at::infer_size(batch_shape(a), batch_shape(b));
  Tensor X = fresh(b.expand(concat(batch, {n, k})));
  if (X.numel() > 0 && n > 0) {
    Tensor ac = fresh(a.expand(concat(batch, {n, n})));
    TWGPU_TRY
    RuntimeLock lock;
    ::twgpu::triangular_solve(lock.ctx(), matrices(ac), matrices(X), u32(product(batch)), u32(n),
                              u32(k), up, unit);
    TWGPU_CATCH
  }
  return left ? X : X.mT();
}

// ---- registered kernels --------------------------------------------------------------

std::tuple<Tensor&, Tensor&, Tensor&> lu_factor_ex_out(const Tensor& A, bool pivot,
                                                       bool check_errors, Tensor& LU_,
                                                       Tensor& pivots, Tensor& info) {
  if (!native({&A}) || !pivot || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), A.size(-1), std::min(A.size(-2), A.size(-1))))))
    return call_cpu_fallback<at::_ops::linalg_lu_factor_ex_out>(A, pivot, check_errors, LU_,
                                                                pivots, info);
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lu_factor: Expected tensor with 2 or more dimensions. Got size: ",
              A.sizes(), " instead");
  LU r = lu_factor(A);
  store(LU_, r.lu);
  store(pivots, r.pivots);
  store(info, r.info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {LU_, pivots, info};
}

Tensor& lu_solve_out(const Tensor& LU_, const Tensor& pivots, const Tensor& B, bool left,
                     bool adjoint, Tensor& out) {
  if (!native({&LU_, &B}) || !loops_fit(cube(LU_.size(-1), LU_.size(-1), 1)))
    return call_cpu_fallback<at::_ops::linalg_lu_solve_out>(LU_, pivots, B, left, adjoint, out);
  TORCH_CHECK(LU_.dim() >= 2 && LU_.size(-1) == LU_.size(-2),
              "linalg.lu_solve: A must be batches of square matrices, but they are ",
              LU_.size(-2), " by ", LU_.size(-1), " matrices");
  TORCH_CHECK(B.dim() >= 2, "linalg.lu_solve: Expected B to have at least 2 dimensions, but it has ",
              B.dim(), " dimensions instead");
  TORCH_CHECK(left ? B.size(-2) == LU_.size(-1) : B.size(-1) == LU_.size(-1),
              "linalg.lu_solve: Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", LU_.size(-2), "x", LU_.size(-1), " and ",
              B.size(-2), "x", B.size(-1), ")");
  // X A = B  <=>  A^T X^T = B^T: the transposed system with the other `adjoint`.
  Tensor X = lu_solve(LU_, pivots, left ? B : B.mT(), adjoint != !left);
  store(out, left ? X : X.mT());
  return out;
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> solve_ex_out(const Tensor& A, const Tensor& B,
                                                            bool left, bool check_errors,
                                                            Tensor& result, Tensor& LU_,
                                                            Tensor& pivots, Tensor& info) {
  if (!native({&A, &B}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::_linalg_solve_ex_result>(A, B, left, check_errors, result,
                                                                LU_, pivots, info);
  bool vector_case = at::native::linalg_solve_is_vector_rhs(A, B);
  Tensor B_ = vector_case ? B.unsqueeze(left ? -1 : -2) : B;
  at::native::checkInputsSolver(A, B_, left, "linalg.solve");
  LU r = lu_factor(A);
  Tensor X = lu_solve(r.lu, r.pivots, left ? B_ : B_.mT(), !left);
  if (!left) X = X.mT();
  store(result, vector_case ? X.squeeze(left ? -1 : -2) : X);
  store(LU_, r.lu);
  store(pivots, r.pivots);
  store(info, r.info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  return {result, LU_, pivots, info};
}

std::tuple<Tensor&, Tensor&> inv_ex_out(const Tensor& A, bool check_errors, Tensor& inverse,
                                        Tensor& info) {
  if (!native({&A}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::linalg_inv_ex_inverse>(A, check_errors, inverse, info);
  at::native::squareCheckInputs(A, "linalg.inv");
  LU r = lu_factor(A);
  Tensor eye = at::zeros(A.sizes(), A.options());
  eye.diagonal(0, -2, -1).fill_(1);
  store(inverse, lu_solve(r.lu, r.pivots, eye, false));
  store(info, r.info);
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
  return {inverse, info};
}

std::pair<Tensor, Tensor> cholesky_lower(const Tensor& A);

struct Det {
  Tensor det, sign, logabsdet;
  LU lu;
};

Det determinant(const Tensor& A, const char* name) {
  at::native::squareCheckInputs(A, name);
  Det d;
  // As the CPU: a row-major A is factored as A^T (LAPACK's column-major view of it); the
  // backward formulas read the saved LU that way. det(A^T) = det(A).
  d.lu = lu_factor(A.is_contiguous() ? A.mT() : A);
  auto batch = batch_shape(A);
  d.det = at::empty(batch, A.options());
  d.sign = at::empty(batch, A.options());
  d.logabsdet = at::empty(batch, A.options());
  if (d.det.numel() == 0) return d;
  if (A.size(-1) == 0) {  // the empty product
    d.det.fill_(1);
    d.sign.fill_(1);
    d.logabsdet.fill_(0);
    return d;
  }
  TWGPU_TRY
  RuntimeLock lock;
  lu_determinant(lock.ctx(), matrices(d.lu.lu), matrices(d.lu.pivots), matrices(d.det),
                 matrices(d.sign), matrices(d.logabsdet), u32(product(batch)), u32(A.size(-1)));
  TWGPU_CATCH
  return d;
}

std::tuple<Tensor&, Tensor&, Tensor&> det_out(const Tensor& A, Tensor& result, Tensor& LU_,
                                              Tensor& pivots) {
  if (!native({&A}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::_linalg_det_result>(A, result, LU_, pivots);
  Det d = determinant(A, "linalg.det");
  store(result, d.det);
  store(LU_, d.lu.lu);
  store(pivots, d.lu.pivots);
  return {result, LU_, pivots};
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> slogdet_out(const Tensor& A, Tensor& sign,
                                                           Tensor& logabsdet, Tensor& LU_,
                                                           Tensor& pivots) {
  if (!native({&A}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::_linalg_slogdet_sign>(A, sign, logabsdet, LU_, pivots);
  Det d = determinant(A, "linalg.slogdet");
  store(sign, d.sign);
  store(logabsdet, d.logabsdet);
  store(LU_, d.lu.lu);
  store(pivots, d.lu.pivots);
  return {sign, logabsdet, LU_, pivots};
}

std::tuple<Tensor&, Tensor&> cholesky_ex_out(const Tensor& A, bool upper, bool check_errors,
                                             Tensor& L, Tensor& info) {
  if (!native({&A}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::linalg_cholesky_ex_L>(A, upper, check_errors, L, info);
  at::native::squareCheckInputs(A, "linalg.cholesky");
  // potrf reads one triangle: the upper factor of A is the transposed lower factor of A^T.
  auto [a, inf] = cholesky_lower(upper ? A.mT() : A);
  store(L, upper ? a.mT() : a);
  store(info, inf);
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  return {L, info};
}

// The lower Cholesky factor of every matrix of A (reading its lower triangle) and info.
std::pair<Tensor, Tensor> cholesky_lower(const Tensor& A) {
  Tensor a = fresh(A);
  auto batch = batch_shape(A);
  Tensor inf = at::zeros(batch, A.options().dtype(c10::kInt));
  if (a.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    ::twgpu::cholesky(lock.ctx(), matrices(a), matrices(inf), u32(product(batch)), u32(A.size(-1)));
    TWGPU_CATCH
  }
  return {a, inf};
}

// torch.cholesky (deprecated): raises on a matrix that is not positive-definite.
Tensor cholesky_legacy(const Tensor& A, bool upper) {
  if (!native({&A}) || !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1))))
    return call_cpu_fallback<at::_ops::cholesky>(A, upper);
  at::native::squareCheckInputs(A, "cholesky");
  auto [L, info] = cholesky_lower(upper ? A.mT() : A);
  at::_linalg_check_errors(info, "cholesky", A.dim() == 2);
  return column_major(upper ? L.mT() : L);
}

// X with A X = B, A = L L^T (or U^T U when upper), from the factor; batch dims equal.
Tensor cholesky_solve_helper(const Tensor& B, const Tensor& factor, bool upper) {
  if (!native({&B, &factor}) || !loops_fit(cube(factor.size(-1), factor.size(-1), 1)))
    return call_cpu_fallback<at::_ops::_cholesky_solve_helper>(B, factor, upper);
  Tensor L = upper ? factor.mT() : factor;  // A = L L^T either way
  Tensor y = triangular(L, B, /*upper=*/false, /*left=*/true, /*unit=*/false);
  return column_major(triangular(L.mT(), y, /*upper=*/true, /*left=*/true, /*unit=*/false));
}

Tensor cholesky_inverse_fn(const Tensor& factor, bool upper) {
  if (!native({&factor}) || !loops_fit(cube(factor.size(-1), factor.size(-1), 1)))
    return call_cpu_fallback<at::_ops::cholesky_inverse>(factor, upper);
  at::native::squareCheckInputs(factor, "cholesky_inverse");
  Tensor eye = at::zeros(factor.sizes(), factor.options());
  eye.diagonal(0, -2, -1).fill_(1);
  return cholesky_solve_helper(eye, factor, upper);
}

Tensor& cholesky_inverse_out(const Tensor& factor, bool upper, Tensor& out) {
  if (!native({&factor, &out}) || !loops_fit(cube(factor.size(-1), factor.size(-1), 1)))
    return call_cpu_fallback<at::_ops::cholesky_inverse_out>(factor, upper, out);
  store(out, cholesky_inverse_fn(factor, upper));
  return out;
}

// ---- QR (Householder) ----------------------------------------------------------------

std::pair<Tensor, Tensor> geqrf_(const Tensor& A) {
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = batch_shape(A);
  Tensor a = fresh(A);
  Tensor tau = at::empty(concat(batch, {k}), A.options());
  if (a.numel() > 0 && k > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    householder_qr(lock.ctx(), matrices(a), matrices(tau), u32(product(batch)), u32(m), u32(n));
    TWGPU_CATCH
  }
  return {a, tau};
}

// op(Q) C or C op(Q) for Q = H1 ... Hk from reflectors v (..., m, kv) and tau (..., k).
Tensor apply_q(const Tensor& v, const Tensor& tau, const Tensor& C, bool left, bool transpose) {
  Tensor c = fresh(C);
  int64_t m = v.size(-2), kv = v.size(-1), k = tau.size(-1);
  int64_t nc = left ? C.size(-1) : C.size(-2);
  if (c.numel() == 0 || k == 0) return c;
  Tensor vv = fresh(v), tt = fresh(tau);
  TWGPU_TRY
  RuntimeLock lock;
  householder_apply(lock.ctx(), matrices(vv), matrices(tt), matrices(c),
                    u32(product(batch_shape(C))), u32(m), u32(kv), u32(k), u32(nc), left, transpose);
  TWGPU_CATCH
  return c;
}

Tensor eye_like(const Tensor& t, int64_t m, int64_t n) {
  Tensor e = at::zeros(concat(batch_shape(t), {m, n}), t.options());
  e.diagonal(0, -2, -1).fill_(1);
  return e;
}

std::tuple<Tensor, Tensor> geqrf_fn(const Tensor& A) {
  if (!native({&A}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), A.size(-1), A.size(-1)))))
    return call_cpu_fallback<at::_ops::geqrf>(A);
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto [a, tau] = geqrf_(A);
  return {column_major(a), tau};
}

std::tuple<Tensor&, Tensor&> geqrf_out(const Tensor& A, Tensor& a, Tensor& tau) {
  if (!native({&A, &a, &tau}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), A.size(-1), A.size(-1)))))
    return call_cpu_fallback<at::_ops::geqrf_a>(A, a, tau);
  TORCH_CHECK(A.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto [r, t] = geqrf_(A);
  store(a, r);
  store(tau, t);
  return {a, tau};
}

void check_householder(const Tensor& input, const Tensor& tau) {
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.householder_product: input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1),
              "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(input.size(-1) >= tau.size(-1),
              "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(input.dim() - tau.dim() == 1,
              "torch.linalg.householder_product: Expected tau to have one dimension less than input, but got tau.ndim equal to ",
              tau.dim(), " and input.ndim is equal to ", input.dim());
  TORCH_CHECK(input.scalar_type() == tau.scalar_type(),
              "torch.linalg.householder_product: tau dtype ", tau.scalar_type(),
              " does not match input dtype ", input.scalar_type());
}

Tensor householder_product(const Tensor& input, const Tensor& tau) {
  if (!native({&input, &tau}) || (input.dim() >= 2 && !loops_fit(cube(input.size(-2), input.size(-1), 1))))
    return call_cpu_fallback<at::_ops::linalg_householder_product>(input, tau);
  check_householder(input, tau);
  return column_major(apply_q(input, tau, eye_like(input, input.size(-2), input.size(-1)), true, false));
}

Tensor& householder_product_out(const Tensor& input, const Tensor& tau, Tensor& out) {
  if (!native({&input, &tau, &out}) || (input.dim() >= 2 && !loops_fit(cube(input.size(-2), input.size(-1), 1))))
    return call_cpu_fallback<at::_ops::linalg_householder_product_out>(input, tau, out);
  store(out, householder_product(input, tau));
  return out;
}

Tensor ormqr_fn(const Tensor& A, const Tensor& tau, const Tensor& C, bool left, bool transpose) {
  if (!native({&A, &tau, &C}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), A.size(-1), 1))))
    return call_cpu_fallback<at::_ops::ormqr>(A, tau, C, left, transpose);
  TORCH_CHECK(A.dim() >= 2 && C.dim() >= 2, "torch.ormqr: input must have at least 2 dimensions.");
  int64_t m = left ? C.size(-2) : C.size(-1);
  TORCH_CHECK(A.size(-2) == m, "torch.ormqr: other.shape[", left ? -2 : -1,
              "] must be equal to input.shape[-2]");
  TORCH_CHECK(tau.size(-1) <= A.size(-1), "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]");
  return column_major(apply_q(A, tau, C, left, transpose));
}

Tensor& ormqr_out(const Tensor& A, const Tensor& tau, const Tensor& C, bool left, bool transpose,
                  Tensor& out) {
  if (!native({&A, &tau, &C, &out}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), A.size(-1), 1))))
    return call_cpu_fallback<at::_ops::ormqr_out>(A, tau, C, left, transpose, out);
  store(out, ormqr_fn(A, tau, C, left, transpose));
  return out;
}

std::tuple<Tensor&, Tensor&> qr_out(const Tensor& A, c10::string_view mode, Tensor& Q, Tensor& R) {
  if (!native({&A}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-2), std::max(A.size(-1), A.size(-2)), A.size(-1)))))
    return call_cpu_fallback<at::_ops::linalg_qr_out>(A, mode, Q, R);
  OutMeta<at::meta::structured_linalg_qr, 2>({&Q, &R}).meta(A, mode);
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  bool complete = mode == "complete", compute_q = mode != "r";
  auto [a, tau] = geqrf_(A);
  Tensor r = at::triu(complete ? a : a.narrow(-2, 0, k));
  store(R, r);
  if (compute_q) {
    int64_t qcols = complete ? m : k;
    store(Q, apply_q(a, tau, eye_like(A, m, qcols), true, false));
  }
  return {Q, R};
}

// ---- SVD and symmetric eigenproblems (Jacobi) ----------------------------------------

// Orthonormal columns completing those of q (..., r, c), c < r: the last r - c columns of
// the complete Q of q's QR factorization.
Tensor complete_basis(const Tensor& q) {
  int64_t r = q.size(-2), c = q.size(-1);
  auto [h, tau] = geqrf_(q);
  Tensor full = apply_q(h, tau, eye_like(q, r, r), true, false);
  return full.narrow(-1, c, r - c);
}

std::tuple<Tensor&, Tensor&, Tensor&> svd_out(const Tensor& A, bool full_matrices,
                                              bool compute_uv, std::optional<c10::string_view> driver,
                                              Tensor& U, Tensor& S, Tensor& Vh) {
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  // Jacobi: up to 40 sweeps over n(n-1)/2 column pairs of length m.
  if (!native({&A}) || (A.dim() >= 2 && !loops_fit(20.0 * cube(std::max(A.size(-2), A.size(-1)),
                                                                 std::min(A.size(-2), A.size(-1)),
                                                                 std::min(A.size(-2), A.size(-1))))))
    return call_cpu_fallback<at::_ops::_linalg_svd_U>(A, full_matrices, compute_uv, driver, U, S, Vh);
  OutMeta<at::meta::structured__linalg_svd, 3>({&U, &S, &Vh}).meta(A, full_matrices, compute_uv, driver);
  // One-sided Jacobi wants m >= n: A^T = V S U^T otherwise.
  bool tall = m >= n;
  Tensor a = fresh(tall ? A : A.mT());
  auto batch = batch_shape(A);
  Tensor v = at::empty(concat(batch, {k, k}), A.options());
  Tensor s = at::empty(concat(batch, {k}), A.options());
  if (s.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    jacobi_svd(lock.ctx(), matrices(a), matrices(v), matrices(s), u32(product(batch)),
               u32(tall ? m : n), u32(k));
    TWGPU_CATCH
  }
  store(S, s);
  if (compute_uv) {
    // Full matrices of a rectangular A: the long factor's k columns are completed to an
    // orthonormal basis by the trailing columns of a complete QR of it.
    // With no columns (k = 0) that basis is the identity, as LAPACK returns.
    if (full_matrices && m != n) {
      int64_t r = a.size(-2);
      a = a.numel() == 0 ? eye_like(a, r, r) : at::cat({a, complete_basis(a)}, -1);
    }
    // tall: A = a S v^T; wide: A^T = a S v^T, so A = v S a^T.
    store(U, tall ? a : v);
    store(Vh, tall ? v.mT() : a.mT());
  }
  return {U, S, Vh};
}

std::tuple<Tensor&, Tensor&> eigh_out(const Tensor& A, c10::string_view uplo, bool compute_v,
                                      Tensor& w, Tensor& V) {
  if (!native({&A}) || (A.dim() >= 2 && !loops_fit(20.0 * cube(A.size(-1), A.size(-1), A.size(-1)))))
    return call_cpu_fallback<at::_ops::_linalg_eigh_eigenvalues>(A, uplo, compute_v, w, V);
  OutMeta<at::meta::structured__linalg_eigh, 2>({&w, &V}).meta(A, uplo, compute_v);
  // Only one triangle is read, as LAPACK's syevd does: mirror it.
  bool lower = uplo == "L" || uplo == "l";
  Tensor tri = lower ? at::tril(A) : at::triu(A);
  Tensor a = fresh(at::add(tri, (lower ? at::tril(A, -1) : at::triu(A, 1)).mT()));
  int64_t n = A.size(-1);
  auto batch = batch_shape(A);
  Tensor v = at::empty(a.sizes(), A.options());
  Tensor ev = at::empty(concat(batch, {n}), A.options());
  if (ev.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    jacobi_eigh(lock.ctx(), matrices(a), matrices(v), matrices(ev), u32(product(batch)), u32(n));
    TWGPU_CATCH
  }
  store(w, ev);
  if (compute_v) store(V, v);
  return {w, V};
}

// P, L, U of A = P L U from an LU factorization (..., m, n) and its pivots.
std::tuple<Tensor, Tensor, Tensor> unpack(const Tensor& lu, const Tensor& pivots, bool data,
                                          bool perm) {
  int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n);
  auto batch = batch_shape(lu);
  Tensor P = at::empty({0}, lu.options()), L = at::empty({0}, lu.options()),
         U = at::empty({0}, lu.options());
  if (data) {
    L = at::tril(lu.narrow(-1, 0, k), -1);
    L.diagonal(0, -2, -1).fill_(1);
    U = at::triu(lu.narrow(-2, 0, k));
  }
  if (perm) {
    P = at::zeros(concat(batch, {m, m}), lu.options());
    if (P.numel() > 0) {
      Tensor piv = fresh(pivots, c10::kInt);
      Tensor scratch = at::empty(concat(batch, {m}), lu.options().dtype(c10::kInt));
      TWGPU_TRY
      RuntimeLock lock;
      lu_permutation(lock.ctx(), matrices(piv), matrices(scratch), matrices(P),
                     u32(product(batch)), u32(m), u32(k));
      TWGPU_CATCH
    }
  }
  return {P, L, U};
}

std::tuple<Tensor&, Tensor&, Tensor&> lu_unpack_out(const Tensor& lu, const Tensor& pivots,
                                                    bool data, bool perm, Tensor& P, Tensor& L,
                                                    Tensor& U) {
  if (!native({&lu}) || !loops_fit(cube(lu.size(-2), 2, 1)))
    return call_cpu_fallback<at::_ops::lu_unpack_out>(lu, pivots, data, perm, P, L, U);
  OutMeta<at::meta::structured_lu_unpack, 3>({&P, &L, &U}).meta(lu, pivots, data, perm);
  auto [p, l, u] = unpack(lu, pivots, data, perm);
  if (data) {
    store(L, l);
    store(U, u);
  }
  if (perm) store(P, p);
  return {P, L, U};
}

std::tuple<Tensor&, Tensor&, Tensor&> linalg_lu_out(const Tensor& A, bool pivot, Tensor& P,
                                                    Tensor& L, Tensor& U) {
  if (!native({&A}) || !pivot || !loops_fit(cube(A.size(-2), A.size(-1), std::min(A.size(-2), A.size(-1)))))
    return call_cpu_fallback<at::_ops::linalg_lu_out>(A, pivot, P, L, U);
  OutMeta<at::meta::structured_linalg_lu, 3>({&P, &L, &U}).meta(A, pivot);
  LU r = lu_factor(A);
  auto [p, l, u] = unpack(r.lu, r.pivots, true, true);
  store(P, p);
  store(L, l);
  store(U, u);
  return {P, L, U};
}

// cross(a, b) along `dim` (size 3) from native views and pointwise ops.
Tensor& cross_out(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  if (any_stored_only({&a, &b, &out}))
    return call_cpu_fallback<at::_ops::linalg_cross_out>(a, b, dim, out);
  OutMeta<at::meta::structured_linalg_cross>(out).meta(a, b, dim);
  if (out.numel() == 0) return out;
  int64_t d = c10::maybe_wrap_dim(dim, out.dim());
  Tensor x = a.expand(out.sizes()), y = b.expand(out.sizes());
  // component i = x[j] * y[k] - x[k] * y[j] for (i, j, k) cyclic
  auto part = [&](int64_t j, int64_t k) {
    return at::sub(at::mul(x.select(d, j), y.select(d, k)), at::mul(x.select(d, k), y.select(d, j)));
  };
  Tensor r = at::stack({part(1, 2), part(2, 0), part(0, 1)}, d);
  out.copy_(r);
  return out;
}

void check_triangular(const Tensor& A, const Tensor& B, bool left, const char* name) {
  TORCH_CHECK(A.dim() >= 2 && B.dim() >= 2, name, ": The input tensors must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), name, ": A must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  TORCH_CHECK(left ? A.size(-1) == B.size(-2) : A.size(-1) == B.size(-1), name,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B",
              " (", A.size(-2), "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "Expected out tensor to have dtype ",
              A.scalar_type(), ", but got ", B.scalar_type(), " instead");
}

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unit) {
  if (!native({&A, &B}) || !loops_fit(cube(A.size(-1), A.size(-1), 1)))
    return call_cpu_fallback<at::_ops::linalg_solve_triangular>(A, B, upper, left, unit);
  check_triangular(A, B, left, "linalg.solve_triangular");
  return column_major(triangular(A, B, upper, left, unit));
}

Tensor& solve_triangular_out(const Tensor& A, const Tensor& B, bool upper, bool left, bool unit,
                             Tensor& out) {
  if (!native({&A, &B, &out}) || !loops_fit(cube(A.size(-1), A.size(-1), 1)))
    return call_cpu_fallback<at::_ops::linalg_solve_triangular_out>(A, B, upper, left, unit, out);
  check_triangular(A, B, left, "linalg.solve_triangular");
  store_lapack(out, triangular(A, B, upper, left, unit));
  return out;
}

std::tuple<Tensor&, Tensor&> triangular_solve_out(const Tensor& B, const Tensor& A, bool upper,
                                                  bool transpose, bool unit, Tensor& X,
                                                  Tensor& M) {
  if (!native({&A, &B}) || !loops_fit(cube(A.size(-1), A.size(-1), 1)))
    return call_cpu_fallback<at::_ops::triangular_solve_X>(B, A, upper, transpose, unit, X, M);
  check_triangular(A, B, true, "torch.triangular_solve");
  Tensor a = transpose ? A.mT() : A;
  Tensor x = triangular(a, B, transpose ? !upper : upper, true, unit);
  store(X, x);
  auto batch = at::infer_size(batch_shape(A), batch_shape(B));
  store(M, A.expand(concat(batch, {A.size(-2), A.size(-1)})));
  return {X, M};
}


// ---- least squares -------------------------------------------------------------------

// What the CPU's LAPACK drivers return (gels: QR/LQ, no rank; gelsy: QR with column
// pivoting, rank from a condition estimate; gelsd/gelss: SVD, rank and singular values).
// Natively: full-rank problems by Householder QR (tall: R x = Q^T b; wide: the
// minimum-norm solution from the QR of A^T), and gelsd/gelss problems of clearly lower
// rank by the truncated SVD. Whenever the rank LAPACK would report is not certain from
// the singular values (near the rcond threshold; gelsy on ill-conditioned input), or gels
// meets an exactly singular R, the CPU computes the whole call.

struct Lstsq {
  Tensor solution, residuals, rank, singular_values;
};

// Upper bound of cond(R11) / cond(A) for the leading k x k block R11 (any k <= rank) of
// A P = Q R by QR with column pivoting, A m x n: 1 when m >= n (R11's columns are a
// subset of R's); for wide A from |r_kk| >= sigma_k / sqrt(n - k + 1) (the pivot is the
// largest remaining column) and the bound sqrt(4^k + 6k - 1) / 3 on the inverse of a unit
// triangular matrix with entries <= 1 (pivoted R's rows scaled by their diagonal).
double pivoted_block_growth(int64_t m, int64_t n) {
  if (m >= n) return 1.0;
  double k = static_cast<double>(m);
  return std::sqrt(std::pow(4.0, k) + 6.0 * k - 1.0) / 3.0 * std::sqrt(static_cast<double>(n));
}

struct QRSolution {
  Tensor x, residuals, r_diagonal;
};

// Full-rank least squares by QR for every matrix of A (batch, m, n), B (batch, m, k);
// residuals (batch, k) when m > n and `residuals`, else undefined; R's diagonal.
QRSolution qr_least_squares(const Tensor& A, const Tensor& B, bool residuals) {
  int64_t m = A.size(-2), n = A.size(-1);
  if (m >= n) {
    auto [a, tau] = geqrf_(A);
    Tensor c = apply_q(a, tau, B, /*left=*/true, /*transpose=*/true);  // Q^T B
    Tensor r = a.narrow(-2, 0, n);
    Tensor x = triangular(r, c.narrow(-2, 0, n), /*upper=*/true, /*left=*/true, /*unit=*/false);
    Tensor res;
    if (residuals && m > n) res = at::sum(at::mul(c.narrow(-2, n, m - n), c.narrow(-2, n, m - n)), -2);
    return {x, res, r.diagonal(0, -2, -1)};
  }
  // A^T = Q R  =>  A = R^T Q^T; the minimum-norm x = Q [R^-T B; 0].
  auto [a, tau] = geqrf_(A.mT());
  Tensor r = a.narrow(-2, 0, m);
  Tensor y = triangular(r.mT(), B, /*upper=*/false, /*left=*/true, /*unit=*/false);
  auto batch = batch_shape(B);
  Tensor padded = at::cat({y, at::zeros(concat(batch, {n - m, B.size(-1)}), B.options())}, -2);
  return {apply_q(a, tau, padded, /*left=*/true, /*transpose=*/false), Tensor(), r.diagonal(0, -2, -1)};
}

// Native least squares, or nullopt where the CPU must answer (see above).
std::optional<Lstsq> lstsq_native(const Tensor& A, const Tensor& B2, double rcond,
                                  const std::string& driver) {
  int64_t m = A.size(-2), n = A.size(-1), k = B2.size(-1), p = std::min(m, n);
  auto a_batch = batch_shape(A);
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(a_batch, batch_shape(B2));
  } catch (const c10::Error&) {
    return std::nullopt;  // the CPU raises its own error
  }
  bool empty_batch = product(batch) == 0 || product(a_batch) == 0;
  // LAPACK's quick returns on degenerate matrices differ per driver: leave them to the CPU.
  if (!empty_batch && (m == 0 || n == 0 || k == 0)) return std::nullopt;
  int64_t big = std::max(m, n);
  // Householder QR of the long side; the rank-revealing drivers also run a Jacobi SVD.
  if (!empty_batch && (!loops_fit(cube(big, big, p)) ||
                       (driver != "gels" && !loops_fit(20.0 * cube(big, p, p)))))
    return std::nullopt;
  bool svd_driver = driver == "gelsd" || driver == "gelss";
  if (svd_driver && !(rcond > 0 && rcond < 1)) return std::nullopt;  // LAPACK substitutes eps

  Lstsq r;
  auto opts = A.options();
  r.residuals = at::empty({0}, opts);
  r.rank = driver == "gels" ? at::empty({0}, opts.dtype(c10::kLong))
                            : at::full(a_batch, p, opts.dtype(c10::kLong));
  r.singular_values = svd_driver ? at::empty(concat(a_batch, {p}), opts) : at::empty({0}, opts);
  Tensor Ae = A.expand(concat(batch, {m, n})), Be = B2.expand(concat(batch, {m, k}));
  if (empty_batch) {
    r.solution = at::empty(concat(batch, {n, k}), opts);
    if (m > n && driver != "gelsy") r.residuals = at::empty(concat(batch, {k}), opts);
    return r;
  }

  bool full_rank = true;
  Tensor s;  // singular values, descending (A's batch)
  std::vector<int64_t> ranks;
  if (driver != "gels") {
    s = at::linalg_svdvals(A);
    Tensor sh = s.reshape({-1, p}).cpu();
    auto acc = sh.accessor<float, 2>();
    double eps = std::numeric_limits<float>::epsilon();
    for (int64_t b = 0; b < sh.size(0); ++b) {
      double s1 = acc[b][0], sp = acc[b][p - 1];
      if (!std::isfinite(s1)) return std::nullopt;
      if (driver == "gelsy") {
        // Full rank when even an upper bound of R11's condition number stays well below
        // 1/rcond: gelsy's estimate never exceeds the true condition number.
        if (!(sp > 0) || s1 / sp * pivoted_block_growth(m, n) * 10.0 >= 1.0 / rcond) return std::nullopt;
        continue;
      }
      double thr = rcond * s1, margin = 16.0 * eps * static_cast<double>(big) * s1;
      int64_t rk = 0;
      for (int64_t i = 0; i < p; ++i) {
        if (std::abs(acc[b][i] - thr) <= margin) return std::nullopt;  // rank uncertain
        if (acc[b][i] > thr) ++rk;
      }
      if (rk < p) full_rank = false;
      ranks.push_back(rk);
    }
    if (svd_driver) {
      r.singular_values = s;
      r.rank = at::tensor(ranks, at::TensorOptions().dtype(c10::kLong)).reshape(a_batch).to(A.device());
    }
  }

  bool want_residuals = m > n && driver != "gelsy" && full_rank;
  if (full_rank) {
    QRSolution q = qr_least_squares(Ae, Be, want_residuals);
    // gels: LAPACK reports an exactly singular R (or returns zeros for a zero matrix).
    if (driver == "gels" && at::eq(q.r_diagonal, 0).any().item<bool>()) return std::nullopt;
    r.solution = q.x;
    if (want_residuals) r.residuals = q.residuals;
  } else {
    // Truncated SVD: x = V_r S_r^-1 U_r^T B with the singular values above the threshold.
    auto [U, S, Vh] = at::_linalg_svd(A, /*full_matrices=*/false, /*compute_uv=*/true);
    Tensor keep = at::gt(S, at::mul(S.narrow(-1, 0, 1), rcond));
    Tensor inv = at::where(keep, at::reciprocal(S), at::zeros_like(S));
    Tensor ub = at::matmul(U.mT(), Be);  // (batch, p, k)
    r.solution = at::matmul(Vh.mT(), at::mul(ub, inv.unsqueeze(-1)));
  }
  return r;
}

std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> lstsq_out(const Tensor& A, const Tensor& B,
                                                         std::optional<double> rcond,
                                                         std::optional<c10::string_view> driver,
                                                         Tensor& solution, Tensor& residuals,
                                                         Tensor& rank, Tensor& singular_values) {
  auto fallback = [&]() -> std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> {
    return call_cpu_fallback<at::_ops::linalg_lstsq_out>(A, B, rcond, driver, solution, residuals,
                                                        rank, singular_values);
  };
  if (!native({&A, &B}) || A.dim() < 2 || B.dim() < 1) return fallback();
  int64_t dim_diff = A.dim() - B.dim();
  bool vector_case = at::native::linalg_solve_is_vector_rhs(A, B);
  // Only the matrix and vector right-hand sides (other shapes: the CPU's own errors).
  if (!(dim_diff == 0 || (dim_diff == 1 && vector_case))) return fallback();
  Tensor B2 = vector_case ? B.unsqueeze(-1) : B;
  TORCH_CHECK(A.size(-2) == B2.size(-2),
              vector_case ? "torch.linalg.lstsq: input.size(-2) should match other.size(-1)"
                          : "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  std::string name = driver.has_value() ? std::string(*driver) : std::string("gelsy");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  TORCH_CHECK(name == "gels" || name == "gelsy" || name == "gelsd" || name == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  for (const Tensor* o : {&solution, &residuals, &singular_values})
    if (o->scalar_type() != c10::kFloat || o->device() != A.device()) return fallback();
  if (rank.scalar_type() != c10::kLong || rank.device() != A.device()) return fallback();
  double rc = rcond.has_value()
                  ? *rcond
                  : std::numeric_limits<float>::epsilon() *
                        static_cast<double>(std::max(A.size(-2), A.size(-1)));
  std::optional<Lstsq> r = lstsq_native(A, B2, rc, name);
  if (!r) return fallback();
  store(solution, vector_case ? r->solution.squeeze(-1) : r->solution);
  store(residuals, r->residuals);
  store(rank, r->rank);
  store(singular_values, r->singular_values);
  return {solution, residuals, rank, singular_values};
}


// ---- pseudo-inverse ------------------------------------------------------------------

// atol and rtol of pinv / matrix_rank in float32, with ATen's defaults: rtol = eps *
// max(m, n) unless only a positive atol is given.
std::pair<Tensor, Tensor> float_tolerances(const Tensor& A, const std::optional<Tensor>& atol_opt,
                                           const std::optional<Tensor>& rtol_opt) {
  auto f32 = A.options();
  int64_t m = A.size(-2), n = A.size(-1);
  Tensor atol = atol_opt.has_value() ? atol_opt->to(c10::kFloat) : at::zeros({}, f32);
  Tensor rtol;
  if (rtol_opt.has_value()) {
    rtol = rtol_opt->to(c10::kFloat);
  } else {
    double eps = std::numeric_limits<float>::epsilon();
    Tensor dflt = at::full({}, eps * static_cast<double>(std::max(m, n)), f32);
    rtol = atol_opt.has_value() ? at::where(at::gt(atol, 0), at::zeros({}, f32), dflt) : dflt;
  }
  return {atol, rtol};
}

// True when pinv / matrix_rank can run natively on A with these tolerances.
bool spectral_native(const Tensor& A, const std::optional<Tensor>& atol_opt,
                     const std::optional<Tensor>& rtol_opt) {
  for (const auto* o : {&atol_opt, &rtol_opt})
    if (o->has_value() && (o->value().is_complex() || o->value().device() != A.device()))
      return false;
  int64_t m = A.size(-2), n = A.size(-1);
  return native({&A}) &&
         (A.numel() == 0 || loops_fit(20.0 * cube(std::max(m, n), std::min(m, n), std::min(m, n))));
}

// pinv from the native SVD (or eigh when hermitian): V diag(1/s) U^T over the singular
// values above max(atol, rtol * s_max). The tolerances arrive as float64 tensors (ATen's
// float overloads make them); they are compared in float32 here.
Tensor pinv(const Tensor& A, const std::optional<Tensor>& atol_opt,
            const std::optional<Tensor>& rtol_opt, bool hermitian) {
  auto t = A.scalar_type();
  TORCH_CHECK((t == c10::kDouble || t == c10::kFloat || t == c10::kComplexFloat ||
               t == c10::kComplexDouble) && A.dim() >= 2,
              "linalg.pinv(", t, "{", A.sizes(), "}): expected a tensor with 2 or more dimensions "
              "of float, double, cfloat or cdouble types");
  if (!spectral_native(A, atol_opt, rtol_opt))
    return call_cpu_fallback<at::_ops::linalg_pinv_atol_rtol_tensor>(A, atol_opt, rtol_opt, hermitian);
  if (A.numel() == 0) {
    std::vector<int64_t> shape(A.sizes().begin(), A.sizes().end());
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    return at::zeros(shape, A.options());
  }
  auto [atol, rtol] = float_tolerances(A, atol_opt, rtol_opt);
  auto f32 = A.options();
  if (!hermitian) {
    auto [U, S, Vh] = at::_linalg_svd(A, /*full_matrices=*/false, /*compute_uv=*/true);
    Tensor tol = at::maximum(atol.unsqueeze(-1), at::mul(rtol.unsqueeze(-1), S.narrow(-1, 0, 1)));
    Tensor inv = at::where(at::gt(S, tol), at::reciprocal(S), at::zeros({}, f32));
    return at::matmul(at::mul(Vh.mT(), inv.unsqueeze(-2)), U.mT());
  }
  auto [w, V] = at::_linalg_eigh(A, "L", /*compute_v=*/true);
  Tensor w_abs = at::abs(w);
  Tensor tol = at::maximum(atol.unsqueeze(-1), at::mul(rtol.unsqueeze(-1), at::amax(w_abs, -1, true)));
  Tensor inv = at::where(at::gt(w_abs, tol), at::reciprocal(w), at::zeros({}, f32));
  return at::matmul(at::mul(V, inv.unsqueeze(-2)), V.mT());
}


// The number of singular values (|eigenvalues| when hermitian) above
// max(atol, rtol * largest), as int64 per matrix.
Tensor matrix_rank(const Tensor& A, const std::optional<Tensor>& atol_opt,
                   const std::optional<Tensor>& rtol_opt, bool hermitian) {
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.matrix_rank: The input tensor input must have at least 2 "
              "dimensions.");
  TORCH_CHECK(at::isFloatingType(A.scalar_type()) || at::isComplexType(A.scalar_type()),
              "torch.linalg.matrix_rank: Expected a floating point or complex tensor as input. "
              "Got ", A.scalar_type());
  if (!spectral_native(A, atol_opt, rtol_opt))
    return call_cpu_fallback<at::_ops::linalg_matrix_rank_atol_rtol_tensor>(A, atol_opt, rtol_opt,
                                                                              hermitian);
  if (A.size(-1) == 0 || A.size(-2) == 0)
    return at::zeros(batch_shape(A), A.options().dtype(c10::kLong));
  auto [atol, rtol] = float_tolerances(A, atol_opt, rtol_opt);
  Tensor S = hermitian ? at::abs(std::get<0>(at::_linalg_eigh(A, "L", /*compute_v=*/false)))
                       : std::get<1>(at::_linalg_svd(A, false, /*compute_uv=*/false));
  Tensor tol = at::maximum(atol.unsqueeze(-1), at::mul(rtol.unsqueeze(-1), at::amax(S, -1, true)));
  return at::sum(at::gt(S, tol), -1, false, c10::kLong);
}

Tensor matrix_rank_float(const Tensor& A, std::optional<double> atol, std::optional<double> rtol,
                         bool hermitian) {
  auto as_tensor = [&](std::optional<double> v) -> std::optional<Tensor> {
    if (!v.has_value()) return std::nullopt;
    return at::full({}, *v, A.options().dtype(c10::kDouble));
  };
  return matrix_rank(A, as_tensor(atol), as_tensor(rtol), hermitian);
}


// ---- symmetric indefinite (Bunch-Kaufman LDL^T) --------------------------------------

std::tuple<Tensor&, Tensor&, Tensor&> ldl_factor_ex_out(const Tensor& A, bool hermitian,
                                                        bool check_errors, Tensor& LD,
                                                        Tensor& pivots, Tensor& info) {
  if (!native({&A}) || (A.dim() >= 2 && !loops_fit(cube(A.size(-1), A.size(-1), A.size(-1)))))
    return call_cpu_fallback<at::_ops::linalg_ldl_factor_ex_out>(A, hermitian, check_errors, LD,
                                                                pivots, info);
  OutMeta<at::meta::structured_linalg_ldl_factor_ex, 3>({&LD, &pivots, &info})
      .meta(A, hermitian, check_errors);
  if (A.numel() == 0) {
    info.zero_();
    return {LD, pivots, info};
  }
  // sytrf reads the lower triangle; for real matrices hermitian changes nothing.
  Tensor a = fresh(at::tril(A));
  auto batch = batch_shape(A);
  int64_t n = A.size(-1);
  Tensor piv = at::empty(concat(batch, {n}), A.options().dtype(c10::kInt));
  Tensor inf = at::empty(batch, A.options().dtype(c10::kInt));
  TWGPU_TRY
  RuntimeLock lock;
  ::twgpu::ldl_factor(lock.ctx(), matrices(a), matrices(piv), matrices(inf), u32(product(batch)), u32(n));
  TWGPU_CATCH
  LD.copy_(a);
  pivots.copy_(piv);
  info.copy_(inf);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", A.dim() == 2);
  return {LD, pivots, info};
}

// True when batch dims `from` broadcast to exactly `to`.
bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  try {
    return at::infer_size(from, to) == to;
  } catch (const c10::Error&) {
    return false;
  }
}

Tensor& ldl_solve_out(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian,
                      Tensor& out) {
  auto fallback = [&]() -> Tensor& {
    return call_cpu_fallback<at::_ops::linalg_ldl_solve_out>(LD, pivots, B, hermitian, out);
  };
  if (!native({&LD, &B}) || !pivots.defined() || pivots.device() != LD.device() ||
      (LD.dim() >= 2 && !loops_fit(cube(LD.size(-1), LD.size(-1), 1))))
    return fallback();
  OutMeta<at::meta::structured_linalg_ldl_solve>(out).meta(LD, pivots, B, hermitian);
  if (LD.numel() == 0 || pivots.numel() == 0 || out.numel() == 0) return out;
  int64_t n = LD.size(-1), k = B.size(-1);
  auto batch = batch_shape(out);
  // The CPU indexes LD by the result's batch; broadcasting LD agrees wherever that works.
  if (!broadcasts_to(batch_shape(LD), batch)) return fallback();
  Tensor x = fresh(B.expand(concat(batch, {n, k})));
  Tensor ld = fresh(LD.expand(concat(batch, {n, n})));
  Tensor p = fresh(pivots.expand(concat(batch, {n})), c10::kInt);
  TWGPU_TRY
  RuntimeLock lock;
  ::twgpu::ldl_solve(lock.ctx(), matrices(ld), matrices(p), matrices(x), u32(product(batch)), u32(n), u32(k));
  TWGPU_CATCH
  out.copy_(x);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lu_factor_ex.out", lu_factor_ex_out);
  m.impl("linalg_lu_solve.out", lu_solve_out);
  m.impl("_linalg_solve_ex.result", solve_ex_out);
  m.impl("linalg_inv_ex.inverse", inv_ex_out);
  m.impl("_linalg_det.result", det_out);
  m.impl("_linalg_slogdet.sign", slogdet_out);
  m.impl("linalg_cholesky_ex.L", cholesky_ex_out);
  m.impl("cholesky", cholesky_legacy);
  m.impl("_cholesky_solve_helper", cholesky_solve_helper);
  m.impl("cholesky_inverse", cholesky_inverse_fn);
  m.impl("cholesky_inverse.out", cholesky_inverse_out);
  m.impl("linalg_solve_triangular", solve_triangular);
  m.impl("linalg_solve_triangular.out", solve_triangular_out);
  m.impl("triangular_solve.X", triangular_solve_out);
  m.impl("lu_unpack.out", lu_unpack_out);
  m.impl("geqrf", geqrf_fn);
  m.impl("geqrf.a", geqrf_out);
  m.impl("linalg_householder_product", householder_product);
  m.impl("linalg_householder_product.out", householder_product_out);
  m.impl("ormqr", ormqr_fn);
  m.impl("ormqr.out", ormqr_out);
  m.impl("linalg_qr.out", qr_out);
  m.impl("_linalg_svd.U", svd_out);
  m.impl("_linalg_eigh.eigenvalues", eigh_out);
  m.impl("linalg_lu.out", linalg_lu_out);
  m.impl("linalg_cross.out", cross_out);
  m.impl("linalg_lstsq.out", lstsq_out);
  m.impl("linalg_pinv.atol_rtol_tensor", pinv);
  m.impl("linalg_ldl_factor_ex.out", ldl_factor_ex_out);
  m.impl("linalg_ldl_solve.out", ldl_solve_out);
}

// matrix_rank is CompositeImplicitAutograd with an integer result (nothing to differentiate):
// ours sits at the autograd key, so eager runs it, while torch.compile's functionalization,
// which decomposes such ops unless the backend key has a kernel, still decomposes it (a
// backend kernel would reach FakeTensor, whose decomposition is not functionalized).
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("linalg_matrix_rank.atol_rtol_tensor", matrix_rank);
  m.impl("linalg_matrix_rank.atol_rtol_float", matrix_rank_float);
}

}  // namespace twgpu::aten
