// Captured graphs (torch.webgpu.graph / WebGPUGraph, CUDA graphs' counterpart).
//
// While a graph captures, the CommandRecorder hands it every dispatch, copy and upload
// instead of encoding them, and nothing runs (as on CUDA: the outputs hold whatever was
// in their memory until the first replay). A host read-back raises, naming the running
// ATen op. capture end() bakes what was recorded: every uniform struct at its own aligned
// offset of one graph-owned uniform buffer, uploads snapshotted into one graph-owned
// buffer, one bind group per distinct binding set. replay() then only encodes:
// no allocation, no ATen dispatch, no pipeline or bind-group lookup.
//
// Random draws: a Philox fill captured draws its numbers anew at every replay, as on CUDA.
// The generator reports each reservation made while capturing (draw_philox) and the fill
// marks its dispatch (mark_philox_dispatch); replay() takes the capture's whole block
// count from the generator, as eager code would, and writes the seed and each dispatch's
// moved counter into its uniforms before encoding.
//
// Memory: allocations made during capture come from the graph's PrivatePool (shared by
// graphs given the same pool id), so eager code never reuses a block a replay writes.
// Buffers of the pool's and of tensors from outside it are held by an added reference
// and pinned in the BufferPool; replay() refuses when an outside tensor was freed since
// (its allocation is no longer live, or was handed out again).
#pragma once
#include <webgpu/webgpu.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/pipeline_cache.h"

namespace twgpu {

class Context;
struct Allocation;
struct PrivatePool;

class CapturedGraph {
 public:
  explicit CapturedGraph(Context& ctx) : ctx_(ctx) {}
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // All methods run under the runtime lock. begin() raises when any graph is already
  // capturing (nested capture, or another thread's) or this one holds a capture.
  // pool_id 0: a pool of its own; otherwise the pool shared under that id.
  void begin(uint64_t pool_id);
  // bake = false keeps what was recorded on the host, unbaked (no replay): for reading it
  // out with recorded_steps() (the engine's web bundle), then reset().
  void end(bool bake = true);
  // Abandons a capture that failed: recorded steps are dropped, the pool is released.
  void abort();
  void replay();
  void reset();
  // Points a captured graph at other tensors of the same layout in place of tensors from
  // outside its pool (HF generate's new KV cache of a seen shape), instead of a new
  // capture. `moves` pairs the device address a tensor had at capture with its
  // replacement's; the graph then names (and holds) the new buffers, bind groups rebuilt.
  // An unchanged address only refreshes that tensor's liveness (its block was freed and
  // handed to the new tensor); a tensor whose buffer the graph never binds is skipped.
  // Returns false, changing nothing, where a move does not fit: an address in no buffer of
  // the pool or in one of the graph's own pool, another offset
  // in its buffer, a replacement smaller than it or too small for a binding, one the graph
  // already names for something else, two tensors onto one buffer, or a captured tensor
  // still alive (it keeps its graph: two caches used in turn keep a graph each).
  bool rebind(const std::vector<std::pair<uint64_t, uint64_t>>& moves);

  bool capturing() const { return capturing_; }
  bool captured() const { return baked_; }
  uint64_t pool_id() const { return pool_id_; }
  size_t num_dispatches() const { return dispatches_.size(); }
  size_t num_steps() const { return steps_.size(); }
  // Host time of the last replay's encoding and submits: all of it, and the part spent in
  // wgpuQueueSubmit (on GL backends the driver runs the work inside the submit). With the
  // submit thread, that of the last replay it finished.
  uint64_t last_replay_ns() const { return last_replay_ns_.load(std::memory_order_relaxed); }
  uint64_t last_submit_ns() const { return last_submit_ns_.load(std::memory_order_relaxed); }

  // A copy of one recorded step, for writing a capture out. A dispatch: its pipeline
  // (WGSL, binding kinds), buffers and windows in binding order, uniform bytes, grid. A
  // copy: src -> dst. A write: `data` -> dst (src null).
  struct StepRecord {
    bool is_dispatch = false;
    const Pipeline* pipeline = nullptr;
    std::vector<WGPUBuffer> buffers;
    std::vector<BufferWindow> windows;
    std::vector<uint8_t> uniforms;
    uint32_t groups[3] = {0, 0, 0};
    WGPUBuffer src = nullptr;
    uint64_t src_offset = 0;
    WGPUBuffer dst = nullptr;
    uint64_t dst_offset = 0;
    uint64_t size = 0;
    std::vector<uint8_t> data;
  };
  // Every step in order; only between end(false) and reset() (raises otherwise).
  std::vector<StepRecord> recorded_steps() const;

  // ---- called by the CommandRecorder while this graph captures -----------------------
  void record_dispatch(const Pipeline& p, const WGPUBuffer* buffers, const void* uniforms,
                       uint32_t gx, uint32_t gy, uint32_t gz, const BufferWindow* windows);
  void record_copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset,
                   uint64_t size);
  void record_write(WGPUBuffer dst, uint64_t offset, const void* data, uint64_t size);
  // The message of the error a host read-back raises during capture.
  std::string host_read_message() const;

  // ---- random draws while this graph captures ----------------------------------------
  // `reserve(n)` takes n Philox blocks from a generator: (seed, first block).
  using PhiloxReserve = std::function<std::pair<uint64_t, uint64_t>(uint64_t)>;
  // A reservation of `blocks` blocks at (seed, first) from generator `source`. Raises for
  // a second generator or a changed seed in one capture (a replay could not redo them).
  void draw_philox(const void* source, uint64_t seed, uint64_t first, uint64_t blocks,
                   PhiloxReserve reserve);
  // The next dispatch recorded holds Philox key `seed` and counter `counter` in its
  // uniform words key_word .. key_word + 3 (key lo, hi, counter lo, hi).
  void mark_philox_dispatch(uint32_t key_word, uint64_t seed, uint64_t counter);
  size_t num_random_dispatches() const { return philox_slots_.size(); }

  // A fresh id for a pool graphs may share (torch.webgpu.graph_pool_handle()).
  static uint64_t new_pool_id();
  // The graph capturing now, or null; readable without the lock (the generator asks).
  static CapturedGraph* active();

 private:
  struct Dispatch {
    WGPUComputePipeline pipeline;
    const Pipeline* desc;        // for the bind-group layout at bake time
    uint32_t first_buffer;       // into buffers_/windows_
    uint64_t uniform_offset;     // into uniforms_host_ (and the uniform buffer)
    uint32_t groups[3];
    WGPUBindGroup bind_group = nullptr;  // set by bake()
  };
  struct Copy {
    WGPUBuffer src;  // null: the snapshot buffer
    uint64_t src_offset;
    WGPUBuffer dst;
    uint64_t dst_offset;
    uint64_t size;
  };
  struct Step {
    bool is_copy;
    uint32_t index;  // into dispatches_ or copies_
  };
  struct Held {
    Allocation* allocation;  // null: a buffer the pool did not make
    uint64_t generation;
    uint64_t requested;      // the bytes its tensor asked for at capture
    bool outside;            // not from this graph's pool: replay checks it is still live
  };

  struct PhiloxSlot {
    uint32_t dispatch;  // into dispatches_
    uint32_t key_word;  // first of its four Philox words in the dispatch's uniforms
    uint64_t counter;   // its counter, relative to the capture's first reserved block
  };

  void hold(WGPUBuffer buffer);
  void bake();
  // Takes the capture's blocks from the generator and writes the draws' new key and
  // counters into the uniform buffer (queue writes, before this replay's submits).
  void redraw_philox();
  void make_bind_groups();
  void release_all();
  void check_inputs_alive() const;
  // Encodes every step after `encoder`'s commands (null: none) and submits them in
  // batches; on the submit thread unless profiled. Raises nothing when not profiled.
  void encode_and_submit(WGPUCommandEncoder encoder, bool profiled);

  Context& ctx_;
  bool capturing_ = false;
  bool baked_ = false;
  uint64_t pool_id_ = 0;
  std::shared_ptr<PrivatePool> pool_;

  std::vector<Step> steps_;
  std::vector<Dispatch> dispatches_;
  std::vector<Copy> copies_;
  std::vector<WGPUBuffer> buffers_;
  std::vector<BufferWindow> windows_;
  std::vector<uint8_t> uniforms_host_;
  std::vector<uint8_t> snapshot_host_;
  std::unordered_map<WGPUBuffer, Held> held_;  // every buffer named, with an added ref
  std::vector<PhiloxSlot> philox_slots_;
  const void* philox_source_ = nullptr;  // the generator drawn from (null: none)
  PhiloxReserve philox_reserve_;
  uint64_t philox_seed_ = 0, philox_base_ = 0, philox_end_ = 0;  // blocks [base, end)
  bool philox_pending_ = false;  // mark_philox_dispatch awaits its dispatch
  PhiloxSlot pending_slot_{};
  uint64_t pending_seed_ = 0;

  WGPUBuffer uniform_buffer_ = nullptr;
  WGPUBuffer snapshot_buffer_ = nullptr;
  std::vector<WGPUBindGroup> bind_groups_;  // owned, one per distinct binding set
  std::atomic<uint64_t> last_replay_ns_{0};  // written by the submit thread
  std::atomic<uint64_t> last_submit_ns_{0};
};

}  // namespace twgpu
