// How each dtype sits in a buffer of u32 words, as WGSL source: loads that give the
// dtype's natural compute value, stores that round and wrap the way the CPU does, and
// conversions between compute types. Narrow types share words: their stores use
// atomicAnd/atomicOr on the word so neighbouring invocations never clobber each other.
#pragma once
#include <string>

#include "kernels/dtype.h"

namespace twgpu {

// WGSL type name of a compute type ("f32", "i32", "vec2<u32>", ...).
const char* wgsl_type(Compute c);
// Expression for a scalar held in two words (`lo`, `hi` are WGSL u32 expressions).
std::string wgsl_scalar(Compute c, const std::string& lo, const std::string& hi);
// Converts `expr` from compute type `from` to `to`.
std::string wgsl_convert(Compute from, Compute to, const std::string& expr);
// `fn NAME(i: u32) -> T` reading element i of `buffer` (T: the dtype's compute type).
std::string wgsl_load_function(const std::string& name, const std::string& buffer, DType dtype,
                               bool atomic_binding);
// The natural compute value of an element of `dtype` (at most 32-bit) from a u32 holding
// its bits in the low end.
std::string wgsl_from_bits(DType dtype, const std::string& bits);
// `fn NAME(v: T) -> u32`: the bits of a value stored as `dtype` (narrow types: low bits),
// rounded and wrapped the way the CPU converts.
std::string wgsl_bits_function(const std::string& name, DType dtype, Compute compute);
// `fn NAME(i: u32, v: T)` writing element i of `buffer` from a value in `compute`.
std::string wgsl_store_function(const std::string& name, const std::string& buffer, DType dtype,
                                Compute compute, bool atomic_binding);

}  // namespace twgpu
