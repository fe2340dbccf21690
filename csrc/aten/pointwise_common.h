// Helpers shared by the pointwise op files (ops_elementwise, ops_unary_math,
// ops_pointwise_ternary, ops_activation): when an iterator can run natively, and how
// scalars become kernel operands or parameters.
#pragma once
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/MaybeOwned.h>

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

// The same for op `op`, which also computes complex64 natively when the op table has a
// complex expression for it (complex CPU scalars then join as complex64 parameters).
inline bool native_dtype_for(c10::ScalarType t, const char* op) {
  return is_native_compute(t) ||
         (t == c10::kComplexFloat && elementwise_supports(op, Compute::C64));
}
inline bool native_iter(const at::TensorIteratorBase& iter, const char* op) {
  bool complex_tensor = false, complex_scalar = false;
  for (int k = 0; k < iter.ntensors(); ++k) {
    if (k >= iter.noutputs() && iter.is_cpu_scalar(k)) {
      complex_scalar = complex_scalar || c10::isComplexType(iter.dtype(k));
      continue;
    }
    if (!native_dtype_for(iter.dtype(k), op)) return false;
    complex_tensor = complex_tensor || iter.dtype(k) == c10::kComplexFloat;
  }
  if (!complex_scalar) return true;
  // A complex CPU scalar is a complex64 parameter: the op must compute in complex64 (as
  // float32 tensor == 1j does, promoted; a real-only kernel cannot take it).
  if (!elementwise_supports(op, Compute::C64)) return false;
  if (complex_tensor) return true;
  at::native::ResultTypeState inputs{};
  for (int k = iter.noutputs(); k < iter.ntensors(); ++k)
    inputs = at::native::update_result_type_state(iter.tensor(k), inputs);
  return at::native::result_type(inputs) == c10::kComplexFloat;
}
// any_stored_only() for op `op`: complex64 is stored-only unless the op computes it.
inline bool stored_only_for(const char* op, std::initializer_list<const at::TensorBase*> tensors) {
  for (const at::TensorBase* t : tensors) {
    if (!t->defined() || (t->device().is_cpu() && t->dim() == 0)) continue;
    if (!native_dtype_for(t->scalar_type(), op)) return true;
  }
  return false;
}

// Ops whose complex64 input gives a real result (abs, angle): the kernel's real part goes
// to a real `out` (or to a complex one, imaginary part 0). False when it cannot run here.
inline bool complex_to_real_out(const at::Tensor& a, at::Tensor& out, const char* op) {
  if (a.device().type() != kDeviceType || out.device().type() != kDeviceType ||
      !native_dtype_for(out.scalar_type(), op))
    return false;
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(a)
                  .build();
  launch_on_iterator(iter, op, Compute::C64);
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
// A 0-dim float64 tensor on the device (PyTorch's composites make some, e.g. the default
// rtol of linalg.pinv) as the 0-dim CPU tensor: both promote alike, and the CPU one
// reaches the kernel as a parameter, so float32 math with it stays native.
// Borrowed in the common case: every binary op calls this.
inline c10::MaybeOwned<at::Tensor> host_scalar_if_stored(const at::Tensor& t) {
  if (t.defined() && t.dim() == 0 && t.device().type() == kDeviceType &&
      !is_native_compute(t.scalar_type()) && !c10::isComplexType(t.scalar_type()))
    return c10::MaybeOwned<at::Tensor>::owned(t.cpu());
  return c10::MaybeOwned<at::Tensor>::borrowed(t);
}

inline ScalarBits param_as(const c10::Scalar& s, c10::ScalarType t) {
  return scalar_bits(cast_scalar(s, t), compute_type_of(t));
}

// `.out` kernels of structured unary / binary ops: the TensorIterator builder ATen's meta
// uses (unary_op, unary_float_op, binary_op, binary_float_op, comparison_op), the CPU
// fallback for dtypes the device only stores. Used inside namespace twgpu::aten.
#define TWGPU_UNARY_OUT(FN, OP, BUILDER, KERNEL)                                \
  at::Tensor& FN(const at::Tensor& a, at::Tensor& out) {                                    \
    if (stored_only_for(KERNEL, {&a, &out})) return call_cpu_fallback<at::_ops::OP>(a, out); \
    auto iter = at::TensorIterator::BUILDER(out, a);                                \
    if (!native_iter(iter, KERNEL)) return call_cpu_fallback<at::_ops::OP>(a, out);     \
    launch_on_iterator(iter, KERNEL, common_compute(iter));                     \
    return out;                                                                 \
  }

#define TWGPU_BINARY_OUT(FN, OP, BUILDER, KERNEL)                              \
  at::Tensor& FN(const at::Tensor& a_in, const at::Tensor& b_in, at::Tensor& out) {           \
    auto a = host_scalar_if_stored(a_in), b = host_scalar_if_stored(b_in);     \
    if (stored_only_for(KERNEL, {&*a, &*b, &out}))                             \
      return call_cpu_fallback<at::_ops::OP>(a_in, b_in, out);                 \
    auto iter = at::TensorIterator::BUILDER(out, *a, *b);                          \
    if (!native_iter(iter, KERNEL)) return call_cpu_fallback<at::_ops::OP>(a_in, b_in, out); \
    launch_on_iterator(iter, KERNEL, common_compute(iter));                    \
    return out;                                                                \
  }

}  // namespace twgpu::aten
