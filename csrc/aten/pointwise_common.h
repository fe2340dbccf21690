// Helpers shared by the pointwise op files (ops_elementwise, ops_unary_math,
// ops_pointwise_ternary, ops_activation): when an iterator can run natively, and how
// scalars become kernel operands or parameters.
#pragma once
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>

#include "aten/iterator_launch.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {

// True when every operand and the common dtype compute natively.
// CPU scalars (Python numbers, wrapped as double/long tensors) reach the kernel already
// converted to the compute type, so only their complex-ness matters.
inline bool native_iter(const at::TensorIteratorBase& iter) {
  for (int k = 0; k < iter.ntensors(); ++k) {
    if (k >= iter.noutputs() && iter.is_cpu_scalar(k)) {
      if (c10::isComplexType(iter.dtype(k))) return false;
      continue;
    }
    if (!is_native_compute(iter.dtype(k))) return false;
  }
  return true;
}

inline Compute common_compute(const at::TensorIteratorBase& iter) {
  return compute_type_of(iter.common_dtype());
}

// A Python number as the 0-dim CPU tensor TensorIterator promotes as a wrapped number.
inline at::Tensor wrapped(const c10::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// A kernel parameter: `s` converted to dtype `t` first (as the CPU's `s.to<scalar_t>()`:
// integers truncate and wrap, half types round), then to the compute type's bits.
inline ScalarBits param_as(const c10::Scalar& s, c10::ScalarType t) {
  return scalar_bits(cast_scalar(s, t), compute_type_of(t));
}

}  // namespace twgpu::aten
