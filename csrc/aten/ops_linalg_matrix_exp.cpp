// Native matrix exponential (float32, batched) composed from native matrix products and
// pointwise ops. Same method as the CPU so both agree to rounding: the 1-norm of every
// matrix picks a Taylor-type polynomial of degree 1, 2, 4, 8, 12 or 18 in the optimized
// product forms of Bader, Blanes & Casas (Mathematics 7, 1174, 2019); above the degree-18
// bound the matrix is scaled by 2^-s and the result squared s times. Matrices of a batch
// are grouped by (degree, s); every group is one batched evaluation. Other dtypes go to
// the CPU.
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/linalg_matrix_exp_ops.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <map>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// Upper 1-norm bounds (float32 unit roundoff) of the polynomials of degree 1, 2, 4, 8,
// 12 and 18; above the last one the matrix is scaled.
constexpr std::array<float, 6> kNormBound = {1.192092800768788e-07f, 5.978858893805233e-04f,
                                             5.116619363445086e-02f, 5.800524627688768e-01f,
                                             1.461661507209034e+00f, 3.010066362817634e+00f};

Tensor identity(const Tensor& a) {
  Tensor e = at::zeros(a.sizes(), a.options());
  e.diagonal(0, -2, -1).fill_(1);
  return e;
}

// sum_j c[j] * p[j], with the coefficients rounded to float32 as the CPU does.
template <size_t N>
Tensor combine(const std::array<Tensor, N>& p, const std::array<double, N>& c) {
  Tensor r = at::mul(p[0], static_cast<double>(static_cast<float>(c[0])));
  for (size_t j = 1; j < N; ++j) {
    float cj = static_cast<float>(c[j]);
    if (cj != 0.0f) r.add_(p[j], cj);
  }
  return r;
}

// The polynomial of degree `degree` evaluated at a (batch, n, n).
Tensor taylor(const Tensor& a, int degree) {
  Tensor I = identity(a);
  if (degree == 1) return at::add(I, a);
  Tensor a2 = at::matmul(a, a);
  if (degree == 2) return at::add(at::add(I, a), a2, 0.5);
  if (degree == 4) {
    // I + A + A^2 (I/2 + A/6 + A^2/24)
    Tensor inner = combine<3>({I, a, a2}, {1 / 2.0, 1 / 6.0, 1 / 24.0});
    return at::add(at::add(I, a), at::matmul(a2, inner));
  }
  if (degree == 8) {
    const double r = 0.1330413469565007072504e+2;  // sqrt(177)
    const double x3 = 2. / 3.;
    const double x1 = x3 * ((1. + r) / 88.), x2 = x3 * ((1. + r) / 352.);
    const double x4 = (-271. + 29. * r) / (315. * x3), x5 = (-11. + 11. * r) / (1260. * x3);
    const double x6 = (-99. + 11. * r) / (5040. * x3), x7 = (89. - r) / (5040. * x3);
    const double y2 = (857. - 58. * r) / 630.;
    Tensor a4 = at::matmul(a2, combine<2>({a, a2}, {x1, x2}));
    Tensor a8 = at::matmul(combine<2>({a2, a4}, {x3, 1.0}), combine<4>({I, a, a2, a4}, {x4, x5, x6, x7}));
    return combine<5>({I, a, a2, a4, a8}, {1.0, 1.0, y2, 0.0, 1.0});
  }
  Tensor a3 = at::matmul(a, a2);
  if (degree == 12) {
    static constexpr double b[4][4] = {
        {9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740},
        {5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989},
        {0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230},
        {-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359}};
    std::array<Tensor, 4> p = {I, a, a2, a3};
    auto B = [&](int i) { return combine<4>(p, {b[i][0], b[i][1], b[i][2], b[i][3]}); };
    Tensor b3 = B(3);
    Tensor a6 = at::add(B(2), at::matmul(b3, b3));
    return at::add(B(0), at::matmul(at::add(B(1), a6), a6));
  }
  // degree 18
  static constexpr double b[5][5] = {
      {0., -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.},
      {0., 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
       -6.37898194594723280150e-04},
      {-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
       -6.98210122488052056106e-03, 3.34975017086070470649e-05},
      {-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
       2.95552570429315521194e-02, -1.39180257516060693404e-05},
      {0., 0., -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05}};
  std::array<Tensor, 5> p = {I, a, a2, a3, at::matmul(a3, a3)};
  auto B = [&](int i) { return combine<5>(p, {b[i][0], b[i][1], b[i][2], b[i][3], b[i][4]}); };
  Tensor a9 = at::add(B(3), at::matmul(B(0), B(4)));
  return at::add(B(1), at::matmul(at::add(B(2), a9), a9));
}

// exp of every matrix of a (batch, n, n), n >= 2.
Tensor batched_exp(const Tensor& a) {
  int64_t batch = a.size(0);
  // 1-norms decide the method on the host (one small read-back, as the CPU does).
  Tensor norms = at::amax(at::sum(at::abs(a), -2), -1).cpu();
  const float* nv = norms.const_data_ptr<float>();
  // (degree index, squarings) -> matrices
  std::map<std::pair<int, int64_t>, std::vector<int64_t>> groups;
  for (int64_t i = 0; i < batch; ++i) {
    float norm = nv[i];
    int d = 0;
    while (d < 5 && !(norm <= kNormBound[d])) ++d;
    int64_t s = 0;
    if (d == 5) {
      float e = std::ceil(std::log2(norm / kNormBound[5]));
      s = (std::isfinite(e) && e > 0) ? static_cast<int64_t>(e) : 0;
    }
    groups[{d, s}].push_back(i);
  }
  static constexpr int kDegree[6] = {1, 2, 4, 8, 12, 18};
  Tensor result = groups.size() == 1 ? Tensor() : at::empty(a.sizes(), a.options());
  for (auto& [key, members] : groups) {
    auto [d, s] = key;
    Tensor idx;
    Tensor sub = a;
    if (groups.size() > 1) {
      idx = at::tensor(members, at::TensorOptions().dtype(c10::kLong)).to(a.device());
      sub = at::index_select(a, 0, idx);
    }
    if (s > 0) sub = at::mul(sub, std::ldexp(1.0, static_cast<int>(-s)));  // exact
    Tensor e = taylor(sub, kDegree[d]);
    for (int64_t p = 0; p < s; ++p) e = at::matmul(e, e);
    if (groups.size() == 1) return e;
    result.index_copy_(0, idx, e);
  }
  return result;
}

Tensor matrix_exp(const Tensor& A) {
  at::native::squareCheckInputs(A, "linalg.matrix_exp");
  at::native::checkFloatingOrComplex(A, "linalg.matrix_exp");
  if (A.scalar_type() != c10::kFloat || A.device().type() != kDeviceType)
    return call_cpu_fallback<at::_ops::linalg_matrix_exp>(A);
  int64_t n = A.size(-1);
  if (n == 0 || A.numel() == 0) return A.clone();
  if (n == 1) return at::exp(A);
  Tensor a = A.reshape({-1, n, n}).contiguous();
  return batched_exp(a).view(A.sizes());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("linalg_matrix_exp", matrix_exp); }

}  // namespace twgpu::aten
