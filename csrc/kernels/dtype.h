// Element types as the kernels see them. Every buffer is an array of u32 words; a dtype
// says how its elements sit in those words (see wgsl_dtype.h) and which arithmetic
// ("compute type") its ops use.
#pragma once
#include <cstdint>

namespace twgpu {

enum class DType : uint8_t {
  Float32, Float16, BFloat16, Int64, Int32, Int16, Int8, UInt8, Bool,
  // Stored on the device, moved by copies; arithmetic on them runs on the CPU, except
  // complex64's elementwise ops (see is_elementwise_computable).
  Float64, Complex64, Complex128,
};

// The arithmetic an op runs in. Half types compute in f32; the narrow integers and bool
// in i32 (stores wrap to the storage width, as the CPU does); int64 in an exact
// two-word emulation; complex64 in vec2<f32> (real, imaginary). Raw types only move bits.
enum class Compute : uint8_t { F32, I32, I64, C64, Raw64, Raw128 };

inline int element_size(DType t) {
  switch (t) {
    case DType::Float32: case DType::Int32: return 4;
    case DType::Float16: case DType::BFloat16: case DType::Int16: return 2;
    case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
    case DType::Int64: case DType::Float64: case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Int16: return "int16";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Bool: return "bool";
    case DType::Float64: return "float64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
  }
  return "?";
}

inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
}
// True for dtypes WGSL kernels compute on (the rest are stored only).
inline bool is_computable(DType t) {
  return t != DType::Float64 && t != DType::Complex64 && t != DType::Complex128;
}
// The elementwise family also computes complex64 (for the ops with a complex expression);
// other kernel families treat it as stored-only.
inline bool is_elementwise_computable(DType t) {
  return is_computable(t) || t == DType::Complex64;
}
// Elements narrower than a word share words, so stores to them must be atomic.
inline bool is_subword(DType t) { return element_size(t) < 4; }

inline Compute compute_type_for(DType t) {
  switch (t) {
    case DType::Float32: case DType::Float16: case DType::BFloat16: return Compute::F32;
    case DType::Int64: return Compute::I64;
    case DType::Complex64: return Compute::C64;
    case DType::Float64: return Compute::Raw64;
    case DType::Complex128: return Compute::Raw128;
    default: return Compute::I32;
  }
}

inline const char* compute_name(Compute c) {
  switch (c) {
    case Compute::F32: return "f32";
    case Compute::I32: return "i32";
    case Compute::I64: return "i64";
    case Compute::C64: return "c64";
    case Compute::Raw64: return "raw64";
    case Compute::Raw128: return "raw128";
  }
  return "?";
}

// A scalar operand or op parameter, already converted to its compute type, as two words.
struct ScalarBits {
  uint32_t lo = 0, hi = 0;
  static ScalarBits from_f32(float v);
  static ScalarBits from_c64(float re, float im);
  static ScalarBits from_i32(int32_t v) { return {static_cast<uint32_t>(v), 0}; }
  static ScalarBits from_i64(int64_t v) {
    return {static_cast<uint32_t>(v), static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32)};
  }
  // Converts a value to `c`'s representation (what the ATen layer hands over).
  static ScalarBits from_double(double v, Compute c);
  static ScalarBits from_int(int64_t v, Compute c);
};

}  // namespace twgpu
