#include "kernels/wgsl_dtype.h"

#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace twgpu {

ScalarBits ScalarBits::from_f32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return {bits, 0};
}

ScalarBits ScalarBits::from_c64(float re, float im) {
  return {from_f32(re).lo, from_f32(im).lo};
}

ScalarBits ScalarBits::from_double(double v, Compute c) {
  switch (c) {
    case Compute::F32: return from_f32(static_cast<float>(v));
    case Compute::C64: return from_c64(static_cast<float>(v), 0.0f);
    case Compute::I32: return from_i32(static_cast<int32_t>(static_cast<int64_t>(v)));
    case Compute::I64: return from_i64(static_cast<int64_t>(v));
    default: fail(ErrorKind::Internal, "torch_webgpu: scalar for a raw compute type");
  }
}

ScalarBits ScalarBits::from_int(int64_t v, Compute c) {
  switch (c) {
    case Compute::F32: return from_f32(static_cast<float>(v));
    case Compute::C64: return from_c64(static_cast<float>(v), 0.0f);
    case Compute::I32: return from_i32(static_cast<int32_t>(v));
    case Compute::I64: return from_i64(v);
    default: fail(ErrorKind::Internal, "torch_webgpu: scalar for a raw compute type");
  }
}

const char* wgsl_type(Compute c) {
  switch (c) {
    case Compute::F32: return "f32";
    case Compute::I32: return "i32";
    case Compute::I64: return "vec2<u32>";
    case Compute::C64: return "vec2<f32>";
    case Compute::Raw64: return "vec2<u32>";
    case Compute::Raw128: return "vec4<u32>";
  }
  return "?";
}

std::string wgsl_scalar(Compute c, const std::string& lo, const std::string& hi) {
  switch (c) {
    case Compute::F32: return "bitcast<f32>(" + lo + ")";
    case Compute::I32: return "bitcast<i32>(" + lo + ")";
    case Compute::I64: return "vec2<u32>(" + lo + ", " + hi + ")";
    case Compute::C64: return "bitcast<vec2<f32>>(vec2<u32>(" + lo + ", " + hi + "))";
    default: return "vec2<u32>(" + lo + ", " + hi + ")";
  }
}

std::string wgsl_convert(Compute from, Compute to, const std::string& e) {
  if (from == to) return e;
  if (from == Compute::F32 && to == Compute::I32) return "i32(" + e + ")";
  if (from == Compute::F32 && to == Compute::I64) return "i64_from_f32(" + e + ")";
  if (from == Compute::I32 && to == Compute::F32) return "f32(" + e + ")";
  if (from == Compute::I32 && to == Compute::I64) return "i64_from_i32(" + e + ")";
  if (from == Compute::I64 && to == Compute::F32) return "i64_to_f32(" + e + ")";
  if (from == Compute::I64 && to == Compute::I32) return "i64_to_i32(" + e + ")";
  // Real to complex: imaginary part 0. Complex to real keeps the real part (the CPU's cast,
  // which warns that it discards the imaginary part).
  if (to == Compute::C64) return "vec2<f32>(" + wgsl_convert(from, Compute::F32, e) + ", 0.0)";
  if (from == Compute::C64) return wgsl_convert(Compute::F32, to, "(" + e + ").x");
  fail(ErrorKind::Unsupported, std::string("torch_webgpu: no conversion from ") +
                                   compute_name(from) + " to " + compute_name(to) + " on device");
}

namespace {

std::string word(const std::string& buffer, const std::string& index, bool atomic_binding) {
  return atomic_binding ? "atomicLoad(&" + buffer + "[" + index + "])"
                        : buffer + "[" + index + "]";
}

// Bits of a narrow element: (word >> shift) & mask.
std::string narrow_bits(const std::string& buffer, int bytes, bool atomic_binding) {
  std::string per_word = bytes == 2 ? "1u" : "2u";
  std::string lane = bytes == 2 ? "(i & 1u) * 16u" : "(i & 3u) * 8u";
  std::string mask = bytes == 2 ? "0xffffu" : "0xffu";
  return "((" + word(buffer, "i >> " + per_word, atomic_binding) + " >> (" + lane + ")) & " +
         mask + ")";
}

}  // namespace

std::string wgsl_load_function(const std::string& name, const std::string& buffer, DType dtype,
                               bool atomic_binding) {
  std::string ret = wgsl_type(compute_type_for(dtype));
  std::string body;
  switch (dtype) {
    case DType::Float32: body = "bitcast<f32>(" + word(buffer, "i", atomic_binding) + ")"; break;
    case DType::Int32: body = "bitcast<i32>(" + word(buffer, "i", atomic_binding) + ")"; break;
    case DType::Float16: body = "f16_bits_to_f32(" + narrow_bits(buffer, 2, atomic_binding) + ")"; break;
    case DType::BFloat16: body = "bf16_bits_to_f32(" + narrow_bits(buffer, 2, atomic_binding) + ")"; break;
    case DType::Int16: body = "(bitcast<i32>(" + narrow_bits(buffer, 2, atomic_binding) + " << 16u) >> 16u)"; break;
    case DType::Int8: body = "(bitcast<i32>(" + narrow_bits(buffer, 1, atomic_binding) + " << 24u) >> 24u)"; break;
    case DType::UInt8: body = "i32(" + narrow_bits(buffer, 1, atomic_binding) + ")"; break;
    case DType::Bool: body = "select(0, 1, " + narrow_bits(buffer, 1, atomic_binding) + " != 0u)"; break;
    case DType::Complex64:
      body = "bitcast<vec2<f32>>(vec2<u32>(" + word(buffer, "2u * i", atomic_binding) + ", " +
             word(buffer, "2u * i + 1u", atomic_binding) + "))";
      break;
    case DType::Int64:
    case DType::Float64:
      body = "vec2<u32>(" + word(buffer, "2u * i", atomic_binding) + ", " +
             word(buffer, "2u * i + 1u", atomic_binding) + ")";
      break;
    case DType::Complex128:
      body = "vec4<u32>(" + word(buffer, "4u * i", atomic_binding) + ", " +
             word(buffer, "4u * i + 1u", atomic_binding) + ", " +
             word(buffer, "4u * i + 2u", atomic_binding) + ", " +
             word(buffer, "4u * i + 3u", atomic_binding) + ")";
      break;
  }
  return "fn " + name + "(i: u32) -> " + ret + " { return " + body + "; }\n";
}

namespace {

// u32 expression holding the element's bits (narrow types: low bits).
std::string element_bits(DType dtype, Compute compute, const std::string& v) {
  if (dtype == DType::Bool) {
    // bool(x) is x != 0 in the compute type: bool(0.5) is true.
    if (compute == Compute::F32) return "select(0u, 1u, f32_truthy(" + v + "))";
    if (compute == Compute::I32) return "select(0u, 1u, " + v + " != 0)";
    if (compute == Compute::C64)
      return "select(0u, 1u, f32_truthy(" + v + ".x) || f32_truthy(" + v + ".y))";
    return "select(0u, 1u, !i64_is_zero(" + v + "))";
  }
  std::string n = wgsl_convert(compute, compute_type_for(dtype), v);
  switch (dtype) {
    case DType::Float32: case DType::Int32: return "bitcast<u32>(" + n + ")";
    case DType::Float16: return "f32_to_f16_bits(" + n + ")";
    case DType::BFloat16: return "f32_to_bf16_bits(" + n + ")";
    case DType::Int16: return "(bitcast<u32>(" + n + ") & 0xffffu)";
    case DType::Int8: case DType::UInt8: return "(bitcast<u32>(" + n + ") & 0xffu)";
    default: fail(ErrorKind::Internal, "torch_webgpu: element_bits of a wide dtype");
  }
}

}  // namespace

std::string wgsl_from_bits(DType dtype, const std::string& b) {
  switch (dtype) {
    case DType::Float32: return "bitcast<f32>(" + b + ")";
    case DType::Int32: return "bitcast<i32>(" + b + ")";
    case DType::Float16: return "f16_bits_to_f32(" + b + ")";
    case DType::BFloat16: return "bf16_bits_to_f32(" + b + ")";
    case DType::Int16: return "(bitcast<i32>(" + b + " << 16u) >> 16u)";
    case DType::Int8: return "(bitcast<i32>(" + b + " << 24u) >> 24u)";
    case DType::UInt8: return "i32(" + b + ")";
    case DType::Bool: return "select(0, 1, " + b + " != 0u)";
    default: fail(ErrorKind::Internal, "torch_webgpu: wgsl_from_bits of a wide dtype");
  }
}

std::string wgsl_bits_function(const std::string& name, DType dtype, Compute compute) {
  return "fn " + name + "(v: " + wgsl_type(compute) + ") -> u32 { return " +
         element_bits(dtype, compute, "v") + "; }\n";
}

std::string wgsl_store_function(const std::string& name, const std::string& buffer, DType dtype,
                                Compute compute, bool atomic_binding) {
  std::string head = "fn " + name + "(i: u32, v: " + wgsl_type(compute) + ") {\n";
  Compute natural = compute_type_for(dtype);
  std::string body;
  switch (element_size(dtype)) {
    case 4: body = "  " + buffer + "[i] = " + element_bits(dtype, compute, "v") + ";\n"; break;
    case 2:
    case 1: {
      std::string bits = element_bits(dtype, compute, "v");
      bool half = element_size(dtype) == 2;
      std::string w = half ? "i >> 1u" : "i >> 2u";
      std::string shift = half ? "(i & 1u) * 16u" : "(i & 3u) * 8u";
      std::string mask = half ? "0xffffu" : "0xffu";
      body = "  let w = " + w + ";\n  let sh = " + shift + ";\n  let m = " + mask + " << sh;\n";
      if (atomic_binding) {
        body += "  atomicAnd(&" + buffer + "[w], ~m);\n  atomicOr(&" + buffer + "[w], (" + bits +
                " << sh) & m);\n";
      } else {
        body += "  " + buffer + "[w] = (" + buffer + "[w] & ~m) | ((" + bits + " << sh) & m);\n";
      }
      break;
    }
    case 8: {
      std::string n = wgsl_convert(compute, natural, "v");
      if (natural == Compute::C64) n = "bitcast<vec2<u32>>(" + n + ")";
      body = "  let x = " + n + ";\n  " + buffer + "[2u * i] = x.x;\n  " + buffer +
             "[2u * i + 1u] = x.y;\n";
      break;
    }
    case 16:
      body = "  " + buffer + "[4u * i] = v.x;\n  " + buffer + "[4u * i + 1u] = v.y;\n  " + buffer +
             "[4u * i + 2u] = v.z;\n  " + buffer + "[4u * i + 3u] = v.w;\n";
      break;
  }
  return head + body + "}\n";
}

}  // namespace twgpu
