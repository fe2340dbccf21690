// The device allocator: hands PyTorch storages backed by pooled WGPUBuffers, with
// synthetic device addresses as data pointers, and reports the pool's statistics to
// torch.accelerator / torch.webgpu memory APIs.
#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>

#include "aten/webgpu_tensor.h"
#include "runtime/device_memory.h"

namespace twgpu::aten {

std::optional<DType> to_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return DType::Float32;
    case c10::kHalf: return DType::Float16;
    case c10::kBFloat16: return DType::BFloat16;
    case c10::kLong: return DType::Int64;
    case c10::kInt: return DType::Int32;
    case c10::kShort: return DType::Int16;
    case c10::kChar: return DType::Int8;
    case c10::kByte: return DType::UInt8;
    case c10::kBool: return DType::Bool;
    case c10::kDouble: return DType::Float64;
    case c10::kComplexFloat: return DType::Complex64;
    case c10::kComplexDouble: return DType::Complex128;
    default: return std::nullopt;
  }
}

DType to_dtype_or_throw(c10::ScalarType t) {
  auto d = to_dtype(t);
  TORCH_CHECK_NOT_IMPLEMENTED(d.has_value(), "torch_webgpu: dtype ", t,
                              " is not supported on the WebGPU device");
  return *d;
}

bool is_native_compute(c10::ScalarType t) {
  auto d = to_dtype(t);
  return d && is_computable(*d);
}

DeviceRef device_ref(const at::TensorBase& t) {
  // Kernels see every tensor they touch through here: one on another device is the
  // mixed-device call CUDA's wrappers reject, with their message.
  TORCH_CHECK(t.device().type() == kDeviceType,
              "Expected all tensors to be on the same device, but found at least two devices, ",
              c10::Device(kDeviceType, 0), " and ", t.device(), "!");
  DeviceRef r;
  r.dtype = to_dtype_or_throw(t.scalar_type());
  Allocation* a = allocation_of(t);
  if (!a) return r;
  r.buffer = a->buffer;
  r.offset = byte_offset_of(t) / element_size(r.dtype);
  return r;
}

bool any_stored_only(std::initializer_list<const at::TensorBase*> tensors) {
  for (const at::TensorBase* t : tensors) {
    if (!t->defined()) continue;
    if (t->device().is_cpu() && t->dim() == 0) continue;
    if (!is_native_compute(t->scalar_type())) return true;
  }
  return false;
}

void rethrow(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::OutOfMemory: TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    case ErrorKind::Unsupported: TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
    case ErrorKind::InvalidArgument: TORCH_CHECK_VALUE(false, e.what());
    default: TORCH_CHECK(false, e.what());
  }
}

void delete_allocation(void* ctx) {
  if (!ctx) return;
  try {
    RuntimeLock lock;
    lock.ctx().pool().release(static_cast<Allocation*>(ctx));
  } catch (...) {
    // Freeing must not throw (destructors); a lost device keeps its buffers.
  }
}

Allocation* allocation_at(const void* address) {
  if (!address || !Context::initialized()) return nullptr;
  RuntimeLock lock;
  return lock.ctx().pool().find(reinterpret_cast<uint64_t>(address));
}

namespace {

// Peaks the pool does not keep (live allocation count, live buffers, requested bytes),
// tracked here for torch.accelerator.memory_stats(). Guarded by the runtime lock.
struct ExtraPeaks {
  uint64_t allocations = 0, segments = 0, requested = 0;
  void update(const PoolStats& s) {
    allocations = std::max(allocations, s.num_allocs - s.num_frees);
    segments = std::max(segments, s.num_device_allocs - s.num_device_frees);
    requested = std::max(requested, s.requested);
  }
  void reset(const PoolStats& s) {
    allocations = s.num_allocs - s.num_frees;
    segments = s.num_device_allocs - s.num_device_frees;
    requested = s.requested;
  }
} g_peaks;

// The pool's running totals when reset_accumulated_memory_stats last ran: totals are
// reported relative to it, so live counts (allocs - frees) stay right across a reset.
// Guarded by the runtime lock.
PoolStats g_accumulated_base;

class WebGPUAllocator final : public c10::DeviceAllocator {
  static void check_index(c10::DeviceIndex device) {
    TORCH_CHECK(device == 0 || device == -1, "torch_webgpu: invalid device index ",
                static_cast<int>(device), " (there is 1 WebGPU device)");
  }

 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::Device device(kDeviceType, 0);
    if (nbytes == 0) return {nullptr, nullptr, &delete_allocation, device};
    Allocation* a = nullptr;
    TWGPU_TRY
    RuntimeLock lock;
    a = lock.ctx().pool().allocate(nbytes);
    g_peaks.update(lock.ctx().pool().stats());
    TWGPU_CATCH
    return {reinterpret_cast<void*>(a->address), a, &delete_allocation, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "torch_webgpu: raw copy_data between device pointers is not supported; "
                       "copy tensors instead");
  }

  bool initialized() override { return Context::initialized(); }

  void emptyCache(c10::MempoolId_t) override {
    if (!Context::initialized()) return;
    TWGPU_TRY
    RuntimeLock lock;
    lock.ctx().pool().empty_cache();
    TWGPU_CATCH
  }

  void recordStream(const c10::DataPtr&, c10::Stream) override {}  // one in-order queue

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_index(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    if (!Context::initialized()) return out;
    RuntimeLock lock;
    const PoolStats& s = lock.ctx().pool().stats();
    auto fill = [](c10::CachingDeviceAllocator::StatArray& a, int64_t current, int64_t peak,
                   int64_t allocated, int64_t freed) {
      for (auto& stat : a) {
        stat.current = current;
        stat.peak = peak;
        stat.allocated = allocated;
        stat.freed = freed;
      }
    };
    const PoolStats& base = g_accumulated_base;
    fill(out.allocated_bytes, s.allocated, s.peak_allocated,
         s.allocated_total - base.allocated_total, s.freed_total - base.freed_total);
    fill(out.reserved_bytes, s.reserved, s.peak_reserved,
         s.reserved_total - base.reserved_total, s.released_total - base.released_total);
    fill(out.active_bytes, s.allocated, s.peak_allocated,
         s.allocated_total - base.allocated_total, s.freed_total - base.freed_total);
    g_peaks.update(s);
    fill(out.requested_bytes, s.requested, g_peaks.requested, 0, 0);
    fill(out.allocation, s.num_allocs - s.num_frees, g_peaks.allocations,
         s.num_allocs - base.num_allocs, s.num_frees - base.num_frees);
    fill(out.segment, s.num_device_allocs - s.num_device_frees, g_peaks.segments,
         s.num_device_allocs - base.num_device_allocs,
         s.num_device_frees - base.num_device_frees);
    out.num_alloc_retries = s.num_alloc_retries - base.num_alloc_retries;
    out.num_ooms = s.num_ooms - base.num_ooms;
    return out;
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_index(device);
    TWGPU_TRY
    RuntimeLock lock;
    DeviceMemory m = device_memory(lock.ctx());
    return {m.free, m.total};
    TWGPU_CATCH
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_index(device);
    if (!Context::initialized()) return;
    RuntimeLock lock;
    g_accumulated_base = lock.ctx().pool().stats();
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_index(device);
    if (!Context::initialized()) return;
    reset_peak_stats();
  }
};

WebGPUAllocator g_allocator;

}  // namespace

c10::Allocator* webgpu_allocator() { return &g_allocator; }

void reset_peak_stats() {
  if (!Context::initialized()) return;
  RuntimeLock lock;
  lock.ctx().pool().reset_peak();
  g_peaks.reset(lock.ctx().pool().stats());
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace twgpu::aten
