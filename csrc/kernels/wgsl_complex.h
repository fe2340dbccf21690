// complex64 arithmetic in WGSL: values are vec2<f32> (real, imaginary). The elementwise
// generator appends this library (after kElementaryLib, which it builds on) to every
// kernel that computes in complex64.
#pragma once

namespace twgpu::wgsl {

// c64_mul/div (Smith's scaling), abs (hypot), arg, exp, log, log1p, expm1, sqrt, pow,
// trig and hyperbolic functions, sigmoid, sgn, comparisons.
extern const char kComplexLib[];

}  // namespace twgpu::wgsl
