// The ATen layer's bridge to the runtime: dtype mapping, a tensor's buffer and byte
// offset, and the translation of runtime errors into the exceptions PyTorch raises.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include "kernels/dtype.h"
#include "runtime/runtime.h"

namespace twgpu::aten {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// nullopt for dtypes the device cannot hold (quantized, float8, ...).
std::optional<DType> to_dtype(c10::ScalarType t);
DType to_dtype_or_throw(c10::ScalarType t);
// True when kernels can compute on it (float64/complex live on the device but compute on CPU).
bool is_native_compute(c10::ScalarType t);
// True also for complex64, which the elementwise family (copies, fills, the pointwise ops
// with a complex expression) computes natively.
inline bool is_elementwise_native(c10::ScalarType t) {
  return t == c10::kComplexFloat || is_native_compute(t);
}

// Frees a storage made by the webgpu allocator (its DataPtr's deleter).
void delete_allocation(void* ctx);
// The allocation that holds a raw device address, for storages that PyTorch made around a
// pointer (at::from_blob, as torch.save does); null for an unknown address.
Allocation* allocation_at(const void* address);

// The allocation behind a webgpu tensor's storage (null for an empty storage).
inline Allocation* allocation_of(const at::TensorBase& t) {
  const c10::DataPtr& p = t.storage().data_ptr();
  if (p.get_deleter() == &delete_allocation) return static_cast<Allocation*>(p.get_context());
  return allocation_at(p.get());
}
// Byte offset of the tensor's first element inside its buffer.
inline uint64_t byte_offset_of(const at::TensorBase& t) {
  Allocation* a = allocation_of(t);
  if (!a) return 0;
  return static_cast<uint64_t>(static_cast<const char*>(t.const_data_ptr()) -
                               reinterpret_cast<const char*>(a->address));
}

// Where a tensor's first element lives, for kernels: its buffer, the element offset of
// the first element inside it, and its dtype. Throws for a tensor not on webgpu; the
// buffer is null for a tensor without storage bytes (numel 0).
struct DeviceRef {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
};
DeviceRef device_ref(const at::TensorBase& t);

// True when a tensor (not a 0-dim CPU scalar) holds a dtype kernels cannot compute on
// (float64, complex): such calls go to the CPU fallback.
bool any_stored_only(std::initializer_list<const at::TensorBase*> tensors);

c10::Allocator* webgpu_allocator();
// Moves a storage to a fresh allocation of `nbytes`, keeping min(old, new) bytes.
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);
// Resets every peak statistic (the pool's and the allocator's) to the current values.
void reset_peak_stats();

// Raises the PyTorch exception that matches a runtime error.
[[noreturn]] void rethrow(const Error& e);

}  // namespace twgpu::aten

// Wraps calls into the runtime: its errors leave as torch.OutOfMemoryError,
// NotImplementedError or RuntimeError.
#define TWGPU_TRY try {
#define TWGPU_CATCH \
  }                 \
  catch (const ::twgpu::Error& e) { ::twgpu::aten::rethrow(e); }
