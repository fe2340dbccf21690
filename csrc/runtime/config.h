// Settings read once from the environment (documented in README.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace twgpu {

struct Config {
  std::string backend;           // TORCH_WEBGPU_BACKEND: vulkan|opengl|opengles|metal|d3d12|...
  bool compat = false;           // TORCH_WEBGPU_COMPAT=1: request the compatibility feature level
  bool default_limits = false;   // TORCH_WEBGPU_LIMITS=default: only the spec's default limits
  bool force_fallback = false;   // TORCH_WEBGPU_FORCE_FALLBACK_ADAPTER=1
  bool debug = false;            // TORCH_WEBGPU_DEBUG=1: log adapter and device
  // TORCH_WEBGPU_SUBGROUPS=0: reductions combine through workgroup memory even where the
  // adapter has subgroup operations (to compare the two).
  bool subgroups = true;
  std::string dump_shaders_dir;  // TORCH_WEBGPU_DUMP_SHADERS=dir
  uint32_t max_batch = 256;      // TORCH_WEBGPU_MAX_BATCH=N: dispatches per submit
  // TORCH_WEBGPU_REPLAY_FIRST_BATCH=N: dispatches in a graph replay's first submit (later
  // submits double up to max_batch); a large N submits a replay at once.
  uint32_t replay_first_batch = 16;
  // TORCH_WEBGPU_EAGER_FIRST_BATCH=N: dispatches in eager code's first submit after the GPU
  // was seen idle (a read-back); later submits double up to max_batch. Unset: max_batch
  // (no ramp): on an H100, 16 and 64 changed eager decode less than its run-to-run spread
  // (docs/PERFORMANCE.md).
  uint32_t eager_first_batch = 0;
  // TORCH_WEBGPU_EAGER_FLUSH_US=N: eager work recorded for more than N microseconds (from
  // its batch's first dispatch) is submitted at the next dispatch, so the GPU runs it while
  // the host records the rest (a read-back otherwise finds the whole step unsubmitted).
  // 0: off (batches by count only).
  uint32_t eager_flush_us = 0;
  // TORCH_WEBGPU_ASYNC_REPLAY=1: a graph replay encodes and submits on a thread of its own
  // where the backend allows (submit_worker.h). Off by default: on NVIDIA's Vulkan driver
  // it made compiled decode no faster (Dawn's submit holds the device lock that every call
  // of the other thread then waits for; docs/PERFORMANCE.md).
  bool async_replay = false;
  // TORCH_WEBGPU_SPIN_WAIT_US=N: a wait on the GPU (read-back, synchronize) polls the queue
  // for up to N us before it blocks in the driver's fence wait. -1 (unset): the adapter's
  // default (Context::spin_wait_us: hardware adapters spin, CPU adapters, whose cores run
  // the work being waited for, never do).
  int64_t spin_wait_us = -1;
  // TORCH_WEBGPU_GEMM_AUTOTUNE=1: matrix products time their variants per shape
  // (kernels/gemm_autotune.h); torch.compile's max-autotune turns it on for its graphs.
  bool gemm_autotune = false;
  // TORCH_WEBGPU_MAX_BINDING_BYTES=N: plan kernels as if a storage binding held at most N
  // bytes (tests of tensors larger than one binding with small tensors); 0: the adapter's.
  uint64_t max_binding_bytes = 0;
  // TORCH_WEBGPU_ALLOC_GROWTH=N: a request that outgrew a cached buffer (a tensor growing
  // step by step) gets a buffer N% larger than its bucket (BufferPool::set_growth); 0: off.
  uint32_t alloc_growth_percent = 50;
  // TORCH_WEBGPU_DAWN_TOGGLES=a,b,-c: Dawn device toggles to turn on (a, b) and off (c), for
  // experiments such as skip_validation or disable_robustness.
  std::vector<std::string> dawn_toggles_on, dawn_toggles_off;

  static const Config& get();
};

}  // namespace twgpu
