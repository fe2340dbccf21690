// WGSL helper libraries that kernels include on demand: float bit tricks (NaN tests,
// f16/bf16 rounding) and exact int64 arithmetic on vec2<u32> (lo, hi) words.
#pragma once

namespace twgpu::wgsl {

// f32 helpers: NaN/Inf tests by bits (drivers may fold x != x away), f16/bf16 packing
// with round-to-nearest-even and correct overflow to infinity.
extern const char* const kFloatPrelude;
// int64 emulation: add, sub, mul, div/rem (trunc and floor), shifts, compares, pow,
// conversions to and from f32 with the CPU's rounding.
extern const char* const kInt64Prelude;
// Elementary functions with the accuracy PyTorch's CPU kernels have (erf, log1p, expm1,
// tanh, pow with negative bases, floor division and Python-style modulo).
extern const char* const kMathPrelude;

}  // namespace twgpu::wgsl
