#include "kernels/linalg.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// Uniforms: up to 4 matrix sizes (`u_dims(j)`), then one element offset per buffer
// (`u_offsets(b)`).
constexpr uint32_t kMaxBuffers = 5;
struct Uniforms {
  std::vector<uint32_t> dims, offsets;
};
Uniforms uniforms(std::initializer_list<uint32_t> dims, std::initializer_list<uint64_t> offsets) {
  Uniforms u{dims, {}};
  for (uint64_t o : offsets) u.offsets.push_back(static_cast<uint32_t>(o));
  return u;
}

// f32 accessors `A(i)` / `setA(i, v)` over buf<b> from its element offset.
// (A setter only for writable buffers: WGSL rejects stores to read-only storage.)
std::string access(const char* type, const char* name, int b, bool writable) {
  std::string buf = "buf" + std::to_string(b), off = "u_offsets(" + std::to_string(b) + "u)";
  std::string s = std::string("fn ") + name + "(i: u32) -> " + type + " { return bitcast<" + type +
                  ">(" + buf + "[" + off + " + i]); }\n";
  if (writable)
    s += std::string("fn set") + name + "(i: u32, v: " + type + ") { " + buf + "[" + off +
         " + i] = bitcast<u32>(v); }\n";
  return s;
}
std::string f32_access(const char* name, int b, bool writable = true) {
  return access("f32", name, b, writable);
}
std::string i32_access(const char* name, int b, bool writable = true) {
  return access("i32", name, b, writable);
}

const UniformLayout& linalg_layout() {
  static const UniformLayout layout(
      {{"dims", UniformType::U32, 4}, {"offsets", UniformType::U32, kMaxBuffers}});
  return layout;
}

void launch(Context& ctx, const std::string& key, std::vector<KernelBuffer> buffers,
            const Uniforms& u, uint64_t count, const std::string& body) {
  KernelLaunch l;
  l.key = "linalg:" + key;
  l.buffers = std::move(buffers);
  l.declare(linalg_layout()).set_u32s("dims", u.dims).set_u32s("offsets", u.offsets);
  l.count = count;
  l.workgroup = 64;
  l.body = [&] { return body; };
  launch_kernel(ctx, l);
}

// The shape of a batched launch: `matrices` of `invocations` invocations each (idx /
// invocations is the matrix), buffer b holding per_matrix[b] elements (4 bytes each) of
// every matrix. Kernels address buffers from matrix 0 on, so a launch whose buffers are
// larger than one binding runs over pieces of whole matrices, each bound through windows.
struct Batch {
  uint64_t matrices = 0, invocations = 1;
  std::vector<uint64_t> per_matrix;
};

void run(Context& ctx, const std::string& key, std::vector<KernelBuffer> buffers,
         const Uniforms& u, const Batch& batch, const std::string& body) {
  bool oversized = false;
  uint64_t widest = 1;
  for (size_t b = 0; b < buffers.size(); ++b) {
    oversized = oversized || needs_window(ctx, buffers[b].buffer);
    widest = std::max<uint64_t>(widest, batch.per_matrix.at(b) * 4);
  }
  if (!oversized) return launch(ctx, key, std::move(buffers), u, batch.matrices * batch.invocations, body);
  const uint64_t step = rows_per_window(ctx, batch.matrices, widest, "linalg:" + key);
  const uint32_t first_offset = linalg_layout().fields()[linalg_layout().find("offsets")].word;
  for (uint64_t lo = 0; lo < batch.matrices; lo += step) {
    const uint64_t n = std::min(step, batch.matrices - lo);
    Uniforms piece = u;
    std::vector<KernelBuffer> bufs = buffers;
    for (size_t b = 0; b < bufs.size(); ++b) {
      const uint64_t first = u.offsets[b] + lo * batch.per_matrix[b];
      piece.offsets[b] = static_cast<uint32_t>(first);
      bufs[b].touches(first_offset + static_cast<uint32_t>(b), DType::Float32, first,
                      std::max<uint64_t>(n * batch.per_matrix[b], 1));
    }
    launch(ctx, key, std::move(bufs), piece, n * batch.invocations, body);
  }
}

// Jacobi sweeps a kernel may run: 40, or fewer where the adapter ends an invocation's loops
// after a fixed number of iterations in all (llvmpipe), so that a matrix that has not
// converged stops early (less accurate) instead of having its loops cut off (garbage).
uint32_t max_sweeps(Context& ctx, uint64_t per_sweep, uint64_t rest) {
  const uint64_t limit = ctx.caps().max_loop_iterations;
  if (limit == 0) return 40;
  const uint64_t budget = limit * 9 / 10;
  if (budget <= rest + per_sweep) return 1;
  return static_cast<uint32_t>(std::min<uint64_t>(40, (budget - rest) / std::max<uint64_t>(per_sweep, 1)));
}

KernelBuffer rw(WGPUBuffer b) { return {b, Access::ReadWrite, false}; }
KernelBuffer ro(WGPUBuffer b) { return {b, Access::Read, false}; }

}  // namespace

void lu_factor(Context& ctx, MatrixBatch a, MatrixBatch pivots, MatrixBatch info, uint32_t batch,
               uint32_t m, uint32_t n) {
  std::string body = f32_access("A", 0) + i32_access("P", 1) + i32_access("I", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let m = u_dims(0u); let n = u_dims(1u); let kmax = min(m, n);
  let base = idx * m * n;
  var info = 0;
  for (var k = 0u; k < kmax; k = k + 1u) {
    // The first row with the largest |a[i][k]| (LAPACK's i?amax).
    var p = k;
    var best = abs(A(base + k * n + k));
    for (var i = k + 1u; i < m; i = i + 1u) {
      let v = abs(A(base + i * n + k));
      if (v > best) { best = v; p = i; }
    }
    setP(idx * kmax + k, i32(p + 1u));
    if (p != k) {
      for (var j = 0u; j < n; j = j + 1u) {
        let t = A(base + k * n + j);
        setA(base + k * n + j, A(base + p * n + j));
        setA(base + p * n + j, t);
      }
    }
    let d = A(base + k * n + k);
    if (d != 0.0) {
      for (var i = k + 1u; i < m; i = i + 1u) { setA(base + i * n + k, div_f32(A(base + i * n + k), d)); }
    } else if (info == 0) {
      info = i32(k + 1u);
    }
    for (var i = k + 1u; i < m; i = i + 1u) {
      let l = A(base + i * n + k);
      for (var j = k + 1u; j < n; j = j + 1u) {
        setA(base + i * n + j, A(base + i * n + j) - l * A(base + k * n + j));
      }
    }
  }
  setI(idx, info);
}
)";
  run(ctx, "lu_factor", {rw(a.buffer), rw(pivots.buffer), rw(info.buffer)},
      uniforms({m, n}, {a.offset, pivots.offset, info.offset}),
      {batch, 1, {uint64_t(m) * n, std::min(m, n), 1}}, body);
}

void lu_solve(Context& ctx, MatrixBatch lu, MatrixBatch pivots, MatrixBatch b, uint32_t batch,
              uint32_t n, uint32_t k, bool transpose) {
  // One invocation per (matrix, right-hand column); x[i] is B's element (i, c).
  std::string body = f32_access("LU", 0, false) + i32_access("P", 1, false) + f32_access("B", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u); let k = u_dims(1u);
  let mat = idx / k; let c = idx % k;
  let a0 = mat * n * n; let b0 = mat * n * k + c; let p0 = mat * n;
)";
  if (!transpose) {
    body += R"(
  // P^T b: the row interchanges in order, then L y = b (unit), then U x = y.
  for (var i = 0u; i < n; i = i + 1u) {
    let p = u32(P(p0 + i) - 1);
    if (p != i) { let t = B(b0 + i * k); setB(b0 + i * k, B(b0 + p * k)); setB(b0 + p * k, t); }
  }
  for (var i = 1u; i < n; i = i + 1u) {
    var s = B(b0 + i * k);
    for (var j = 0u; j < i; j = j + 1u) { s = s - LU(a0 + i * n + j) * B(b0 + j * k); }
    setB(b0 + i * k, s);
  }
  for (var ii = 0u; ii < n; ii = ii + 1u) {
    let i = n - 1u - ii;
    var s = B(b0 + i * k);
    for (var j = i + 1u; j < n; j = j + 1u) { s = s - LU(a0 + i * n + j) * B(b0 + j * k); }
    setB(b0 + i * k, div_f32(s, LU(a0 + i * n + i)));
  }
}
)";
  } else {
    body += R"(
  // A^T = U^T L^T P^T: U^T y = b, then L^T z = y (unit), then the interchanges in reverse.
  for (var i = 0u; i < n; i = i + 1u) {
    var s = B(b0 + i * k);
    for (var j = 0u; j < i; j = j + 1u) { s = s - LU(a0 + j * n + i) * B(b0 + j * k); }
    setB(b0 + i * k, div_f32(s, LU(a0 + i * n + i)));
  }
  for (var ii = 0u; ii < n; ii = ii + 1u) {
    let i = n - 1u - ii;
    var s = B(b0 + i * k);
    for (var j = i + 1u; j < n; j = j + 1u) { s = s - LU(a0 + j * n + i) * B(b0 + j * k); }
    setB(b0 + i * k, s);
  }
  for (var ii = 0u; ii < n; ii = ii + 1u) {
    let i = n - 1u - ii;
    let p = u32(P(p0 + i) - 1);
    if (p != i) { let t = B(b0 + i * k); setB(b0 + i * k, B(b0 + p * k)); setB(b0 + p * k, t); }
  }
}
)";
  }
  run(ctx, transpose ? "lu_solve_t" : "lu_solve", {ro(lu.buffer), ro(pivots.buffer), rw(b.buffer)},
      uniforms({n, k}, {lu.offset, pivots.offset, b.offset}),
      {batch, k, {uint64_t(n) * n, n, uint64_t(n) * k}}, body);
}

void cholesky(Context& ctx, MatrixBatch a, MatrixBatch info, uint32_t batch, uint32_t n) {
  std::string body = f32_access("A", 0) + i32_access("I", 1) + kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u);
  let base = idx * n * n;
  var info = 0;
  for (var j = 0u; j < n; j = j + 1u) {
    var d = A(base + j * n + j);
    for (var c = 0u; c < j; c = c + 1u) { let l = A(base + j * n + c); d = d - l * l; }
    // potrf stops at the first leading minor that is not positive (or is NaN).
    if (!(d > 0.0) || is_nan(d)) { info = i32(j + 1u); setA(base + j * n + j, d); break; }
    let r = sqrt(d);
    setA(base + j * n + j, r);
    for (var i = j + 1u; i < n; i = i + 1u) {
      var s = A(base + i * n + j);
      for (var c = 0u; c < j; c = c + 1u) { s = s - A(base + i * n + c) * A(base + j * n + c); }
      setA(base + i * n + j, div_f32(s, r));
    }
  }
  for (var i = 0u; i < n; i = i + 1u) {
    for (var j = i + 1u; j < n; j = j + 1u) { setA(base + i * n + j, 0.0); }
  }
  setI(idx, info);
}
)";
  run(ctx, "cholesky", {rw(a.buffer), rw(info.buffer)}, uniforms({n}, {a.offset, info.offset}),
      {batch, 1, {uint64_t(n) * n, 1}}, body);
}

void triangular_solve(Context& ctx, MatrixBatch a, MatrixBatch b, uint32_t batch, uint32_t n,
                      uint32_t k, bool upper, bool unit_diagonal) {
  std::string diag = unit_diagonal ? "s" : "div_f32(s, A(a0 + i * n + i))";
  std::string body = f32_access("A", 0, false) + f32_access("B", 1) + kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u); let k = u_dims(1u);
  let mat = idx / k; let c = idx % k;
  let a0 = mat * n * n; let b0 = mat * n * k + c;
  for (var ii = 0u; ii < n; ii = ii + 1u) {
)";
  if (upper) {
    body += "    let i = n - 1u - ii;\n    var s = B(b0 + i * k);\n"
            "    for (var j = i + 1u; j < n; j = j + 1u) { s = s - A(a0 + i * n + j) * B(b0 + j * k); }\n";
  } else {
    body += "    let i = ii;\n    var s = B(b0 + i * k);\n"
            "    for (var j = 0u; j < i; j = j + 1u) { s = s - A(a0 + i * n + j) * B(b0 + j * k); }\n";
  }
  body += "    setB(b0 + i * k, " + diag + ");\n  }\n}\n";
  run(ctx, std::string("trsm:") + (upper ? "u" : "l") + (unit_diagonal ? "1" : "n"),
      {ro(a.buffer), rw(b.buffer)}, uniforms({n, k}, {a.offset, b.offset}),
      {batch, k, {uint64_t(n) * n, uint64_t(n) * k}}, body);
}

void lu_determinant(Context& ctx, MatrixBatch lu, MatrixBatch pivots, MatrixBatch det,
                    MatrixBatch sign, MatrixBatch logabsdet, uint32_t batch, uint32_t n) {
  std::string body = f32_access("LU", 0, false) + i32_access("P", 1, false) + f32_access("D", 2) +
                     f32_access("S", 3) + f32_access("L", 4) + kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u);
  var d = 1.0;
  var s = 1.0;
  var l = 0.0;
  var singular = false;
  for (var i = 0u; i < n; i = i + 1u) {
    let u = LU(idx * n * n + i * n + i);
    d = d * u;
    if (u < 0.0) { s = -s; }
    if (u == 0.0) { singular = true; }
    l = l + log(abs(u));
    if (P(idx * n + i) != i32(i + 1u)) { d = -d; s = -s; }
  }
  if (singular) { s = 0.0; }
  if (is_nan(d)) { s = f32_nan(); }
  setD(idx, d);
  setS(idx, s);
  setL(idx, l);
}
)";
  run(ctx, "lu_det", {ro(lu.buffer), ro(pivots.buffer), rw(det.buffer), rw(sign.buffer),
                      rw(logabsdet.buffer)},
      uniforms({n}, {lu.offset, pivots.offset, det.offset, sign.offset, logabsdet.offset}),
      {batch, 1, {uint64_t(n) * n, n, 1, 1, 1}}, body);
}

void lu_permutation(Context& ctx, MatrixBatch pivots, MatrixBatch perm, MatrixBatch p,
                    uint32_t batch, uint32_t m, uint32_t k) {
  // The interchanges applied in order to (0 .. m-1) give perm: row i of P^T A is row
  // perm[i] of A, so P[perm[i]][i] = 1.
  std::string body = i32_access("V", 0, false) + i32_access("Q", 1) + f32_access("P", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let m = u_dims(0u); let k = u_dims(1u);
  for (var i = 0u; i < m; i = i + 1u) { setQ(idx * m + i, i32(i)); }
  for (var i = 0u; i < k; i = i + 1u) {
    let j = u32(V(idx * k + i) - 1);
    let t = Q(idx * m + i);
    setQ(idx * m + i, Q(idx * m + j));
    setQ(idx * m + j, t);
  }
  for (var i = 0u; i < m; i = i + 1u) { setP(idx * m * m + u32(Q(idx * m + i)) * m + i, 1.0); }
}
)";
  run(ctx, "lu_perm", {ro(pivots.buffer), rw(perm.buffer), rw(p.buffer)},
      uniforms({m, k}, {pivots.offset, perm.offset, p.offset}), {batch, 1, {k, m, uint64_t(m) * m}}, body);
}

void householder_qr(Context& ctx, MatrixBatch a, MatrixBatch tau, uint32_t batch, uint32_t m,
                    uint32_t n) {
  std::string body = f32_access("A", 0) + f32_access("T", 1) + kernel_main(Grid::Invocations, 64) + R"(
  let m = u_dims(0u); let n = u_dims(1u); let k = min(m, n);
  let b = idx * m * n;
  for (var j = 0u; j < k; j = j + 1u) {
    let alpha = A(b + j * n + j);
    var ss = 0.0;
    for (var i = j + 1u; i < m; i = i + 1u) { let x = A(b + i * n + j); ss = ss + x * x; }
    if (ss == 0.0) { setT(idx * k + j, 0.0); continue; }
    var beta = sqrt(alpha * alpha + ss);
    if (alpha >= 0.0) { beta = -beta; }
    setT(idx * k + j, div_f32(beta - alpha, beta));
    let scale = alpha - beta;
    for (var i = j + 1u; i < m; i = i + 1u) { setA(b + i * n + j, div_f32(A(b + i * n + j), scale)); }
    setA(b + j * n + j, beta);
    let t = div_f32(beta - alpha, beta);
    for (var c = j + 1u; c < n; c = c + 1u) {
      var w = A(b + j * n + c);
      for (var i = j + 1u; i < m; i = i + 1u) { w = w + A(b + i * n + j) * A(b + i * n + c); }
      w = t * w;
      setA(b + j * n + c, A(b + j * n + c) - w);
      for (var i = j + 1u; i < m; i = i + 1u) { setA(b + i * n + c, A(b + i * n + c) - w * A(b + i * n + j)); }
    }
  }
}
)";
  run(ctx, "geqrf", {rw(a.buffer), rw(tau.buffer)}, uniforms({m, n}, {a.offset, tau.offset}),
      {batch, 1, {uint64_t(m) * n, std::min(m, n)}}, body);
}

void householder_apply(Context& ctx, MatrixBatch v, MatrixBatch tau, MatrixBatch c,
                       uint32_t batch, uint32_t m, uint32_t kv, uint32_t k, uint32_t nc,
                       bool left, bool transpose) {
  // One invocation per (matrix, column of c) when left (per row when right): each applies
  // H = I - tau v v^T in turn. Q = H1 ... Hk: Q c applies Hk first, Q^T c applies H1 first;
  // c Q applies H1 first, c Q^T applies Hk first.
  bool forward = left ? transpose : !transpose;
  std::string at = left ? "C(cb + i * nc + col)" : "C(cb + col * m + i)";
  std::string set = left ? "setC(cb + i * nc + col, " : "setC(cb + col * m + i, ";
  std::string body = f32_access("V", 0, false) + f32_access("T", 1, false) + f32_access("C", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let m = u_dims(0u); let kv = u_dims(1u); let k = u_dims(2u); let nc = u_dims(3u);
  let mat = idx / nc; let col = idx % nc;
  let vb = mat * m * kv; let cb = mat * m * nc;
  for (var s = 0u; s < k; s = s + 1u) {
    let j = )" + std::string(forward ? "s" : "k - 1u - s") + R"(;
    let t = T(mat * k + j);
    if (t == 0.0) { continue; }
    var i = j;
    var w = )" + at + R"(;
    for (i = j + 1u; i < m; i = i + 1u) { w = w + V(vb + i * kv + j) * )" + at + R"(; }
    w = t * w;
    i = j;
    )" + set + at + R"( - w);
    for (i = j + 1u; i < m; i = i + 1u) { )" + set + at + R"( - w * V(vb + i * kv + j)); }
  }
}
)";
  run(ctx, std::string("ormqr:") + (left ? "l" : "r") + (forward ? "f" : "b"),
      {ro(v.buffer), ro(tau.buffer), rw(c.buffer)},
      uniforms({m, kv, k, nc}, {v.offset, tau.offset, c.offset}),
      {batch, nc, {uint64_t(m) * kv, k, uint64_t(m) * nc}}, body);
}

void jacobi_svd(Context& ctx, MatrixBatch a, MatrixBatch v, MatrixBatch s, uint32_t batch,
                uint32_t m, uint32_t n) {
  std::string body = f32_access("A", 0) + f32_access("V", 1) + f32_access("S", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let m = u_dims(0u); let n = u_dims(1u);
  let ab = idx * m * n; let vb = idx * n * n; let sb = idx * n;
  for (var i = 0u; i < n; i = i + 1u) {
    for (var j = 0u; j < n; j = j + 1u) { setV(vb + i * n + j, select(0.0, 1.0, i == j)); }
  }
  // Sweeps until every pair of columns is orthogonal to working precision.
  for (var sweep = 0u; sweep < u_dims(2u); sweep = sweep + 1u) {
    var rotated = false;
    for (var p = 0u; p + 1u < n; p = p + 1u) {
      for (var q = p + 1u; q < n; q = q + 1u) {
        var alpha = 0.0; var beta = 0.0; var gamma = 0.0;
        for (var i = 0u; i < m; i = i + 1u) {
          let x = A(ab + i * n + p); let y = A(ab + i * n + q);
          alpha = alpha + x * x; beta = beta + y * y; gamma = gamma + x * y;
        }
        if (gamma == 0.0 || abs(gamma) <= 1e-7 * sqrt(alpha * beta)) { continue; }
        rotated = true;
        let zeta = (beta - alpha) / (2.0 * gamma);
        let t = select(-1.0, 1.0, zeta >= 0.0) / (abs(zeta) + sqrt(1.0 + zeta * zeta));
        let c = inverseSqrt(1.0 + t * t);
        let sn = c * t;
        for (var i = 0u; i < m; i = i + 1u) {
          let x = A(ab + i * n + p); let y = A(ab + i * n + q);
          setA(ab + i * n + p, c * x - sn * y);
          setA(ab + i * n + q, sn * x + c * y);
        }
        for (var i = 0u; i < n; i = i + 1u) {
          let x = V(vb + i * n + p); let y = V(vb + i * n + q);
          setV(vb + i * n + p, c * x - sn * y);
          setV(vb + i * n + q, sn * x + c * y);
        }
      }
    }
    if (!rotated) { break; }
  }
  for (var j = 0u; j < n; j = j + 1u) {
    var ss = 0.0;
    for (var i = 0u; i < m; i = i + 1u) { let x = A(ab + i * n + j); ss = ss + x * x; }
    let sigma = sqrt(ss);
    setS(sb + j, sigma);
    for (var i = 0u; i < m; i = i + 1u) {
      setA(ab + i * n + j, select(0.0, div_f32(A(ab + i * n + j), sigma), sigma > 0.0));
    }
  }
  // Descending order: selection sort, moving columns of U and V along.
  for (var j = 0u; j < n; j = j + 1u) {
    var best = j;
    for (var c = j + 1u; c < n; c = c + 1u) { if (S(sb + c) > S(sb + best)) { best = c; } }
    if (best == j) { continue; }
    let t = S(sb + j); setS(sb + j, S(sb + best)); setS(sb + best, t);
    for (var i = 0u; i < m; i = i + 1u) {
      let x = A(ab + i * n + j); setA(ab + i * n + j, A(ab + i * n + best)); setA(ab + i * n + best, x);
    }
    for (var i = 0u; i < n; i = i + 1u) {
      let x = V(vb + i * n + j); setV(vb + i * n + j, V(vb + i * n + best)); setV(vb + i * n + best, x);
    }
  }
}
)";
  run(ctx, "svd_jacobi", {rw(a.buffer), rw(v.buffer), rw(s.buffer)},
      uniforms({m, n, max_sweeps(ctx, uint64_t(n) * (n - 1) / 2 * (2 * uint64_t(m) + n + 1),
                                 uint64_t(n) * (n + 3 * m + 2 * n))},
               {a.offset, v.offset, s.offset}),
      {batch, 1, {uint64_t(m) * n, uint64_t(n) * n, n}}, body);
}

void jacobi_eigh(Context& ctx, MatrixBatch a, MatrixBatch v, MatrixBatch w, uint32_t batch,
                 uint32_t n) {
  std::string body = f32_access("A", 0) + f32_access("V", 1) + f32_access("W", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u);
  let ab = idx * n * n; let wb = idx * n;
  for (var i = 0u; i < n; i = i + 1u) {
    for (var j = 0u; j < n; j = j + 1u) { setV(ab + i * n + j, select(0.0, 1.0, i == j)); }
  }
  // Sweeps until no pair needs a rotation: an entry below float32's precision next to its
  // diagonal pair is left alone (as one-sided Jacobi does for the SVD). At most u_dims(1)
  // sweeps, which the host derives from the adapter's loop budget.
  for (var sweep = 0u; sweep < u_dims(1u); sweep = sweep + 1u) {
    var rotated = false;
    for (var p = 0u; p + 1u < n; p = p + 1u) {
      for (var q = p + 1u; q < n; q = q + 1u) {
        let apq = A(ab + p * n + q);
        if (apq == 0.0 || abs(apq) <= 1e-7 * sqrt(abs(A(ab + p * n + p) * A(ab + q * n + q)))) { continue; }
        rotated = true;
        let theta = (A(ab + q * n + q) - A(ab + p * n + p)) / (2.0 * apq);
        let t = select(-1.0, 1.0, theta >= 0.0) / (abs(theta) + sqrt(theta * theta + 1.0));
        let c = inverseSqrt(t * t + 1.0);
        let s = t * c;
        // A <- J^T A J with J the rotation in the (p, q) plane: columns, then rows.
        for (var k = 0u; k < n; k = k + 1u) {
          let x = A(ab + k * n + p); let y = A(ab + k * n + q);
          setA(ab + k * n + p, c * x - s * y);
          setA(ab + k * n + q, s * x + c * y);
        }
        for (var k = 0u; k < n; k = k + 1u) {
          let x = A(ab + p * n + k); let y = A(ab + q * n + k);
          setA(ab + p * n + k, c * x - s * y);
          setA(ab + q * n + k, s * x + c * y);
        }
        for (var k = 0u; k < n; k = k + 1u) {
          let x = V(ab + k * n + p); let y = V(ab + k * n + q);
          setV(ab + k * n + p, c * x - s * y);
          setV(ab + k * n + q, s * x + c * y);
        }
      }
    }
    if (!rotated) { break; }
  }
  for (var i = 0u; i < n; i = i + 1u) { setW(wb + i, A(ab + i * n + i)); }
  for (var j = 0u; j < n; j = j + 1u) {
    var best = j;
    for (var c = j + 1u; c < n; c = c + 1u) { if (W(wb + c) < W(wb + best)) { best = c; } }
    if (best == j) { continue; }
    let t = W(wb + j); setW(wb + j, W(wb + best)); setW(wb + best, t);
    for (var i = 0u; i < n; i = i + 1u) {
      let x = V(ab + i * n + j); setV(ab + i * n + j, V(ab + i * n + best)); setV(ab + i * n + best, x);
    }
  }
}
)";
  run(ctx, "eigh_jacobi", {rw(a.buffer), rw(v.buffer), rw(w.buffer)},
      uniforms({n, max_sweeps(ctx, uint64_t(n) * (n - 1) / 2 * (3 * uint64_t(n) + 1), 4 * uint64_t(n) * n)},
               {a.offset, v.offset, w.offset}),
      {batch, 1, {uint64_t(n) * n, uint64_t(n) * n, n}}, body);
}

void ldl_factor(Context& ctx, MatrixBatch a, MatrixBatch pivots, MatrixBatch info, uint32_t batch,
                uint32_t n) {
  // Matrix element (i, j), i >= j, is A(base + i * n + j); only those are read or written.
  std::string body = f32_access("A", 0) + i32_access("P", 1) + i32_access("I", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u);
  let base = idx * n * n;
  let alpha = 0.6403882032022076;  // (1 + sqrt(17)) / 8
  var info = 0;
  var k = 0u;
  loop {
    if (k >= n) { break; }
    var kstep = 1u;
    var kp = k;
    let absakk = abs(A(base + k * n + k));
    // The first largest |a(i, k)| below the diagonal (isamax).
    var imax = k;
    var colmax = 0.0;
    for (var i = k + 1u; i < n; i = i + 1u) {
      let v = abs(A(base + i * n + k));
      if (i == k + 1u || v > colmax) { colmax = v; imax = i; }
    }
    if (max(absakk, colmax) == 0.0 || is_nan(absakk)) {
      if (info == 0) { info = i32(k + 1u); }
    } else {
      if (!(absakk >= alpha * colmax)) {
        // The largest off-diagonal entry in row / column imax.
        var rowmax = 0.0;
        for (var j = k; j < imax; j = j + 1u) {
          let v = abs(A(base + imax * n + j));
          if (j == k || v > rowmax) { rowmax = v; }
        }
        var cmax = 0.0;
        for (var i = imax + 1u; i < n; i = i + 1u) {
          let v = abs(A(base + i * n + imax));
          if (i == imax + 1u || v > cmax) { cmax = v; }
        }
        if (imax + 1u < n) { rowmax = max(rowmax, cmax); }
        if (absakk >= alpha * colmax * div_f32(colmax, rowmax)) {
          kp = k;
        } else if (abs(A(base + imax * n + imax)) >= alpha * rowmax) {
          kp = imax;
        } else {
          kp = imax;
          kstep = 2u;
        }
      }
      let kk = k + kstep - 1u;
      if (kp != kk) {
        // Interchange rows and columns kk and kp of the trailing lower triangle.
        for (var i = kp + 1u; i < n; i = i + 1u) {
          let t = A(base + i * n + kk);
          setA(base + i * n + kk, A(base + i * n + kp));
          setA(base + i * n + kp, t);
        }
        for (var j = kk + 1u; j < kp; j = j + 1u) {
          let t = A(base + j * n + kk);
          setA(base + j * n + kk, A(base + kp * n + j));
          setA(base + kp * n + j, t);
        }
        let t = A(base + kk * n + kk);
        setA(base + kk * n + kk, A(base + kp * n + kp));
        setA(base + kp * n + kp, t);
        if (kstep == 2u) {
          let t2 = A(base + (k + 1u) * n + k);
          setA(base + (k + 1u) * n + k, A(base + kp * n + k));
          setA(base + kp * n + k, t2);
        }
      }
      if (kstep == 1u) {
        // A22 -= x x^T / d, then x /= d (syr, scal)
        let d11 = div_f32(1.0, A(base + k * n + k));
        for (var j = k + 1u; j < n; j = j + 1u) {
          let t = -d11 * A(base + j * n + k);
          for (var i = j; i < n; i = i + 1u) {
            setA(base + i * n + j, A(base + i * n + j) + A(base + i * n + k) * t);
          }
        }
        for (var i = k + 1u; i < n; i = i + 1u) { setA(base + i * n + k, d11 * A(base + i * n + k)); }
      } else if (k + 2u < n) {
        var d21 = A(base + (k + 1u) * n + k);
        let d11 = div_f32(A(base + (k + 1u) * n + k + 1u), d21);
        let d22 = div_f32(A(base + k * n + k), d21);
        let t = div_f32(1.0, d11 * d22 - 1.0);
        d21 = div_f32(t, d21);
        for (var j = k + 2u; j < n; j = j + 1u) {
          let wk = d21 * (d11 * A(base + j * n + k) - A(base + j * n + k + 1u));
          let wkp1 = d21 * (d22 * A(base + j * n + k + 1u) - A(base + j * n + k));
          for (var i = j; i < n; i = i + 1u) {
            let v = A(base + i * n + j) - A(base + i * n + k) * wk;
            setA(base + i * n + j, v - A(base + i * n + k + 1u) * wkp1);
          }
          setA(base + j * n + k, wk);
          setA(base + j * n + k + 1u, wkp1);
        }
      }
    }
    if (kstep == 1u) {
      setP(idx * n + k, i32(kp + 1u));
    } else {
      setP(idx * n + k, -i32(kp + 1u));
      setP(idx * n + k + 1u, -i32(kp + 1u));
    }
    k = k + kstep;
  }
  setI(idx, info);
}
)";
  run(ctx, "ldl_factor", {rw(a.buffer), rw(pivots.buffer), rw(info.buffer)},
      uniforms({n}, {a.offset, pivots.offset, info.offset}), {batch, 1, {uint64_t(n) * n, n, 1}}, body);
}

void ldl_solve(Context& ctx, MatrixBatch ld, MatrixBatch pivots, MatrixBatch b, uint32_t batch,
               uint32_t n, uint32_t k) {
  // One invocation per (matrix, right-hand column); x[i] is B's element (i, c).
  std::string body = f32_access("L", 0, false) + i32_access("P", 1, false) + f32_access("B", 2) +
                     kernel_main(Grid::Invocations, 64) + R"(
  let n = u_dims(0u); let k = u_dims(1u);
  let mat = idx / k; let c = idx % k;
  let a0 = mat * n * n; let b0 = mat * n * k + c; let p0 = mat * n;
  // L D y = P b, forward over the 1x1 and 2x2 blocks.
  var r = 0u;
  loop {
    if (r >= n) { break; }
    let piv = P(p0 + r);
    if (piv > 0) {
      let p = u32(piv - 1);
      if (p != r) { let t = B(b0 + r * k); setB(b0 + r * k, B(b0 + p * k)); setB(b0 + p * k, t); }
      let br = B(b0 + r * k);
      for (var i = r + 1u; i < n; i = i + 1u) { setB(b0 + i * k, B(b0 + i * k) - L(a0 + i * n + r) * br); }
      setB(b0 + r * k, br * div_f32(1.0, L(a0 + r * n + r)));
      r = r + 1u;
    } else {
      let p = u32(-piv - 1);
      let r1 = r + 1u;
      if (p != r1) { let t = B(b0 + r1 * k); setB(b0 + r1 * k, B(b0 + p * k)); setB(b0 + p * k, t); }
      let b1 = B(b0 + r * k); let b2 = B(b0 + (r + 1u) * k);
      for (var i = r + 2u; i < n; i = i + 1u) { setB(b0 + i * k, B(b0 + i * k) - L(a0 + i * n + r) * b1); }
      for (var i = r + 2u; i < n; i = i + 1u) { setB(b0 + i * k, B(b0 + i * k) - L(a0 + i * n + r1) * b2); }
      let akm1k = L(a0 + (r + 1u) * n + r);
      let akm1 = div_f32(L(a0 + r * n + r), akm1k);
      let ak = div_f32(L(a0 + (r + 1u) * n + r + 1u), akm1k);
      let denom = akm1 * ak - 1.0;
      let bkm1 = div_f32(b1, akm1k);
      let bk = div_f32(b2, akm1k);
      setB(b0 + r * k, div_f32(ak * bkm1 - bk, denom));
      setB(b0 + (r + 1u) * k, div_f32(akm1 * bk - bkm1, denom));
      r = r + 2u;
    }
  }
  // L^T x = y, backward, undoing the interchanges.
  var q = i32(n) - 1;
  loop {
    if (q < 0) { break; }
    let rr = u32(q);
    let piv = P(p0 + rr);
    var s = B(b0 + rr * k);
    for (var i = rr + 1u; i < n; i = i + 1u) { s = s - L(a0 + i * n + rr) * B(b0 + i * k); }
    setB(b0 + rr * k, s);
    if (piv > 0) {
      let p = u32(piv - 1);
      if (p != rr) { let t = B(b0 + rr * k); setB(b0 + rr * k, B(b0 + p * k)); setB(b0 + p * k, t); }
      q = q - 1;
    } else {
      var s2 = B(b0 + (rr - 1u) * k);
      for (var i = rr + 1u; i < n; i = i + 1u) { s2 = s2 - L(a0 + i * n + rr - 1u) * B(b0 + i * k); }
      setB(b0 + (rr - 1u) * k, s2);
      let p = u32(-piv - 1);
      if (p != rr) { let t = B(b0 + rr * k); setB(b0 + rr * k, B(b0 + p * k)); setB(b0 + p * k, t); }
      q = q - 2;
    }
  }
}
)";
  run(ctx, "ldl_solve", {ro(ld.buffer), ro(pivots.buffer), rw(b.buffer)},
      uniforms({n, k}, {ld.offset, pivots.offset, b.offset}),
      {batch, k, {uint64_t(n) * n, n, uint64_t(n) * k}}, body);
}

}  // namespace twgpu
