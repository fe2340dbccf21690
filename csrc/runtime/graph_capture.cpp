#include "runtime/graph_capture.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "runtime/buffer_pool.h"
#include "runtime/command_recorder.h"
#include "runtime/config.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/profiler.h"

namespace twgpu {
namespace {

std::atomic<CapturedGraph*> g_active{nullptr};
uint64_t g_next_pool_id = 1;  // guarded by the runtime lock
// Pools by id; a pool lives while a graph holds it (graph_pool_handle ids are only names).
std::map<uint64_t, std::weak_ptr<PrivatePool>> g_pools;

std::shared_ptr<PrivatePool> pool_for(Context& ctx, uint64_t id) {
  auto it = g_pools.find(id);
  if (it != g_pools.end())
    if (auto pool = it->second.lock()) return pool;
  std::shared_ptr<PrivatePool> pool(new PrivatePool(), [&ctx, id](PrivatePool* p) {
    // Runs when the last graph using it resets, under the runtime lock.
    ctx.pool().release_private(p);
    auto it = g_pools.find(id);
    if (it != g_pools.end() && it->second.expired()) g_pools.erase(it);
    delete p;
  });
  g_pools[id] = pool;
  return pool;
}

}  // namespace

uint64_t CapturedGraph::new_pool_id() { return g_next_pool_id++; }

CapturedGraph* CapturedGraph::active() { return g_active.load(std::memory_order_acquire); }

CapturedGraph::~CapturedGraph() {
  try {
    if (capturing_) abort();
    reset();
  } catch (...) {
    // A lost device keeps its objects; destructors must not throw.
  }
}

void CapturedGraph::begin(uint64_t pool_id) {
  if (active())
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: another graph is capturing (a nested capture, or a capture on "
         "another thread); the device captures one graph at a time");
  if (baked_ || !steps_.empty())
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: this graph already holds a capture; call reset() before "
         "capturing into it again");
  // Work recorded before the capture is not the graph's: submit it now.
  ctx_.recorder().flush();
  pool_id_ = pool_id ? pool_id : new_pool_id();
  pool_ = pool_for(ctx_, pool_id_);
  ctx_.pool().set_capture_pool(pool_.get());
  capturing_ = true;
  g_active.store(this, std::memory_order_release);
}

void CapturedGraph::end(bool bake_now) {
  if (!capturing_)
    fail(ErrorKind::Internal, "torch.webgpu graphs: capture_end() without capture_begin()");
  g_active.store(nullptr, std::memory_order_release);
  ctx_.pool().set_capture_pool(nullptr);
  capturing_ = false;
  if (bake_now) bake();
}

std::vector<CapturedGraph::StepRecord> CapturedGraph::recorded_steps() const {
  if (capturing_ || baked_)
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: recorded_steps() needs a capture ended with end(false)");
  // Written out, a draw would repeat the capture's numbers on every run.
  if (!philox_slots_.empty())
    fail(ErrorKind::Unsupported,
         "torch.webgpu graphs: the captured program draws random numbers (dropout in training, "
         "rand*, ...), which a written-out program cannot redraw; export it in eval mode or "
         "without random ops");
  std::vector<StepRecord> out;
  out.reserve(steps_.size());
  for (const Step& step : steps_) {
    StepRecord r;
    if (step.is_copy) {
      const Copy& c = copies_[step.index];
      r.src = c.src;
      r.src_offset = c.src ? c.src_offset : 0;
      r.dst = c.dst;
      r.dst_offset = c.dst_offset;
      r.size = c.size;
      if (!c.src)
        r.data.assign(snapshot_host_.begin() + c.src_offset,
                      snapshot_host_.begin() + c.src_offset + c.size);
    } else {
      const Dispatch& d = dispatches_[step.index];
      r.is_dispatch = true;
      r.pipeline = d.desc;
      r.buffers.assign(buffers_.begin() + d.first_buffer,
                       buffers_.begin() + d.first_buffer + d.desc->num_storage);
      r.windows.assign(windows_.begin() + d.first_buffer,
                       windows_.begin() + d.first_buffer + d.desc->num_storage);
      r.uniforms.assign(uniforms_host_.begin() + d.uniform_offset,
                        uniforms_host_.begin() + d.uniform_offset + d.desc->uniform_bytes);
      for (int k = 0; k < 3; ++k) r.groups[k] = d.groups[k];
    }
    out.push_back(std::move(r));
  }
  return out;
}

void CapturedGraph::abort() {
  if (capturing_) {
    g_active.store(nullptr, std::memory_order_release);
    ctx_.pool().set_capture_pool(nullptr);
    capturing_ = false;
  }
  reset();
}

void CapturedGraph::hold(WGPUBuffer buffer) {
  if (held_.count(buffer)) return;
  wgpuBufferAddRef(buffer);
  Held h{ctx_.pool().find_buffer(buffer), 0, 0, false};
  if (h.allocation) {
    h.allocation->pins++;
    h.generation = h.allocation->generation;
    h.requested = h.allocation->requested;
    h.outside = h.allocation->owner != pool_.get();
  }
  held_.emplace(buffer, h);
}

void CapturedGraph::record_dispatch(const Pipeline& p, const WGPUBuffer* buffers,
                                    const void* uniforms, uint32_t gx, uint32_t gy, uint32_t gz,
                                    const BufferWindow* windows) {
  Dispatch d;
  d.pipeline = p.pipeline;
  d.desc = &p;  // pipelines live as long as the cache, which outlives every graph
  d.first_buffer = static_cast<uint32_t>(buffers_.size());
  d.groups[0] = gx;
  d.groups[1] = gy;
  d.groups[2] = gz;
  for (uint32_t i = 0; i < p.num_storage; ++i) {
    hold(buffers[i]);
    buffers_.push_back(buffers[i]);
    windows_.push_back(windows ? windows[i] : BufferWindow{});
  }
  d.uniform_offset = uniforms_host_.size();
  if (p.uniform_bytes) {
    const uint64_t align = ctx_.caps().min_uniform_offset_alignment;
    const uint64_t slot = (p.uniform_bytes + align - 1) / align * align;
    uniforms_host_.resize(uniforms_host_.size() + slot, 0);
    std::memcpy(uniforms_host_.data() + d.uniform_offset, uniforms, p.uniform_bytes);
  }
  if (philox_pending_) {
    philox_pending_ = false;
    // The marked words must hold what the fill set: anything else is a kernel that
    // marked one dispatch and recorded another.
    uint32_t words[4] = {0, 0, 0, 0};
    const uint64_t at = 4ull * pending_slot_.key_word;
    if (at + sizeof(words) <= p.uniform_bytes)
      std::memcpy(words, static_cast<const uint8_t*>(uniforms) + at, sizeof(words));
    const uint64_t counter = pending_slot_.counter;
    if (at + sizeof(words) > p.uniform_bytes || words[0] != static_cast<uint32_t>(pending_seed_) ||
        words[1] != static_cast<uint32_t>(pending_seed_ >> 32) || words[2] != static_cast<uint32_t>(counter) ||
        words[3] != static_cast<uint32_t>(counter >> 32) || counter < philox_base_)
      fail(ErrorKind::Internal, "torch.webgpu graphs: a random kernel's dispatch does not hold the Philox "
                                "words it declared");
    philox_slots_.push_back({static_cast<uint32_t>(dispatches_.size()), pending_slot_.key_word,
                             counter - philox_base_});
  }
  steps_.push_back({false, static_cast<uint32_t>(dispatches_.size())});
  dispatches_.push_back(d);
}

void CapturedGraph::draw_philox(const void* source, uint64_t seed, uint64_t first, uint64_t blocks,
                                PhiloxReserve reserve) {
  if (!philox_source_) {
    philox_source_ = source;
    philox_reserve_ = std::move(reserve);
    philox_seed_ = seed;
    philox_base_ = philox_end_ = first;
  } else if (source != philox_source_) {
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: operation " + DispatchProfiler::running_ops() +
             " draws from a second generator; a captured graph draws from one generator");
  } else if (seed != philox_seed_ || first < philox_end_) {
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: the generator was seeded or its state set during capture "
         "(operation " + DispatchProfiler::running_ops() + "); seed it before capturing");
  }
  philox_end_ = first + blocks;
}

void CapturedGraph::mark_philox_dispatch(uint32_t key_word, uint64_t seed, uint64_t counter) {
  pending_slot_ = {0, key_word, counter};
  pending_seed_ = seed;
  philox_pending_ = true;
}

void CapturedGraph::redraw_philox() {
  const auto [seed, first] = philox_reserve_(philox_end_ - philox_base_);
  ctx_.queue_gate();  // a replay still on the submit thread reads the present words
  for (const PhiloxSlot& slot : philox_slots_) {
    const uint64_t counter = first + slot.counter;
    const uint32_t words[4] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                               static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32)};
    wgpuQueueWriteBuffer(ctx_.queue(), uniform_buffer_,
                         dispatches_[slot.dispatch].uniform_offset + 4ull * slot.key_word, words,
                         sizeof(words));
  }
}

void CapturedGraph::record_copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst,
                                uint64_t dst_offset, uint64_t size) {
  hold(src);
  hold(dst);
  steps_.push_back({true, static_cast<uint32_t>(copies_.size())});
  copies_.push_back({src, src_offset, dst, dst_offset, size});
}

void CapturedGraph::record_write(WGPUBuffer dst, uint64_t offset, const void* data,
                                 uint64_t size) {
  // The bytes as they are now: replay copies them again from the snapshot buffer.
  hold(dst);
  const uint64_t at = snapshot_host_.size();
  snapshot_host_.resize(at + (size + 3) / 4 * 4, 0);
  std::memcpy(snapshot_host_.data() + at, data, size);
  steps_.push_back({true, static_cast<uint32_t>(copies_.size())});
  copies_.push_back({nullptr, at, dst, offset, size});
}

std::string CapturedGraph::host_read_message() const {
  const std::string ops = DispatchProfiler::running_ops();
  return "torch.webgpu graphs: operation " + (ops.empty() ? std::string("(unknown)") : ops) +
         " needs the host during capture: it reads device memory back (.item(), .cpu(), "
         "printing, data-dependent shapes such as nonzero), but captured work does not run "
         "until replay(). Move it out of the captured region.";
}

void CapturedGraph::bake() {
  ctx_.touch_gl();
  ctx_.queue_gate();  // its uploads are queue writes
  WGPUDevice device = ctx_.device();
  if (!uniforms_host_.empty()) {
    WGPUBufferDescriptor desc = {};
    desc.size = uniforms_host_.size();
    desc.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
    uniform_buffer_ = wgpuDeviceCreateBuffer(device, &desc);
    wgpuQueueWriteBuffer(ctx_.queue(), uniform_buffer_, 0, uniforms_host_.data(),
                         uniforms_host_.size());
  }
  if (!snapshot_host_.empty()) {
    WGPUBufferDescriptor desc = {};
    desc.size = snapshot_host_.size();
    desc.usage = WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    snapshot_buffer_ = wgpuDeviceCreateBuffer(device, &desc);
    wgpuQueueWriteBuffer(ctx_.queue(), snapshot_buffer_, 0, snapshot_host_.data(),
                         snapshot_host_.size());
  }
  make_bind_groups();
  // The recorded bytes now live on the device.
  std::vector<uint8_t>().swap(uniforms_host_);
  std::vector<uint8_t>().swap(snapshot_host_);
  baked_ = true;
  ctx_.check_errors();
}

void CapturedGraph::make_bind_groups() {
  for (WGPUBindGroup g : bind_groups_) wgpuBindGroupRelease(g);
  bind_groups_.clear();
  // One bind group per distinct (layout, buffers, windows): layers of a model repeat
  // kernels over different weights, but elementwise chains over scratch repeat exactly.
  using Key = std::tuple<WGPUBindGroupLayout, std::vector<WGPUBuffer>, std::vector<uint64_t>>;
  std::map<Key, WGPUBindGroup> unique;
  for (Dispatch& d : dispatches_) {
    const Pipeline& p = *d.desc;
    const WGPUBuffer* bufs = buffers_.data() + d.first_buffer;
    const BufferWindow* wins = windows_.data() + d.first_buffer;
    Key key{p.layout, std::vector<WGPUBuffer>(bufs, bufs + p.num_storage), {}};
    for (uint32_t i = 0; i < p.num_storage; ++i) {
      std::get<2>(key).push_back(wins[i].offset);
      std::get<2>(key).push_back(wins[i].size);
    }
    auto it = unique.find(key);
    if (it == unique.end()) {
      WGPUBindGroup group = ctx_.pipelines().create_bind_group(p, bufs, uniform_buffer_, wins);
      bind_groups_.push_back(group);
      it = unique.emplace(std::move(key), group).first;
    }
    d.bind_group = it->second;
  }
}

bool CapturedGraph::rebind(const std::vector<std::pair<uint64_t, uint64_t>>& moves) {
  if (capturing_ || !baked_)
    fail(ErrorKind::Internal, "torch.webgpu graphs: rebind() needs a captured graph");
  ctx_.queue_gate();  // a queued replay still reads buffers_ and the bind groups
  BufferPool& pool = ctx_.pool();
  std::unordered_map<WGPUBuffer, Allocation*> swap;  // held buffer -> its replacement
  std::vector<Allocation*> refreshed;
  for (const auto& move : moves) {
    Allocation* from = pool.find(move.first);
    Allocation* to = pool.find(move.second);
    // A tensor the graph never binds (an input only viewed, or unused) needs no move.
    if (from && !held_.count(from->buffer)) continue;
    if (!from || !to || !to->live || to->owner == pool_.get()) return false;
    auto held = held_.find(from->buffer);
    if (!held->second.outside) return false;
    if (move.first - from->address != move.second - to->address ||
        to->requested < held->second.requested)
      return false;
    // A tensor still alive keeps its graph (two caches in turn keep a graph each).
    if (from != to && from->live && from->generation == held->second.generation) return false;
    if (from == to) {
      refreshed.push_back(to);
      continue;
    }
    auto entry = swap.emplace(from->buffer, to);
    if (entry.first->second != to) return false;  // views of one buffer sent apart
  }
  std::unordered_map<WGPUBuffer, int> targets;
  for (const auto& s : swap) {
    WGPUBuffer to = s.second->buffer;
    // Named already for a tensor that stays, or the target of two buffers: one buffer
    // would play two parts.
    if ((held_.count(to) && !swap.count(to)) || ++targets[to] > 1) return false;
  }
  auto fits = [](const Allocation* a, uint64_t offset, uint64_t size) {
    return offset + size <= a->capacity;
  };
  for (size_t k = 0; k < buffers_.size(); ++k) {
    auto s = swap.find(buffers_[k]);
    if (s != swap.end() && !fits(s->second, windows_[k].offset, windows_[k].size)) return false;
  }
  for (const Copy& c : copies_) {
    auto src = c.src ? swap.find(c.src) : swap.end();
    auto dst = swap.find(c.dst);
    if ((src != swap.end() && !fits(src->second, c.src_offset, c.size)) ||
        (dst != swap.end() && !fits(dst->second, c.dst_offset, c.size)))
      return false;
  }
  // Every move fits: apply them together (a new cache may reuse the old one's blocks in
  // another order).
  ctx_.touch_gl();
  auto moved = [&](WGPUBuffer b) {
    auto s = swap.find(b);
    return s == swap.end() ? b : s->second->buffer;
  };
  for (WGPUBuffer& b : buffers_) b = moved(b);
  for (Copy& c : copies_) {
    if (c.src) c.src = moved(c.src);
    c.dst = moved(c.dst);
  }
  for (const auto& s : swap) {
    Held& h = held_.at(s.first);
    if (h.allocation) h.allocation->pins--;
    wgpuBufferRelease(s.first);
    held_.erase(s.first);
  }
  for (const auto& s : swap) hold(s.second->buffer);
  for (Allocation* a : refreshed) {
    Held& h = held_.at(a->buffer);
    h.generation = a->generation;
    h.requested = a->requested;
  }
  make_bind_groups();
  ctx_.check_errors();
  return true;
}

void CapturedGraph::check_inputs_alive() const {
  for (const auto& entry : held_) {
    const Held& h = entry.second;
    if (!h.allocation || !h.outside) continue;
    if (!h.allocation->live || h.allocation->generation != h.generation)
      fail(ErrorKind::Internal,
           "torch.webgpu graphs: replay() after a tensor the graph reads or writes was freed "
           "(its memory came from outside the graph's pool, e.g. a static input or a "
           "weight); keep every tensor used in the capture alive while the graph lives");
  }
}

void CapturedGraph::replay() {
  if (capturing_)
    fail(ErrorKind::Internal, "torch.webgpu graphs: replay() while this graph is capturing");
  if (active())
    fail(ErrorKind::Internal, "torch.webgpu graphs: replay() while another graph is capturing");
  if (!baked_)
    fail(ErrorKind::Internal,
         "torch.webgpu graphs: replay() before a capture ended (or after reset())");
  check_inputs_alive();
  ctx_.touch_gl();
  if (!philox_slots_.empty()) redraw_philox();
  CommandRecorder& recorder = ctx_.recorder();
  // Under torch.webgpu.profiler a replay is timed as eager work is (profiler.h), on this
  // thread.
  const bool profiled = DispatchProfiler::get().active();
  // Eager work recorded before the replay runs before it: in the replay's first submit
  // (a decode step's input copies; a submit costs tens of microseconds on some drivers).
  // (adopt_encoder() and flush() first wait for a replay still on the submit thread.)
  WGPUCommandEncoder encoder = nullptr;
  if (profiled)
    recorder.flush();
  else
    encoder = recorder.adopt_encoder();
  recorder.note_submit();
  if (!profiled && ctx_.async_submits()) {
    // Encoding and submitting cost ~3 us of host time per dispatch on some drivers: the
    // submit thread does it while this thread returns to the caller (opt-in).
    ctx_.submit_worker().post([this, encoder] { encode_and_submit(encoder, false); });
    return;
  }
  encode_and_submit(encoder, profiled);
  ctx_.check_errors();
}

void CapturedGraph::encode_and_submit(WGPUCommandEncoder encoder, bool profiled) {
  CommandRecorder& recorder = ctx_.recorder();
  DispatchProfiler& profiler = DispatchProfiler::get();
  const bool gpu_times = profiled && profiler.timing() == ProfilerTiming::Gpu;
  const uint64_t start_ns = DispatchProfiler::now_ns();
  uint64_t submit_ns = 0;
  WGPUDevice device = ctx_.device();
  WGPUQueue queue = ctx_.queue();
  const uint32_t max_batch = Config::get().max_batch;
  // The first submits are short and grow to max_batch: the GPU starts on the graph's
  // first dispatches while the rest are still being encoded (a decode step ends in a
  // read-back, so every replay starts with an idle GPU).
  uint32_t batch_limit = std::min(recorder.replay_first_batch(), max_batch);
  if (!encoder) encoder = wgpuDeviceCreateCommandEncoder(device, nullptr);
  WGPUComputePassEncoder pass = nullptr;
  WGPUComputePipeline bound = nullptr;
  uint32_t in_batch = 0;
  auto end_pass = [&] {
    if (!pass) return;
    wgpuComputePassEncoderEnd(pass);
    wgpuComputePassEncoderRelease(pass);
    pass = nullptr;
    bound = nullptr;
  };
  struct OpScope {  // replayed dispatches show under this op in profiles
    bool on;
    explicit OpScope(bool o) : on(o) { if (on) DispatchProfiler::push_op("webgpu::graph_replay"); }
    ~OpScope() { if (on) DispatchProfiler::pop_op(); }
  } op_scope(profiled);
  auto submit = [&] {
    end_pass();
    if (gpu_times) profiler.resolve(encoder);
    WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder, nullptr);
    wgpuCommandEncoderRelease(encoder);
    const uint64_t before = DispatchProfiler::now_ns();
    wgpuQueueSubmit(queue, 1, &commands);
    submit_ns += DispatchProfiler::now_ns() - before;
    wgpuCommandBufferRelease(commands);
    encoder = nullptr;
    if (gpu_times) profiler.collect(before);
  };
  for (const Step& step : steps_) {
    if (!encoder) encoder = wgpuDeviceCreateCommandEncoder(device, nullptr);
    if (step.is_copy) {
      const Copy& c = copies_[step.index];
      end_pass();
      wgpuCommandEncoderCopyBufferToBuffer(encoder, c.src ? c.src : snapshot_buffer_,
                                           c.src_offset, c.dst, c.dst_offset, c.size);
      continue;
    }
    const Dispatch& d = dispatches_[step.index];
    uint64_t host_start = 0;
    if (profiled) {
      end_pass();
      if (!gpu_times) {  // earlier work must not count towards this dispatch's time
        submit();
        recorder.synchronize();
        encoder = wgpuDeviceCreateCommandEncoder(device, nullptr);
        host_start = DispatchProfiler::now_ns();
      } else {
        const dawn::PassTimestampWrites* writes = profiler.next_timestamp_writes(d.desc->label);
        if (!writes) {  // the query set is full: its batch goes first
          submit();
          encoder = wgpuDeviceCreateCommandEncoder(device, nullptr);
          writes = profiler.next_timestamp_writes(d.desc->label);
        }
        WGPUComputePassDescriptor desc = {};
        desc.timestampWrites = reinterpret_cast<const WGPUComputePassTimestampWrites*>(writes);
        pass = wgpuCommandEncoderBeginComputePass(encoder, &desc);
      }
    }
    if (!pass) pass = wgpuCommandEncoderBeginComputePass(encoder, nullptr);
    if (bound != d.pipeline) {
      wgpuComputePassEncoderSetPipeline(pass, d.pipeline);
      bound = d.pipeline;
    }
    if (d.desc->uniform_bytes) {
      const uint32_t offset = static_cast<uint32_t>(d.uniform_offset);
      wgpuComputePassEncoderSetBindGroup(pass, 0, d.bind_group, 1, &offset);
    } else {
      wgpuComputePassEncoderSetBindGroup(pass, 0, d.bind_group, 0, nullptr);
    }
    wgpuComputePassEncoderDispatchWorkgroups(pass, d.groups[0], d.groups[1], d.groups[2]);
    if (profiled && !gpu_times) {
      submit();
      recorder.synchronize();
      profiler.add_host_record(d.desc->label, host_start, DispatchProfiler::now_ns());
      continue;
    }
    if (profiled) end_pass();
    // Batches as eager code does: some drivers stall on very long passes.
    if (++in_batch >= batch_limit) {
      submit();
      in_batch = 0;
      batch_limit = std::min(batch_limit * 2, max_batch);
    }
  }
  if (encoder) submit();
  last_replay_ns_ = DispatchProfiler::now_ns() - start_ns;
  last_submit_ns_ = submit_ns;
}

void CapturedGraph::release_all() {
  ctx_.touch_gl();
  ctx_.queue_gate();  // a queued replay may still name these objects
  for (WGPUBindGroup g : bind_groups_) wgpuBindGroupRelease(g);
  bind_groups_.clear();
  if (uniform_buffer_) wgpuBufferRelease(uniform_buffer_);
  if (snapshot_buffer_) wgpuBufferRelease(snapshot_buffer_);
  uniform_buffer_ = snapshot_buffer_ = nullptr;
  for (auto& entry : held_) {
    if (entry.second.allocation) entry.second.allocation->pins--;
    wgpuBufferRelease(entry.first);
  }
  held_.clear();
}

void CapturedGraph::reset() {
  if (capturing_)
    fail(ErrorKind::Internal, "torch.webgpu graphs: reset() while this graph is capturing");
  // Recorded-but-unsubmitted work never names graph objects (replay submits its own).
  release_all();
  steps_.clear();
  dispatches_.clear();
  copies_.clear();
  philox_slots_.clear();
  philox_source_ = nullptr;
  philox_reserve_ = nullptr;
  philox_pending_ = false;
  buffers_.clear();
  windows_.clear();
  uniforms_host_.clear();
  snapshot_host_.clear();
  baked_ = false;
  pool_.reset();  // the last graph of a pool gives its blocks back
}

}  // namespace twgpu
