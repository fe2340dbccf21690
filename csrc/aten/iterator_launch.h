// Runs an elementwise kernel over a TensorIterator: ATen decides broadcasting, type
// promotion, output allocation and dim coalescing; this turns the iterator's shape,
// byte strides and data pointers into an ElementwiseLaunch.
#pragma once
#include <ATen/TensorIterator.h>

#include "kernels/elementwise.h"

namespace twgpu::aten {

// The compute type an op uses when its common dtype is `t`.
Compute compute_type_of(c10::ScalarType t);
// Converts a Scalar to the bits of compute type `c`.
ScalarBits scalar_bits(const c10::Scalar& s, Compute c);

// A scalar converted to dtype `t` as a tensor cast does it (integers wrap, floats round
// to the narrower type).
c10::Scalar cast_scalar(const c10::Scalar& s, c10::ScalarType t);

// Records `op` over `iter` (output first). Raises NotImplementedError "\"op_webgpu\" not
// implemented for 'T'" when the op has no kernel for `compute` (as CUDA does).
void launch_on_iterator(const at::TensorIteratorBase& iter, const std::string& op,
                        Compute compute, ScalarBits p0 = {}, ScalarBits p1 = {},
                        ScalarBits p2 = {}, ScalarBits p3 = {});

}  // namespace twgpu::aten
