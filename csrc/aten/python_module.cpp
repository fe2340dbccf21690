// torch_webgpu._C: the few functions the Python package needs (torch.webgpu.*). Kept on
// plain pybind11 types so this unit does not pull in torch's Python headers.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aten/sync_debug.h"
#include "aten/cpu_fallback.h"
#include "aten/generator.h"
#include "aten/python_errors.h"
#include "aten/webgpu_tensor.h"
#include "kernels/adapter_kind.h"
#include "kernels/matmul.h"
#include "kernels/gemm_autotune.h"
#include "kernels/wgsl_library.h"

namespace py = pybind11;

namespace twgpu::aten {
int keep_cuda_as_accelerator();  // cuda_coexistence.cpp
void set_sdpa_output_follows_query(bool follows);  // ops_attention.cpp

namespace {

py::dict memory_stats() {
  py::dict d;
  if (!Context::initialized()) return d;
  RuntimeLock lock;
  const PoolStats& s = lock.ctx().pool().stats();
  d["allocated_bytes"] = s.allocated;
  d["reserved_bytes"] = s.reserved;
  d["peak_allocated_bytes"] = s.peak_allocated;
  d["peak_reserved_bytes"] = s.peak_reserved;
  d["requested_bytes"] = s.requested;
  d["num_allocs"] = s.num_allocs;
  d["num_frees"] = s.num_frees;
  d["num_device_allocs"] = s.num_device_allocs;
  d["num_device_frees"] = s.num_device_frees;
  d["num_alloc_retries"] = s.num_alloc_retries;
  return d;
}

py::dict device_properties() {
  return guarded([] {
    RuntimeLock lock;
    const AdapterDescription& a = lock.ctx().adapter();
    const DeviceCapabilities& c = lock.ctx().caps();
    py::dict d;
    d["name"] = a.name;
    d["vendor"] = a.vendor;
    d["architecture"] = a.architecture;
    d["driver"] = a.description;
    d["backend"] = a.backend;
    // Graph replays encode and submit on a thread of their own (submit_worker.h).
    d["async_submits"] = lock.ctx().async_submits();
    d["adapter_type"] = a.adapter_type;
    d["compatibility_mode"] = a.compatibility_mode;
    d["shader_f16"] = c.shader_f16;
    d["subgroups"] = c.subgroups;
    d["subgroup_min_size"] = a.subgroup_min_size;
    d["subgroup_max_size"] = a.subgroup_max_size;
    d["subgroup_size"] = c.subgroup_size;
    d["timestamp_query"] = c.timestamp_query;
    d["max_buffer_size"] = c.max_buffer_size;
    d["max_storage_buffer_binding_size"] = c.max_storage_binding_size;
    d["max_storage_buffers_per_shader_stage"] = c.max_storage_buffers_per_stage;
    d["max_compute_workgroup_storage_size"] = c.max_workgroup_storage;
    d["max_compute_invocations_per_workgroup"] = c.max_workgroup_invocations;
    d["max_compute_workgroups_per_dimension"] = c.max_workgroups_per_dimension;
    return d;
  });
}

}  // namespace

void register_profiler_bindings(py::module_& m);  // python_profiler.cpp
void register_random_bindings(py::module_& m);    // python_random.cpp

void register_memory_bindings(py::module_& m);  // python_memory.cpp
void register_stream_bindings(py::module_& m);  // python_streams.cpp
void register_graph_bindings(py::module_& m);   // python_graphs.cpp
void register_wgsl_bindings(py::module_& m);    // python_wgsl.cpp
}  // namespace twgpu::aten

#ifdef TWGPU_HAVE_ENGINE
namespace twgpu::engine {
void register_engine_bindings(py::module_& m);  // csrc/engine/python/engine_bindings.cpp
}
#endif

PYBIND11_MODULE(_C, m) {
  using namespace twgpu;
  using namespace twgpu::aten;
  m.doc() = "torch_webgpu native core";
  register_memory_bindings(m);
  register_stream_bindings(m);
  register_graph_bindings(m);
  register_wgsl_bindings(m);
#ifdef TWGPU_HAVE_ENGINE
  engine::register_engine_bindings(m);
#endif
  m.def("is_available", [] { return Context::available(); });
  m.def("is_initialized", [] { return Context::initialized(); });
  m.def("init", [] { guarded([] { Context::get(); }); });
  m.def("synchronize", [] {
    guarded([] {
      RuntimeLock lock;
      lock.ctx().recorder().synchronize();
    });
  });
  m.def("device_properties", &device_properties);
  m.def("memory_stats", &memory_stats);
  m.def("reset_peak_memory_stats", [] { reset_peak_stats(); });
  m.def("empty_cache", [] {
    if (!Context::initialized()) return;
    guarded([] {
      RuntimeLock lock;
      lock.ctx().pool().empty_cache();
    });
  });
  m.def("dispatch_stats", [] {
    py::dict d;
    if (!Context::initialized()) return d;
    RuntimeLock lock;
    d["dispatches"] = lock.ctx().recorder().dispatches_recorded();
    d["submits"] = lock.ctx().recorder().submits();
    d["pipelines"] = lock.ctx().pipelines().size();
    d["bind_groups_made"] = lock.ctx().pipelines().bind_groups_made();
    d["host_waits"] = lock.ctx().waits();  // read-backs and synchronize: the host waiting on the GPU
    d["host_wait_us"] = lock.ctx().waited_ns() / 1000;
    // Graph replays handed to the submit thread, and how long this thread then waited for
    // one before a later queue operation (submit_worker.h).
    const bool worker = lock.ctx().async_submits();
    d["async_replays"] = worker ? lock.ctx().submit_worker().jobs() : 0;
    d["async_replay_wait_us"] = worker ? lock.ctx().submit_worker().waited_ns() / 1000 : 0;
    return d;
  });
  // Whether torch.ops.webgpu.linear_group is one dispatch here (the compile pass's test).
  // False before the device starts: the pass's uuid asks while Inductor keys any graph's
  // cache entry, a CPU or CUDA one included, which must not start (or need) an adapter.
  m.def("_linear_group_fuses", [] {
    if (!Context::initialized()) return false;
    return guarded([] {
      RuntimeLock lock;
      return linear_group_fuses(lock.ctx());
    });
  });
  // Benchmarks only: the eager submit policy (max dispatches per submit, first batch after
  // a read-back; 0 = no ramp), switched within one process so that A/Bs share its noise.
  m.def("_set_eager_batches", [](uint32_t max_batch, uint32_t first_batch, uint32_t flush_us) {
    guarded([&] {
      RuntimeLock lock;
      lock.ctx().recorder().set_batches(max_batch, first_batch, flush_us);
    });
  }, py::arg("max_batch"), py::arg("first_batch"), py::arg("flush_us") = 0);
  // Benchmarks only: dispatches in a graph replay's first submit (as
  // TORCH_WEBGPU_REPLAY_FIRST_BATCH); returns the previous value.
  m.def("_set_replay_first_batch", [](uint32_t n) {
    return guarded([&] {
      RuntimeLock lock;
      const uint32_t before = lock.ctx().recorder().replay_first_batch();
      lock.ctx().recorder().set_replay_first_batch(n);
      return before;
    });
  }, py::arg("n"));
  // Benchmarks only: how long a wait on the GPU polls before it blocks (us; 0: never
  // polls), switched within one process like the submit policy; returns the previous one.
  m.def("_set_spin_wait_us", [](uint64_t us) {
    return guarded([&] {
      RuntimeLock lock;
      const uint64_t before = lock.ctx().spin_wait_us();
      lock.ctx().set_spin_wait_us(us);
      return before;
    });
  }, py::arg("us"));
  // torch.webgpu.set_sync_debug_mode / get_sync_debug_mode (aten/sync_debug.h).
  m.def("_set_sync_debug_mode", [](int mode) { set_sync_debug_mode(mode); }, py::arg("mode"));
  m.def("_get_sync_debug_mode", [] { return sync_debug_mode(); });
  // GEMM autotuning (kernels/gemm_autotune.h): on/off (returns the previous setting), the
  // shapes tuned so far with their variants, and forgetting them.
  m.def("_set_gemm_autotune", [](bool on) { return guarded([&] { return set_gemm_autotune(on); }); },
        py::arg("on"));
  m.def("_gemm_autotune_choices", [] { return guarded([] { return gemm_autotune_choices(); }); });
  m.def("_clear_gemm_autotune", [] { guarded([] { clear_gemm_autotune(); }); });
  // Whether the adapter runs workgroups on CPU cores (adapter_kind.h; the env override
  // included): generated kernels pick their workgroup shapes by it as eager kernels do.
  m.def("_software_adapter", [] {
    return guarded([] {
      RuntimeLock lock;
      return software_adapter(lock.ctx());
    });
  });
  // The embedded WGSL library, file stem -> text (csrc/kernels/wgsl/), in include order.
  m.def("_wgsl_library", [] {
    py::dict d;
    for (const auto& file : wgsl::library()) d[file.name] = file.text;
    return d;
  });
  m.def("fallback_ops_seen", &fallback_ops_seen);
  m.def("reset_fallback_ops_seen", &reset_fallback_ops_seen);
  m.def("_keep_cuda_as_accelerator", &keep_cuda_as_accelerator,
        "Keep CUDA torch's accelerator (returns the call slots redirected)");
  m.def("_sdpa_output_follows_query", &set_sdpa_output_follows_query,
        "Fused attention outputs in q's dim order (else contiguous), as torch's meta does");
  register_profiler_bindings(m);
  register_random_bindings(m);
  m.def("_simulate_device_loss", [] {
    RuntimeLock lock;
    lock.ctx().simulate_device_loss();
  });
}
