// Tensor basics, native: allocation (empty, empty_strided), views (as_strided, view,
// _reshape_alias, unfold, view_as_real/complex), resize_, set_, copies between CPU and
// webgpu and within webgpu, fill_/zero_, and item().
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/alias.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/neg.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <cstring>

#include "aten/sync_debug.h"
#include "aten/iterator_launch.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  c10::DataPtr fresh = webgpu_allocator()->allocate(nbytes);
  size_t keep = std::min(storage->nbytes(), nbytes);
  if (keep > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    auto* src = static_cast<Allocation*>(storage->data_ptr().get_context());
    auto* dst = static_cast<Allocation*>(fresh.get_context());
    // Buffer copies move whole words; buffers are word-padded, so round up.
    lock.ctx().recorder().copy(src->buffer, 0, dst->buffer, 0, (keep + 3) / 4 * 4);
    TWGPU_CATCH
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}
namespace {

constexpr c10::DispatchKeySet kKeys{c10::DispatchKey::PrivateUse1};

void check_dtype(std::optional<c10::ScalarType> dtype) {
  to_dtype_or_throw(c10::dtype_or_default(dtype));
}

// Backend kernels registered out of tree get no device guard: reject indices other than 0
// here, as CUDA does for an ordinal beyond its device count.
void check_device(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) return;
  TORCH_CHECK(device->index() == 0, "torch_webgpu: invalid device index ",
              static_cast<int>(device->index()), " for ", *device,
              " (there is 1 WebGPU device, webgpu:0)");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_device(device);
  check_dtype(dtype);
  return at::detail::empty_generic(size, webgpu_allocator(), kKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_device(device);
  check_dtype(dtype);
  return at::detail::empty_strided_generic(size, stride, webgpu_allocator(), kKeys,
                                           c10::dtype_or_default(dtype));
}

// Grows a storage to `nbytes`, keeping its contents.
void grow_storage(c10::StorageImpl* storage, size_t nbytes) {
  if (nbytes <= storage->nbytes()) return;
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  resize_storage_bytes(storage, nbytes);
}

size_t storage_bytes_needed(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  return at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.itemsize(),
                                          t.storage_offset());
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  grow_storage(self.storage().unsafeGetStorageImpl(), storage_bytes_needed(self));
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset.expect_int());
  self.unsafeGetTensorImpl()->set_sizes_and_strides(C10_AS_INTARRAYREF_SLOW(size),
                                                    C10_AS_INTARRAYREF_SLOW(stride));
  grow_storage(self.storage().unsafeGetStorageImpl(), storage_bytes_needed(self));
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  c10::SymInt sizes[] = {c10::SymInt(n)};
  c10::SymInt strides[] = {c10::SymInt(1)};
  return set_storage(self, source, 0, sizes, strides);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                     source.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, webgpu_allocator(), true);
  c10::SymInt sizes[] = {c10::SymInt(0)};
  c10::SymInt strides[] = {c10::SymInt(1)};
  return set_storage(self, storage, 0, sizes, strides);
}

// ---- copies ---------------------------------------------------------------------------

bool is_dense_contiguous(const at::Tensor& t) { return t.is_contiguous(); }

// Device-to-device copy through the elementwise kernel (any strides, broadcast, dtype).
void copy_on_device(const at::Tensor& dst, const at::Tensor& src) {
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .check_all_same_device(false)
                  .build();
  // Compute in the source's type so the store applies the CPU's conversion rules
  // (bool(x) is x != 0, float -> int truncates, wide ints wrap).
  launch_on_iterator(iter, "copy", compute_type_of(src.scalar_type()));
}

// Upload a contiguous CPU tensor's bytes into a contiguous webgpu tensor of the same dtype.
void upload_contiguous(const at::Tensor& dst, const at::Tensor& cpu) {
  size_t nbytes = cpu.nbytes();
  if (nbytes == 0) return;
  Allocation* a = allocation_of(dst);
  uint64_t offset = byte_offset_of(dst);
  TWGPU_TRY
  RuntimeLock lock;
  if (offset % 4 == 0 && nbytes % 4 == 0) {
    lock.ctx().recorder().write(a->buffer, offset, cpu.const_data_ptr(), nbytes);
    return;
  }
  // Unaligned: merge with the neighbouring bytes of the first and last words. Where dst
  // is all its allocation holds (a bool or half scalar made by torch.tensor), the bytes
  // past it are no tensor's: padded, no read-back.
  uint64_t begin = offset / 4 * 4, end = (offset + nbytes + 3) / 4 * 4;
  std::vector<uint8_t> words(end - begin);
  const bool whole_allocation = offset == 0 && a->requested == nbytes;
  if (!whole_allocation) lock.ctx().recorder().read(a->buffer, begin, words.data(), words.size());
  std::memcpy(words.data() + (offset - begin), cpu.const_data_ptr(), nbytes);
  lock.ctx().recorder().write(a->buffer, begin, words.data(), words.size());
  TWGPU_CATCH
}

// Read a contiguous webgpu tensor's bytes into a contiguous CPU tensor of the same dtype.
// `wait` false (copy_ with non_blocking=True, as CUDA's to pinned memory): the bytes land
// in `cpu` once the GPU has copied them and the runtime settles the read (an event
// recorded after the copy, synchronize(), any blocking read-back); the closure holds `cpu`
// (its storage stays alive until then).
void download_contiguous(const at::Tensor& cpu, const at::Tensor& src, bool wait = true) {
  size_t nbytes = src.nbytes();
  if (nbytes == 0) return;
  Allocation* a = allocation_of(src);
  uint64_t offset = byte_offset_of(src);
  if (wait) warn_or_error_on_sync();
  TWGPU_TRY
  RuntimeLock lock;
  uint64_t begin = offset / 4 * 4, end = (offset + nbytes + 3) / 4 * 4;
  if (!wait) {
    lock.ctx().recorder().read_async(a->buffer, begin, end - begin,
                                     [cpu, skip = offset - begin, nbytes](const void* bytes) {
                                       std::memcpy(cpu.mutable_data_ptr(), static_cast<const uint8_t*>(bytes) + skip,
                                                   nbytes);
                                     });
    return;
  }
  if (begin == offset && end == offset + nbytes) {
    lock.ctx().recorder().read(a->buffer, offset, cpu.mutable_data_ptr(), nbytes);
    return;
  }
  std::vector<uint8_t> words(end - begin);
  lock.ctx().recorder().read(a->buffer, begin, words.data(), words.size());
  std::memcpy(cpu.mutable_data_ptr(), words.data() + (offset - begin), nbytes);
  TWGPU_CATCH
}

// Neg and conj views store the negation / conjugate of their logical values. Copies see
// them directly (their dispatch keys fall through for _copy_from, see the end of this
// file): going through PyTorch's fallback for those keys would resolve the view with a
// clone, whose copy comes back here, without end.
at::Tensor without_view_flags(const at::Tensor& t) {
  at::Tensor a = t.alias();
  a._set_neg(false);
  a._set_conj(false);
  return a;
}

// A flag-free tensor holding `t`'s logical values.
at::Tensor logical_values(const at::Tensor& t) {
  if (t.device().is_cpu()) return t.resolve_conj().resolve_neg();
  at::Tensor v = without_view_flags(t);
  if (t.is_neg()) v = at::neg(v);
  if (t.is_conj()) v = at::conj_physical(v);
  return v;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

// Host memory for a copy between webgpu and another accelerator: that device's pinned
// memory where it has an allocator for it (so its side of the copy is a DMA), else pageable.
at::Tensor host_staging(const at::Tensor& like, c10::DeviceType other) {
  c10::Allocator* pinned = nullptr;
  try {
    pinned = at::globalContext().getPinnedMemoryAllocator(other);
  } catch (const c10::Error&) {
  }
  if (!pinned) return at::empty(like.sizes(), like.options().device(c10::kCPU));
  return at::Tensor(at::detail::empty_generic(like.sizes(), pinned,
                                              c10::DispatchKeySet(c10::DispatchKey::CPU),
                                              like.scalar_type(), c10::MemoryFormat::Contiguous));
}

// webgpu <-> CUDA (or another device): one hop through host memory, each device doing its
// own half; values, dtype conversion and strides follow copy_'s rules on each side.
at::Tensor copy_across_devices(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (dst.device().type() == kDeviceType) {
    at::Tensor host = host_staging(self, self.device().type());
    host.copy_(self);  // the other device's download; blocking, so the bytes are there
    return copy_from(host, dst, non_blocking);
  }
  at::Tensor host = host_staging(self, dst.device().type());
  copy_from(self, host, false);  // our download waits for the GPU
  dst.copy_(host, non_blocking);  // from pinned memory the other device may copy async
  return dst;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  if (dst.numel() == 0) return dst;
  if (self.is_neg() || self.is_conj() || dst.is_neg() || dst.is_conj()) {
    // Store into dst what makes its logical values equal self's.
    at::Tensor v = logical_values(self);
    if (dst.is_neg()) v = at::neg(v);
    if (dst.is_conj()) v = at::conj_physical(v);
    copy_from(v, without_view_flags(dst), non_blocking);
    return dst;
  }
  bool src_dev = self.device().type() == kDeviceType;
  bool dst_dev = dst.device().type() == kDeviceType;
  if ((!src_dev && !self.device().is_cpu()) || (!dst_dev && !dst.device().is_cpu()))
    return copy_across_devices(self, dst, non_blocking);

  if (src_dev && dst_dev) {
    bool native = is_elementwise_native(self.scalar_type()) &&
                  is_elementwise_native(dst.scalar_type());
    if (native || self.scalar_type() == dst.scalar_type()) {
      copy_on_device(dst, self);
    } else {
      // float64/complex128 conversions run on the CPU.
      dst.copy_(self.cpu().to(dst.scalar_type()));
    }
    return dst;
  }
  if (dst_dev) {  // CPU -> webgpu
    to_dtype_or_throw(dst.scalar_type());
    at::Tensor cpu = self.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    if (is_dense_contiguous(dst)) {
      upload_contiguous(dst, cpu);
    } else {
      at::Tensor staging = at::empty(dst.sizes(), dst.options());
      upload_contiguous(staging, cpu);
      copy_on_device(dst, staging);
    }
    return dst;
  }
  // webgpu -> CPU
  at::Tensor src = self;
  if (!is_dense_contiguous(src)) {
    src = at::empty(self.sizes(), self.options());
    copy_on_device(src, self);
  }
  if (dst.is_contiguous() && dst.scalar_type() == src.scalar_type()) {
    download_contiguous(dst, src, /*wait=*/!non_blocking);
  } else {
    at::Tensor cpu = at::empty(src.sizes(), src.options().device(c10::kCPU));
    download_contiguous(cpu, src);
    dst.copy_(cpu);
  }
  return dst;
}

// Dense CPU, CUDA and webgpu tensors may trade metadata as CPU and CUDA ones do, so
// Module.to("webgpu") moves parameters in place (`param.data = moved`): tied weights stay
// one Parameter. (c10 lists only its own backends as dense.)
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](c10::DispatchKeySet ks) {
    return ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
           ks.has_any(c10::DispatchKeySet({c10::BackendComponent::CPUBit,
                                           c10::BackendComponent::CUDABit,
                                           c10::BackendComponent::PrivateUse1Bit}));
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self.key_set()) && dense(from.key_set()));
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(self.to(c10::kCPU));
}

// ---- fill ----------------------------------------------------------------------------

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  if (!is_elementwise_native(self.scalar_type())) {
    self.copy_(at::empty({}, self.options().device(c10::kCPU)).fill_(value));
    return self;
  }
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .add_output(self)
                  .resize_outputs(false)
                  .build();
  Compute c = compute_type_of(self.scalar_type());
  // Convert as the CPU does: checked (an out-of-range value raises "value cannot be
  // converted to type uint8_t without overflow"), and rounded once, to the tensor's dtype.
  // The CPU skips the range check for one-element tensors of some dtypes (scalar_tensor
  // of 2**40 in float16 is inf): take those values from a CPU fill.
  c10::Scalar v;
  if (self.numel() == 1) {
    v = at::empty({}, self.options().device(c10::kCPU)).fill_(value).item();
  } else if (self.is_complex()) {
    v = value;  // scalar_bits rounds both parts to float
  } else {
    AT_DISPATCH_ALL_TYPES_AND3(c10::kHalf, c10::kBFloat16, c10::kBool, self.scalar_type(),
                               "fill_webgpu", [&] { v = c10::Scalar(value.to<scalar_t>()); });
  }
  launch_on_iterator(iter, "fill", c, scalar_bits(v, c));
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

}  // namespace

// See without_view_flags(): copies resolve neg/conj views themselves.
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  // Views the CPU fallback cannot serve (a view must share the device storage).
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
}

}  // namespace twgpu::aten
