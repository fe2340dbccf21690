#include "kernels/float_decompose.h"

namespace twgpu {

void frexp_kernel(Context& ctx, const nn::Operand& x, const nn::Operand& mantissa,
                  const nn::Operand& exponent, uint64_t count) {
  nn::NnKernel k;
  k.key = "frexp";
  k.inputs = {x};
  k.outputs = {mantissa, exponent};
  // Narrow dtypes reach in0 as exact float32 values; their subnormals are float32 normals.
  k.body =
      "fn run(i: u32) {\n"
      "  let v = in0(i);\n"
      "  let u = bitcast<u32>(v);\n"
      "  let mag = u & 0x7fffffffu;\n"
      "  let field = mag >> 23u;\n"
      "  if (mag == 0u || field == 255u) { out0(i, v); out1(i, 0); return; }\n"
      "  var frac = mag & 0x7fffffu;\n"
      "  var e = i32(field) - 126;\n"
      "  if (field == 0u) {\n"
      "    // Subnormal: shift the leading bit up to the implicit bit's place.\n"
      "    let s = countLeadingZeros(frac) - 8u;\n"
      "    frac = (frac << s) & 0x7fffffu;\n"
      "    e = -125 - i32(s);\n"
      "  }\n"
      "  out0(i, bitcast<f32>((u & 0x80000000u) | (126u << 23u) | frac));\n"
      "  out1(i, e);\n"
      "}\n";
  nn::launch_map(ctx, k, count);
}

}  // namespace twgpu
