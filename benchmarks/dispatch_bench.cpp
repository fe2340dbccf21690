// What our runtime (CommandRecorder, PipelineCache, uniform arena, RuntimeLock) costs on
// top of plain Dawn calls doing the same work on the same device and queue:
//   1. CPU cost per trivial dispatch (batched in one pass; recording alone; one submit
//      each),
//   2. the submit + wait round trip of one tiny dispatch,
//   3. the bandwidth of a vec4<u32> copy kernel.
// Prints a markdown table (ours | raw Dawn | ratio) ready for docs/PERFORMANCE.md.
// Ratios are ours / raw: below 1 is better for times, above 1 is better for GB/s.
//
//   ./build/dispatch_bench [--bytes N] [--dispatches N] [--reps N]
//   (--bytes: size of each copy buffer, clamped to the storage binding limit)
#include <webgpu/webgpu.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/graph_capture.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultCopyBytes = 64ull << 20;  // fits llvmpipe's 128 MiB binding limit
constexpr uint32_t kRoundTrips = 50;                // round trips per timed repetition
constexpr double kCopyBatchSeconds = 0.2;           // target length of one timed copy batch
constexpr uint32_t kCopyThreads = 256;              // workgroup size of the copy kernel

struct Options {
  uint64_t bytes = kDefaultCopyBytes;
  uint32_t dispatches = 2000;
  int reps = 10;
};

[[noreturn]] void usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [--bytes N] [--dispatches N] [--reps N]\n", prog);
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage(argv[0]);
    unsigned long long value = std::strtoull(argv[++i], nullptr, 10);
    if (value == 0) usage(argv[0]);
    if (flag == "--bytes") o.bytes = value;
    else if (flag == "--dispatches") o.dispatches = static_cast<uint32_t>(value);
    else if (flag == "--reps") o.reps = static_cast<int>(value);
    else usage(argv[0]);
  }
  return o;
}

template <typename F>
double seconds(F&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Pair {
  double ours = 1e30;
  double raw = 1e30;
};

// Best (smallest) of `reps` timings of each path. The paths alternate so machine noise
// hits both alike. One untimed warm-up run of each comes first, to keep first-use costs
// (shader compilation, bind groups, staging growth) out, and is checked: reset() clears
// the output before it and verify() checks what that path wrote.
Pair compare(int reps, const std::function<void()>& reset,
             const std::function<void(const char*)>& verify,
             const std::function<double()>& ours, const std::function<double()>& raw) {
  reset();
  ours();
  verify("ours");
  reset();
  raw();
  verify("raw Dawn");
  Pair best;
  for (int r = 0; r < reps; ++r) {
    best.ours = std::min(best.ours, ours());
    best.raw = std::min(best.raw, raw());
  }
  return best;
}

// ---- Kernels (WGSL), shared by both paths ------------------------------------------

// One invocation touching one word: the dispatch costs only what recording it costs.
const char* kTrivialWgsl = R"(
struct Params { value: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(1)
fn main() {
  dst[0] = src[0] + params.value;
}
)";
struct TrivialParams {
  uint32_t value = 0;
  uint32_t pad[3] = {};
};

// 2-D grid: past 65535 workgroups of 256 vec4s (256 MiB) one dimension is not enough.
const char* kCopyWgsl = R"(
struct Params { count: u32, row_threads: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> params: Params;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.y * params.row_threads + gid.x;
  if (i < params.count) {
    dst[i] = src[i];
  }
}
)";
struct CopyParams {
  uint32_t count = 0;        // vec4s to copy
  uint32_t row_threads = 0;  // invocations per grid row
  uint32_t pad[2] = {};
};

ProgramDesc program(const char* label, const char* wgsl, uint32_t uniform_bytes) {
  ProgramDesc d;
  d.label = label;
  d.wgsl = wgsl;
  d.storage = {Access::Read, Access::ReadWrite};
  d.uniform_bytes = uniform_bytes;
  return d;
}

// ---- Raw Dawn: the same work spelled out in plain webgpu.h calls --------------------

WGPUBuffer create_buffer(WGPUDevice device, uint64_t size, WGPUBufferUsage usage) {
  WGPUBufferDescriptor desc = {};
  desc.size = size;
  desc.usage = usage;
  return wgpuDeviceCreateBuffer(device, &desc);
}

struct RawProgram {
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
};

// Same binding convention as PipelineCache: read-only storage at 0, read_write storage at
// 1, a dynamic-offset uniform at 2 (with `immediate_bytes`: no uniform binding, that much
// immediate data instead). Uses Dawn's struct layouts (see dawn_extensions.h).
RawProgram build_raw_program(WGPUDevice device, const char* wgsl, uint32_t uniform_bytes,
                             uint32_t immediate_bytes = 0) {
  dawn::BindGroupLayoutEntry entries[3] = {};
  const WGPUBufferBindingType types[3] = {WGPUBufferBindingType_ReadOnlyStorage,
                                          WGPUBufferBindingType_Storage,
                                          WGPUBufferBindingType_Uniform};
  const uint32_t count = immediate_bytes ? 2 : 3;
  for (uint32_t i = 0; i < count; ++i) {
    entries[i].binding = i;
    entries[i].visibility = WGPUShaderStage_Compute;
    entries[i].buffer.type = types[i];
  }
  entries[2].buffer.hasDynamicOffset = 1;
  entries[2].buffer.minBindingSize = uniform_bytes;
  WGPUBindGroupLayoutDescriptor bgl_desc = {};
  bgl_desc.entryCount = count;
  bgl_desc.entries = reinterpret_cast<const WGPUBindGroupLayoutEntry*>(entries);
  RawProgram raw;
  raw.layout = wgpuDeviceCreateBindGroupLayout(device, &bgl_desc);

  dawn::PipelineLayoutDescriptor pl_desc = {};
  pl_desc.bindGroupLayoutCount = 1;
  pl_desc.bindGroupLayouts = &raw.layout;
  pl_desc.immediateSize = immediate_bytes;
  WGPUPipelineLayout pipeline_layout = wgpuDeviceCreatePipelineLayout(
      device, reinterpret_cast<const WGPUPipelineLayoutDescriptor*>(&pl_desc));
  WGPUShaderSourceWGSL source = {};
  source.chain.sType = WGPUSType_ShaderSourceWGSL;
  source.code = WGPUStringView{wgsl, WGPU_STRLEN};
  WGPUShaderModuleDescriptor sm_desc = {};
  sm_desc.nextInChain = &source.chain;
  WGPUShaderModule module = wgpuDeviceCreateShaderModule(device, &sm_desc);
  WGPUComputePipelineDescriptor cp_desc = {};
  cp_desc.layout = pipeline_layout;
  cp_desc.compute.module = module;
  cp_desc.compute.entryPoint = WGPUStringView{"main", WGPU_STRLEN};
  raw.pipeline = wgpuDeviceCreateComputePipeline(device, &cp_desc);
  wgpuShaderModuleRelease(module);
  wgpuPipelineLayoutRelease(pipeline_layout);
  return raw;
}

// Without `uniforms`: the two storage bindings only (build_raw_program's immediate form).
WGPUBindGroup create_bind_group(WGPUDevice device, WGPUBindGroupLayout layout, WGPUBuffer src,
                                WGPUBuffer dst, WGPUBuffer uniforms = nullptr,
                                uint64_t uniform_bytes = 0) {
  WGPUBindGroupEntry entries[3] = {};
  const WGPUBuffer buffers[3] = {src, dst, uniforms};
  const uint32_t count = uniforms ? 3 : 2;
  for (uint32_t i = 0; i < count; ++i) {
    entries[i].binding = i;
    entries[i].buffer = buffers[i];
    entries[i].size = i == 2 ? uniform_bytes : WGPU_WHOLE_SIZE;
  }
  WGPUBindGroupDescriptor desc = {};
  desc.layout = layout;
  desc.entryCount = count;
  desc.entries = entries;
  return wgpuDeviceCreateBindGroup(device, &desc);
}

// Waits for the queue as CommandRecorder::synchronize() does: a 4-byte copy recorded after
// the work, then a map of its destination (this Dawn's onSubmittedWorkDone callback does
// not match our header).
class RawFence {
 public:
  explicit RawFence(WGPUDevice device)
      : source_(create_buffer(device, 256, WGPUBufferUsage_CopySrc)),
        readback_(create_buffer(device, 256, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst)) {}
  ~RawFence() {
    wgpuBufferRelease(source_);
    wgpuBufferRelease(readback_);
  }
  RawFence(const RawFence&) = delete;
  RawFence& operator=(const RawFence&) = delete;

  void record(WGPUCommandEncoder encoder) {
    wgpuCommandEncoderCopyBufferToBuffer(encoder, source_, 0, readback_, 0, 4);
  }
  void wait(WGPUInstance instance) {
    bool ok = false;
    WGPUBufferMapCallbackInfo cb = {};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView, void* u1, void*) {
      *static_cast<bool*>(u1) = status == WGPUMapAsyncStatus_Success;
    };
    cb.userdata1 = &ok;
    WGPUFutureWaitInfo info = {wgpuBufferMapAsync(readback_, WGPUMapMode_Read, 0, 4, cb), 0};
    wgpuInstanceWaitAny(instance, 1, &info, UINT64_MAX);
    if (!ok) fail(ErrorKind::Internal, "dispatch_bench: raw fence map failed");
    wgpuBufferUnmap(readback_);
  }

 private:
  WGPUBuffer source_;
  WGPUBuffer readback_;
};

void submit(WGPUQueue queue, WGPUCommandEncoder encoder) {
  WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder, nullptr);
  wgpuCommandEncoderRelease(encoder);
  wgpuQueueSubmit(queue, 1, &commands);
  wgpuCommandBufferRelease(commands);
}

// Zeroes a buffer in queue order, so a later check sees only what the next path wrote.
void clear_buffer(Context& ctx, WGPUBuffer buffer, uint64_t size) {
  RuntimeLock lock;
  ctx.recorder().flush();
  WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
  wgpuCommandEncoderClearBuffer(encoder, buffer, 0, size);
  submit(ctx.queue(), encoder);
}

void end_pass(WGPUComputePassEncoder pass) {
  wgpuComputePassEncoderEnd(pass);
  wgpuComputePassEncoderRelease(pass);
}

// ---- Trivial dispatches: per-dispatch CPU cost and the round trip -------------------

// Both paths bind the same two pool buffers; each has its own pipeline and uniforms.
struct TrivialBench {
  Context& ctx;
  uint32_t n;
  const Pipeline* ours = nullptr;
  WGPUBuffer buffers[2] = {};
  RawProgram raw;
  WGPUBuffer raw_uniforms = nullptr;  // one 256-byte-aligned slot per dispatch
  WGPUBindGroup raw_group = nullptr;
  std::vector<uint8_t> raw_host;      // host copy of raw_uniforms, uploaded per submit
  uint32_t stride;

  TrivialBench(Context& c, uint32_t dispatches, Allocation* src, Allocation* dst)
      : ctx(c), n(dispatches), stride(c.caps().min_uniform_offset_alignment) {
    RuntimeLock lock;
    ours = &ctx.pipelines().get("bench_trivial", [] {
      return program("bench_trivial", kTrivialWgsl, sizeof(TrivialParams));
    });
    buffers[0] = src->buffer;
    buffers[1] = dst->buffer;
    raw = build_raw_program(ctx.device(), kTrivialWgsl, sizeof(TrivialParams));
    raw_uniforms = create_buffer(ctx.device(), uint64_t(n) * stride,
                                 WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst);
    raw_group = create_bind_group(ctx.device(), raw.layout, buffers[0], buffers[1], raw_uniforms,
                                  sizeof(TrivialParams));
    raw_host.resize(uint64_t(n) * stride);
    ctx.check_errors();
  }
  ~TrivialBench() {
    wgpuBindGroupRelease(raw_group);
    wgpuBufferRelease(raw_uniforms);
    wgpuComputePipelineRelease(raw.pipeline);
    wgpuBindGroupLayoutRelease(raw.layout);
  }

  // Callers hold the runtime lock, as every entry point from torch does.
  void ours_record(uint32_t value) {
    TrivialParams params;
    params.value = value;
    ctx.recorder().dispatch(*ours, buffers, &params, 1);
  }

  // What one eager op pays in our runtime: the lock, then CommandRecorder::dispatch.
  void ours_dispatch(uint32_t value) {
    RuntimeLock lock;
    ours_record(value);
  }

  void ours_flush() {
    RuntimeLock lock;
    ctx.recorder().flush();
  }

  // The hand-written equivalent: fill the uniform slot, set pipeline and bind group with
  // the slot's dynamic offset, dispatch.
  void raw_dispatch(WGPUComputePassEncoder pass, uint32_t value, uint32_t slot) {
    TrivialParams params;
    params.value = value;
    std::memcpy(raw_host.data() + uint64_t(slot) * stride, &params, sizeof(params));
    uint32_t offset = slot * stride;
    wgpuComputePassEncoderSetPipeline(pass, raw.pipeline);
    wgpuComputePassEncoderSetBindGroup(pass, 0, raw_group, 1, &offset);
    wgpuComputePassEncoderDispatchWorkgroups(pass, 1, 1, 1);
  }

  void raw_upload_and_submit(WGPUCommandEncoder encoder, uint32_t slots) {
    wgpuQueueWriteBuffer(ctx.queue(), raw_uniforms, 0, raw_host.data(), uint64_t(slots) * stride);
    submit(ctx.queue(), encoder);
  }

  // Drains the queue outside the timed region so each repetition starts idle.
  void drain() {
    RuntimeLock lock;
    ctx.recorder().synchronize();
  }

  double ours_batched() {
    double s = seconds([&] {
      for (uint32_t i = 0; i < n; ++i) ours_dispatch(i);
      ours_flush();
    });
    drain();
    return s / n;
  }

  // The same n dispatches captured once into a graph (torch.webgpu.graph's CapturedGraph),
  // then replayed: the graph's prebuilt bind groups and uniforms, encoded and submitted in
  // its growing batches. Set up outside the timed region.
  std::unique_ptr<CapturedGraph> graph;
  void capture() {
    RuntimeLock lock;
    graph = std::make_unique<CapturedGraph>(ctx);
    graph->begin(0);
    for (uint32_t i = 0; i < n; ++i) ours_record(i);
    graph->end();
  }

  double ours_replay() {
    double s = seconds([&] {
      RuntimeLock lock;
      graph->replay();
    });
    drain();
    return s / n;
  }

  double raw_batched() {
    double s = seconds([&] {
      WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
      WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
      for (uint32_t i = 0; i < n; ++i) raw_dispatch(pass, i, i);
      end_pass(pass);
      raw_upload_and_submit(encoder, n);
    });
    drain();
    return s / n;
  }

  // Recording alone, without the submit: the part of a dispatch our layer adds to. On
  // llvmpipe the submit runs the dispatches on the CPU and hides it. Batches of at most
  // TORCH_WEBGPU_MAX_BATCH, so our recorder never flushes inside a timed loop; about n
  // dispatches in all, so one repetition is long enough to time reliably.
  uint32_t record_count() const { return std::min(n, Config::get().max_batch); }
  uint32_t record_batches() const { return (n + record_count() - 1) / record_count(); }

  double ours_record_only() {
    const uint32_t count = record_count();
    double s = 0;
    for (uint32_t b = 0; b < record_batches(); ++b) {
      s += seconds([&] {
        for (uint32_t i = 0; i < count; ++i) ours_dispatch(i);
      });
      ours_flush();
    }
    drain();
    return s / (count * record_batches());
  }

  double raw_record_only() {
    const uint32_t count = record_count();
    double s = 0;
    for (uint32_t b = 0; b < record_batches(); ++b) {
      WGPUCommandEncoder encoder = nullptr;
      WGPUComputePassEncoder pass = nullptr;
      s += seconds([&] {
        encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
        pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
        for (uint32_t i = 0; i < count; ++i) raw_dispatch(pass, i, i);
      });
      end_pass(pass);
      raw_upload_and_submit(encoder, count);
    }
    drain();
    return s / (count * record_batches());
  }

  double ours_submit_each() {
    double s = seconds([&] {
      for (uint32_t i = 0; i < n; ++i) {
        RuntimeLock lock;
        ours_record(i);
        ctx.recorder().flush();
      }
    });
    drain();
    return s / n;
  }

  double raw_submit_each() {
    double s = seconds([&] {
      for (uint32_t i = 0; i < n; ++i) {
        WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
        WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
        raw_dispatch(pass, i, 0);
        end_pass(pass);
        raw_upload_and_submit(encoder, 1);
      }
    });
    drain();
    return s / n;
  }

  double ours_round_trip() {
    return seconds([&] {
             for (uint32_t i = 0; i < kRoundTrips; ++i) {
               RuntimeLock lock;
               ours_record(i);
               ctx.recorder().synchronize();
             }
           }) /
           kRoundTrips;
  }

  double raw_round_trip() {
    RawFence fence(ctx.device());
    return seconds([&] {
             for (uint32_t i = 0; i < kRoundTrips; ++i) {
               WGPUCommandEncoder encoder =
                   wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
               WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
               raw_dispatch(pass, i, 0);
               end_pass(pass);
               fence.record(encoder);
               raw_upload_and_submit(encoder, 1);
               fence.wait(ctx.instance());
             }
           }) /
           kRoundTrips;
  }

  void clear() { clear_buffer(ctx, buffers[1], 256); }

  // Every variant ends with a dispatch whose value is its last index.
  void check(uint32_t expected, const char* who) {
    RuntimeLock lock;
    uint32_t word = 0;
    ctx.recorder().read(buffers[1], 0, &word, sizeof(word));
    if (word != expected)
      fail(ErrorKind::Internal, std::string("dispatch_bench: ") + who + " wrote " +
                                    std::to_string(word) + ", expected " +
                                    std::to_string(expected));
  }
};

// ---- Uniforms as immediate data, against a uniform binding (raw Dawn on both sides) --

// Dawn's push constants (WGSL `var<immediate>`): the values travel in the command stream,
// so the bind group holds one buffer fewer and takes no dynamic offset. Declared here
// because the webgpu.h we compile against predates it (same arguments as Dawn's
// ProgrammableEncoder::APISetImmediateData).
extern "C" void wgpuComputePassEncoderSetImmediateData(WGPUComputePassEncoder pass,
                                                       uint32_t offset, const void* data,
                                                       size_t size);

const char* kImmediateWgsl = R"(
enable chromium_experimental_immediate;
struct Params { value: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
var<immediate> params: Params;
@compute @workgroup_size(1)
fn main() {
  dst[0] = src[0] + params.value;
}
)";

// build_raw_program's immediate-data form; null pipeline (and the device's error in
// `why`) where the device refuses it.
RawProgram build_immediate_program(Context& ctx, uint32_t immediate_bytes, std::string& why) {
  RawProgram raw = build_raw_program(ctx.device(), kImmediateWgsl, 0, immediate_bytes);
  try {
    ctx.check_errors();
  } catch (const Error& e) {
    why = e.what();
    wgpuComputePipelineRelease(raw.pipeline);
    raw.pipeline = nullptr;
  }
  return raw;
}

// n trivial dispatches cycling over `pairs` buffer pairs (a bind group each, as a decode
// step binds many tensors), recorded and submitted in one pass: with the uniforms in a
// dynamic-offset uniform binding (our convention) and as immediate data.
struct ImmediateBench {
  Context& ctx;
  uint32_t n;
  uint32_t stride;
  std::vector<Allocation*> allocs;  // src, dst of each pair
  RawProgram uniform_prog, immediate_prog;
  WGPUBuffer arena = nullptr;
  std::vector<uint8_t> arena_host;
  std::vector<WGPUBindGroup> uniform_groups, immediate_groups;

  ImmediateBench(Context& c, uint32_t dispatches, uint32_t pairs, std::string& why)
      : ctx(c), n(dispatches), stride(c.caps().min_uniform_offset_alignment) {
    RuntimeLock lock;
    immediate_prog = build_immediate_program(ctx, sizeof(TrivialParams), why);
    if (!immediate_prog.pipeline) return;
    uniform_prog = build_raw_program(ctx.device(), kTrivialWgsl, sizeof(TrivialParams));
    arena = create_buffer(ctx.device(), uint64_t(n) * stride,
                          WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst);
    arena_host.resize(uint64_t(n) * stride);
    for (uint32_t p = 0; p < pairs; ++p) {
      Allocation* src = ctx.pool().allocate(256);
      Allocation* dst = ctx.pool().allocate(256);
      allocs.push_back(src);
      allocs.push_back(dst);
      uniform_groups.push_back(create_bind_group(ctx.device(), uniform_prog.layout, src->buffer,
                                                 dst->buffer, arena, sizeof(TrivialParams)));
      immediate_groups.push_back(
          create_bind_group(ctx.device(), immediate_prog.layout, src->buffer, dst->buffer));
    }
    ctx.check_errors();
  }
  ~ImmediateBench() {
    for (auto* g : {&uniform_groups, &immediate_groups})
      for (WGPUBindGroup b : *g) wgpuBindGroupRelease(b);
    for (RawProgram* p : {&uniform_prog, &immediate_prog}) {
      if (p->pipeline) wgpuComputePipelineRelease(p->pipeline);
      if (p->layout) wgpuBindGroupLayoutRelease(p->layout);
    }
    if (arena) wgpuBufferRelease(arena);
    RuntimeLock lock;
    for (Allocation* a : allocs) ctx.pool().release(a);
  }
  bool available() const { return immediate_prog.pipeline != nullptr; }
  uint32_t pairs() const { return static_cast<uint32_t>(uniform_groups.size()); }
  WGPUBuffer last_dst() const { return allocs[2 * ((n - 1) % pairs()) + 1]->buffer; }

  // Host time of recording and submitting (wait = false), or until the GPU is done.
  double run(bool immediate, bool wait) {
    RawFence fence(ctx.device());
    double s = seconds([&] {
      WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
      WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
      for (uint32_t i = 0; i < n; ++i) {
        TrivialParams params;
        params.value = i;
        const uint32_t g = i % pairs();
        if (immediate) {
          wgpuComputePassEncoderSetPipeline(pass, immediate_prog.pipeline);
          wgpuComputePassEncoderSetBindGroup(pass, 0, immediate_groups[g], 0, nullptr);
          wgpuComputePassEncoderSetImmediateData(pass, 0, &params, sizeof(params));
        } else {
          std::memcpy(arena_host.data() + uint64_t(i) * stride, &params, sizeof(params));
          uint32_t offset = i * stride;
          wgpuComputePassEncoderSetPipeline(pass, uniform_prog.pipeline);
          wgpuComputePassEncoderSetBindGroup(pass, 0, uniform_groups[g], 1, &offset);
        }
        wgpuComputePassEncoderDispatchWorkgroups(pass, 1, 1, 1);
      }
      end_pass(pass);
      if (wait) fence.record(encoder);
      if (!immediate) wgpuQueueWriteBuffer(ctx.queue(), arena, 0, arena_host.data(), uint64_t(n) * stride);
      submit(ctx.queue(), encoder);
      if (wait) fence.wait(ctx.instance());
    });
    RuntimeLock lock;
    ctx.recorder().synchronize();
    return s / n;
  }

  void clear() {
    for (size_t a = 1; a < allocs.size(); a += 2) clear_buffer(ctx, allocs[a]->buffer, 256);
  }
  void check(const char* who) {
    RuntimeLock lock;
    uint32_t word = 0;
    ctx.recorder().read(last_dst(), 0, &word, sizeof(word));
    if (word != n - 1)
      fail(ErrorKind::Internal, std::string("dispatch_bench: ") + who + " wrote " +
                                    std::to_string(word) + ", expected " + std::to_string(n - 1));
  }
};

// ---- Copy bandwidth -----------------------------------------------------------------

struct CopyGeometry {
  uint32_t groups_x = 0;
  uint32_t groups_y = 0;
  CopyParams params;
};

// `bytes` is a multiple of 16 * kCopyThreads, so the grid has no partial workgroup.
CopyGeometry copy_geometry(uint64_t bytes, uint32_t max_groups_per_dim) {
  CopyGeometry g;
  uint64_t groups = bytes / (16 * kCopyThreads);
  g.groups_x = static_cast<uint32_t>(std::min<uint64_t>(groups, max_groups_per_dim));
  g.groups_y = static_cast<uint32_t>((groups + g.groups_x - 1) / g.groups_x);
  g.params.count = static_cast<uint32_t>(bytes / 16);
  g.params.row_threads = g.groups_x * kCopyThreads;
  return g;
}

uint32_t pattern(uint64_t word) { return static_cast<uint32_t>(word * 2654435761u) ^ 0x5bd1e995u; }

// Fills `a` in 16 MiB pieces so a 1 GiB source needs no 1 GiB host vector.
void fill_pattern(Context& ctx, Allocation* a, uint64_t bytes) {
  RuntimeLock lock;
  const uint64_t piece = std::min<uint64_t>(bytes, 16ull << 20);
  std::vector<uint32_t> host(piece / 4);
  for (uint64_t off = 0; off < bytes; off += piece) {
    uint64_t size = std::min(piece, bytes - off);
    for (uint64_t w = 0; w < size / 4; ++w) host[w] = pattern(off / 4 + w);
    ctx.recorder().write(a->buffer, off, host.data(), size);
  }
}

void check_copy(Context& ctx, Allocation* dst, uint64_t bytes, const char* who) {
  RuntimeLock lock;
  for (uint64_t word : {uint64_t(0), bytes / 8, bytes / 4 - 1}) {
    uint32_t got = 0;
    ctx.recorder().read(dst->buffer, word * 4, &got, 4);
    if (got != pattern(word))
      fail(ErrorKind::Internal, std::string("dispatch_bench: ") + who +
                                    " copy wrote a wrong word at " + std::to_string(word));
  }
}

// One pipeline (from our cache) serves both paths; raw Dawn binds it with its own
// bind group and uniform buffer and records with plain calls.
struct CopyBench {
  Context& ctx;
  uint64_t bytes;
  const Pipeline* pipeline = nullptr;
  WGPUBuffer buffers[2] = {};
  CopyGeometry geometry;
  WGPUBuffer raw_uniforms = nullptr;
  WGPUBindGroup raw_group = nullptr;
  RawFence fence;
  uint32_t repeats = 1;  // dispatches per timed batch, calibrated

  CopyBench(Context& c, uint64_t nbytes, Allocation* src, Allocation* dst)
      : ctx(c), bytes(nbytes), fence(c.device()) {
    RuntimeLock lock;
    pipeline = &ctx.pipelines().get("bench_copy_vec4", [] {
      return program("bench_copy_vec4", kCopyWgsl, sizeof(CopyParams));
    });
    buffers[0] = src->buffer;
    buffers[1] = dst->buffer;
    geometry = copy_geometry(bytes, ctx.caps().max_workgroups_per_dimension);
    raw_uniforms = create_buffer(ctx.device(), 256, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst);
    raw_group = create_bind_group(ctx.device(), pipeline->layout, buffers[0], buffers[1],
                                  raw_uniforms, sizeof(CopyParams));
    ctx.check_errors();
  }
  ~CopyBench() {
    wgpuBindGroupRelease(raw_group);
    wgpuBufferRelease(raw_uniforms);
  }

  double ours_batch(uint32_t count) {
    return seconds([&] {
      for (uint32_t r = 0; r < count; ++r) {
        RuntimeLock lock;
        ctx.recorder().dispatch(*pipeline, buffers, &geometry.params, geometry.groups_x,
                                geometry.groups_y);
      }
      RuntimeLock lock;
      ctx.recorder().synchronize();
    });
  }

  double raw_batch(uint32_t count) {
    return seconds([&] {
      WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
      WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
      uint32_t offset = 0;
      for (uint32_t r = 0; r < count; ++r) {
        wgpuComputePassEncoderSetPipeline(pass, pipeline->pipeline);
        wgpuComputePassEncoderSetBindGroup(pass, 0, raw_group, 1, &offset);
        wgpuComputePassEncoderDispatchWorkgroups(pass, geometry.groups_x, geometry.groups_y, 1);
      }
      end_pass(pass);
      fence.record(encoder);
      wgpuQueueWriteBuffer(ctx.queue(), raw_uniforms, 0, &geometry.params, sizeof(CopyParams));
      submit(ctx.queue(), encoder);
      fence.wait(ctx.instance());
    });
  }

  // Enough dispatches per batch that the final wait is small next to the copies.
  void calibrate() {
    ours_batch(1);
    double one = ours_batch(1);
    repeats = static_cast<uint32_t>(std::clamp(kCopyBatchSeconds / one, 2.0, 100.0));
  }

  double gbps(double batch_seconds) const { return 2.0 * bytes * repeats / batch_seconds / 1e9; }
};

// ---- Report -------------------------------------------------------------------------

struct Row {
  std::string metric;
  double ours;
  double raw;
};

void print_table(const std::vector<Row>& rows) {
  int width = 6;
  for (const Row& r : rows) width = std::max(width, static_cast<int>(r.metric.size()));
  std::printf("| %-*s | %10s | %10s | %14s |\n", width, "metric", "ours", "raw Dawn",
              "ratio ours/raw");
  std::printf("|%s|%s|%s|%s|\n", std::string(width + 2, '-').c_str(),
              std::string(12, '-').c_str(), std::string(12, '-').c_str(),
              std::string(16, '-').c_str());
  for (const Row& r : rows)
    std::printf("| %-*s | %10.2f | %10.2f | %14.2f |\n", width, r.metric.c_str(), r.ours, r.raw,
                r.ours / r.raw);
}

Allocation* allocate(Context& ctx, uint64_t bytes) {
  RuntimeLock lock;
  return ctx.pool().allocate(bytes);
}

std::string format_bytes(uint64_t bytes) {
  return bytes >= (1ull << 20) ? std::to_string(bytes >> 20) + " MiB"
                               : std::to_string(bytes >> 10) + " KiB";
}

int run(const Options& opt) {
  Context& ctx = Context::get();
  const AdapterDescription& a = ctx.adapter();
  const DeviceCapabilities& caps = ctx.caps();

  // A copy larger than one storage binding could not be bound whole.
  const uint64_t limit = std::min(caps.max_storage_binding_size, caps.max_buffer_size);
  uint64_t copy_bytes = std::min(opt.bytes, limit) / (16 * kCopyThreads) * (16 * kCopyThreads);
  if (copy_bytes == 0) fail(ErrorKind::InvalidArgument, "--bytes is below one workgroup's copy");

  std::printf("adapter: %s (%s, %s backend%s)\n", a.name.c_str(), a.adapter_type.c_str(),
              a.backend.c_str(), a.compatibility_mode ? ", compatibility mode" : "");
  std::printf("dispatches: %u, reps: %d (best of), TORCH_WEBGPU_MAX_BATCH: %u, copy: %s%s\n\n",
              opt.dispatches, opt.reps, Config::get().max_batch, format_bytes(copy_bytes).c_str(),
              opt.bytes > limit ? " (clamped to the storage binding limit)" : "");

  std::vector<Row> rows;
  Allocation* word_src = allocate(ctx, 256);
  Allocation* word_dst = allocate(ctx, 256);
  {
    TrivialBench t(ctx, opt.dispatches, word_src, word_dst);
    auto reset = [&] { t.clear(); };
    // Every variant's last dispatch writes its last index.
    auto expect = [&](uint32_t value) {
      return [&t, value](const char* who) { t.check(value, who); };
    };
    const uint32_t last = opt.dispatches - 1;
    Pair p = compare(opt.reps, reset, expect(last), [&] { return t.ours_batched(); },
                     [&] { return t.raw_batched(); });
    rows.push_back({"dispatch, batched in one pass (us each)", p.ours * 1e6, p.raw * 1e6});
    p = compare(opt.reps, reset, expect(t.record_count() - 1),
                [&] { return t.ours_record_only(); }, [&] { return t.raw_record_only(); });
    rows.push_back({"dispatch, recording only, " + std::to_string(t.record_count()) +
                        "/pass (us each)",
                    p.ours * 1e6, p.raw * 1e6});
    p = compare(opt.reps, reset, expect(last), [&] { return t.ours_submit_each(); },
                [&] { return t.raw_submit_each(); });
    rows.push_back({"dispatch, one submit each (us each)", p.ours * 1e6, p.raw * 1e6});
    p = compare(opt.reps, reset, expect(kRoundTrips - 1), [&] { return t.ours_round_trip(); },
                [&] { return t.raw_round_trip(); });
    rows.push_back({"submit + wait round trip (us)", p.ours * 1e6, p.raw * 1e6});
    t.capture();
    p = compare(opt.reps, reset, expect(last), [&] { return t.ours_replay(); }, [&] { return t.raw_batched(); });
    rows.push_back({"dispatch, graph replay vs raw batched (us each)", p.ours * 1e6, p.raw * 1e6});
  }

  // Raw Dawn against raw Dawn: what moving the uniforms into immediate data saves.
  std::vector<Row> immediate_rows;
  {
    // Dawn's limits put maxImmediateSize right after the last field our header knows.
    dawn::PaddedLimits limits;
    wgpuDeviceGetLimits(ctx.device(), &limits.limits);
    uint32_t max_immediate = 0;
    std::memcpy(&max_immediate,
                reinterpret_cast<const unsigned char*>(&limits.limits) +
                    offsetof(WGPULimits, maxComputeWorkgroupsPerDimension) + 4,
                4);
    std::printf("device maxImmediateSize: %u bytes\n", max_immediate);
    std::string why;
    ImmediateBench im(ctx, opt.dispatches, 64, why);
    if (!im.available()) {
      std::printf("immediate data: not available on this device (%s)\n\n", why.c_str());
    } else {
      for (bool wait : {false, true}) {
        Pair p = compare(opt.reps, [&] { im.clear(); },
                         [&](const char* who) { im.check(who); },
                         [&] { return im.run(true, wait); }, [&] { return im.run(false, wait); });
        immediate_rows.push_back(
            {std::string("dispatch over ") + std::to_string(im.pairs()) + " bind groups, " +
                 (wait ? "until done" : "record + submit") + " (us each)",
             p.ours * 1e6, p.raw * 1e6});
      }
    }
  }

  Allocation* src = allocate(ctx, copy_bytes);
  Allocation* dst = allocate(ctx, copy_bytes);
  fill_pattern(ctx, src, copy_bytes);
  {
    CopyBench c(ctx, copy_bytes, src, dst);
    c.calibrate();
    Pair p = compare(
        opt.reps, [&] { clear_buffer(ctx, dst->buffer, copy_bytes); },
        [&](const char* who) { check_copy(ctx, dst, copy_bytes, who); },
        [&] { return c.ours_batch(c.repeats); }, [&] { return c.raw_batch(c.repeats); });
    rows.push_back({"vec4 copy " + format_bytes(copy_bytes) + " x" + std::to_string(c.repeats) +
                        " (GB/s, read+write)",
                    c.gbps(p.ours), c.gbps(p.raw)});
  }
  ctx.check_errors();

  print_table(rows);
  if (!immediate_rows.empty()) {
    std::printf("\nraw Dawn, uniforms as immediate data (\"ours\" column) against a dynamic-offset "
                "uniform binding (\"raw Dawn\" column):\n");
    print_table(immediate_rows);
  }
  auto ratio = [&](size_t row) { return rows[row].ours / rows[row].raw; };
  auto verdict = [](bool ok) { return ok ? "met" : "MISSED"; };
  double batched = ratio(0), recording = ratio(1), replay = ratio(4), copy = ratio(rows.size() - 1);
  std::printf("\ntargets: per-dispatch ratio <= 1.5 (batched %.2f %s, recording only %.2f %s); "
              "graph replay <= 1.2 (%.2f %s); copy bandwidth ratio >= 0.9 (%.2f %s)\n",
              batched, verdict(batched <= 1.5), recording, verdict(recording <= 1.5), replay,
              verdict(replay <= 1.2), copy, verdict(copy >= 0.9));

  RuntimeLock lock;
  for (Allocation* alloc : {word_src, word_dst, src, dst}) ctx.pool().release(alloc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  try {
    return run(opt);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
