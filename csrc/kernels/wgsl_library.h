// The WGSL library every kernel draws on, kept as files in csrc/kernels/wgsl/ and embedded
// at build time (cmake/embed_wgsl.cmake). WGSL drops the functions a kernel does not call,
// so kernels include whole files.
#pragma once
#include <vector>

namespace twgpu::wgsl {

// float.wgsl: NaN/Inf tests by bits, IEEE comparisons, f16/bf16 packing. Every kernel.
extern const char kFloatPrelude[];
// int64.wgsl: exact int64 arithmetic on vec2<u32> (lo, hi) words. Every kernel.
extern const char kInt64Prelude[];
// math.wgsl: erf, log1p, expm1, tanh, pow, sin/cos, fmod with the CPU's accuracy. Every kernel.
extern const char kMathPrelude[];
// elementary.wgsl: exp/log families, inverse trig, hyperbolic, activation helpers; for the
// pointwise ops that name it (elementwise_ops.cpp).
extern const char kElementaryLib[];
// special.wgsl (needs elementary.wgsl): lgamma, digamma, zeta, Bessel, ndtri, polynomials.
extern const char kSpecialLib[];
// complex.wgsl (needs elementary.wgsl): complex64 arithmetic on vec2<f32>.
extern const char kComplexLib[];
// random.wgsl: Philox-4x32-10 and its draws; random fills and torch.compile's random ops.
extern const char kRandomLib[];

struct LibraryFile {
  const char* name;  // file stem: "float", "int64", ...
  const char* text;  // the file's contents, byte for byte
};
// Every file of the library, in the order kernels include them.
const std::vector<LibraryFile>& library();

}  // namespace twgpu::wgsl
