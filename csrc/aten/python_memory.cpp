// torch_webgpu._C functions behind torch.webgpu.memory: device memory info and the
// per-process memory fraction (enforced by the buffer pool's reserve limit).
#include <pybind11/pybind11.h>

#include <cmath>

#include "aten/webgpu_tensor.h"
#include "runtime/device_memory.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

double g_memory_fraction = 1.0;  // guarded by the runtime lock

py::dict mem_info() {
  RuntimeLock lock;
  DeviceMemory m = device_memory(lock.ctx());
  py::dict d;
  d["free"] = m.free;
  d["total"] = m.total;
  d["source"] = m.source;
  return d;
}

void set_memory_fraction(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw py::value_error("Invalid fraction value: " + std::to_string(fraction) +
                          ". Allowed range: 0~1");
  RuntimeLock lock;
  const uint64_t total = device_memory(lock.ctx()).total;
  // A limit of 0 bytes would read as "no limit" to the pool: keep one byte.
  const uint64_t limit =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::floor(fraction * double(total))));
  lock.ctx().pool().set_reserve_limit(limit);
  g_memory_fraction = fraction;
}

double get_memory_fraction() {
  RuntimeLock lock;
  return g_memory_fraction;
}

py::dict reserve_limit_info() {
  RuntimeLock lock;
  py::dict d;
  d["limit_bytes"] = lock.ctx().pool().reserve_limit();
  d["fraction"] = g_memory_fraction;
  return d;
}

// The pool's growth headroom (BufferPool::set_growth), as a fraction; returns the old one.
double set_alloc_growth(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 4.0))
    throw py::value_error("growth_headroom must be between 0 and 4, got " + std::to_string(fraction));
  RuntimeLock lock;
  const double old = lock.ctx().pool().growth();
  lock.ctx().pool().set_growth(fraction);
  return old;
}

py::list memory_segments() {
  py::list out;
  if (!Context::initialized()) return out;
  RuntimeLock lock;
  for (const BufferPool::Segment& s : lock.ctx().pool().segments()) {
    py::dict d;
    d["address"] = s.address;
    d["total_size"] = s.capacity;
    d["requested_size"] = s.requested;
    d["active"] = s.active;
    out.append(std::move(d));
  }
  return out;
}

}  // namespace

void register_memory_bindings(py::module_& m) {
  m.def("mem_get_info", &mem_info);
  m.def("set_memory_fraction", &set_memory_fraction);
  m.def("get_memory_fraction", &get_memory_fraction);
  m.def("reserve_limit_info", &reserve_limit_info);
  m.def("memory_segments", &memory_segments);
  m.def("set_alloc_growth", &set_alloc_growth);

}

}  // namespace twgpu::aten
