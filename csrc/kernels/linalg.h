// Dense linear algebra on small and medium matrices, float32, batched: one invocation
// per matrix (or per right-hand-side column) runs the textbook algorithm in LAPACK's
// conventions, so results agree with the CPU's LAPACK to rounding: LU with partial
// pivoting (getrf's 1-based pivots and info), its solves (getrs, plain and transposed),
// Cholesky (potrf, lower), triangular solves (trsm), and determinants from an LU.
//
// Every matrix is dense row-major at `offset + b * rows * cols` (elements) of its buffer.
// Kernels update in place or write to separate buffers; no buffer is bound twice.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

namespace twgpu {

class Context;

struct MatrixBatch {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
};

// In place: a (batch, m, n) -> L\U; pivots (batch, min(m, n)) int32 1-based; info (batch)
// int32: 0, or k+1 for the first exactly zero pivot U[k][k].
void lu_factor(Context& ctx, MatrixBatch a, MatrixBatch pivots, MatrixBatch info,
               uint32_t batch, uint32_t m, uint32_t n);
// In place on b (batch, n, k): solves A X = B (or A^T X = B when `transpose`) from the
// factorization of lu_factor (lu: (batch, n, n), pivots: (batch, n)).
void lu_solve(Context& ctx, MatrixBatch lu, MatrixBatch pivots, MatrixBatch b, uint32_t batch,
              uint32_t n, uint32_t k, bool transpose);
// In place: a (batch, n, n) -> its lower Cholesky factor L (upper triangle zeroed);
// info (batch) int32: 0, or j+1 when the leading minor of order j+1 is not positive.
void cholesky(Context& ctx, MatrixBatch a, MatrixBatch info, uint32_t batch, uint32_t n);
// In place on b (batch, n, k): solves A X = B with A (batch, n, n) triangular.
void triangular_solve(Context& ctx, MatrixBatch a, MatrixBatch b, uint32_t batch, uint32_t n,
                      uint32_t k, bool upper, bool unit_diagonal);
// From lu_factor's output: det (batch), sign (batch), log|det| (batch), all float32.
void lu_determinant(Context& ctx, MatrixBatch lu, MatrixBatch pivots, MatrixBatch det,
                    MatrixBatch sign, MatrixBatch logabsdet, uint32_t batch, uint32_t n);

// The permutation matrix P of A = P L U from lu_factor's pivots (batch, k): writes ones
// into p (batch, m, m), which the caller zeroed; perm (batch, m) int32 is scratch.
void lu_permutation(Context& ctx, MatrixBatch pivots, MatrixBatch perm, MatrixBatch p,
                    uint32_t batch, uint32_t m, uint32_t k);

// Householder QR (geqrf) in place on a (batch, m, n): R on and above the diagonal, the
// reflectors' vectors below it (implicit unit head), and tau (batch, min(m, n)), with
// LAPACK's dlarfg conventions (beta = -sign(alpha) * norm).
void householder_qr(Context& ctx, MatrixBatch a, MatrixBatch tau, uint32_t batch, uint32_t m,
                    uint32_t n);
// Applies the k reflectors of (v: (batch, m, kv) with kv >= k, tau: (batch, k)) to c in
// place: c (batch, m, nc) <- op(Q) c with Q = H1 ... Hk (left); c (batch, nc, m) <- c op(Q)
// (right); op = transpose when `transpose`.
void householder_apply(Context& ctx, MatrixBatch v, MatrixBatch tau, MatrixBatch c,
                       uint32_t batch, uint32_t m, uint32_t kv, uint32_t k, uint32_t nc,
                       bool left, bool transpose);

// Singular values by one-sided Jacobi (Hestenes) rotations, for m >= n: a (batch, m, n)
// becomes U (unit columns; a zero column for a zero singular value), v (batch, n, n) is V
// and s (batch, n) the singular values, sorted in descending order.
void jacobi_svd(Context& ctx, MatrixBatch a, MatrixBatch v, MatrixBatch s, uint32_t batch,
                uint32_t m, uint32_t n);
// Eigen-decomposition of symmetric a (batch, n, n) by cyclic Jacobi rotations: w (batch, n)
// ascending eigenvalues, v (batch, n, n) eigenvectors in its columns; a is overwritten.
void jacobi_eigh(Context& ctx, MatrixBatch a, MatrixBatch v, MatrixBatch w, uint32_t batch,
                 uint32_t n);

// Bunch-Kaufman LDL^T of symmetric a (batch, n, n) in place, reading and writing its lower
// triangle as LAPACK's sytf2 (uplo 'L') does, with its pivot choices and conventions:
// pivots (batch, n) int32 1-based, negative for both rows of a 2x2 block; info (batch)
// int32: 0, or k+1 for the first zero (or NaN) pivot column k.
void ldl_factor(Context& ctx, MatrixBatch a, MatrixBatch pivots, MatrixBatch info,
                uint32_t batch, uint32_t n);
// In place on b (batch, n, k): solves A X = B from ldl_factor's output (sytrs, 'L').
void ldl_solve(Context& ctx, MatrixBatch ld, MatrixBatch pivots, MatrixBatch b, uint32_t batch,
               uint32_t n, uint32_t k);

}  // namespace twgpu
