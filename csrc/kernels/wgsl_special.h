// WGSL math libraries that only some pointwise ops need. An op names its library in the
// op table (elementwise_ops.cpp) and the generator appends it to that op's shader, so the
// common prelude stays small for every other kernel.
#pragma once

namespace twgpu::wgsl {

// exp/log families, inverse trig, hyperbolic functions, erfinv, hypot, nextafter,
// logaddexp, logit, sinc, and the activation helpers (gelu/silu backward, ...).
extern const char kElementaryLib[];
// Special functions (needs kElementaryLib): lgamma, digamma, polygamma, Hurwitz zeta,
// modified Bessel functions I0/I1 (and scaled), erfcx, ndtri, log_ndtr, entr, spherical
// j0, orthogonal polynomials.
extern const char kSpecialLib[];

}  // namespace twgpu::wgsl
