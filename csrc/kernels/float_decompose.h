// frexp: x = mantissa * 2^exponent with |mantissa| in [0.5, 1), taken from the float's bits
// so that subnormals come out exact even on adapters that flush them in arithmetic.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu {

// x: `count` contiguous floats (float32/16/bf16); mantissa: same dtype; exponent: int32.
// Zeros, infinities and NaN keep their value with exponent 0 (as glibc's frexp).
void frexp_kernel(Context& ctx, const nn::Operand& x, const nn::Operand& mantissa,
                  const nn::Operand& exponent, uint64_t count);

}  // namespace twgpu
