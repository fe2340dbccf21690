#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/ops/pointwise.h"
#include "runtime/runtime.h"

namespace twgpu::engine {

namespace {

[[noreturn]] void bad(const std::string& msg) { fail(ErrorKind::InvalidArgument, msg); }

uint64_t round4(uint64_t n) { return (n + 3) & ~uint64_t(3); }

// Resolves the arguments of one op call into device views.
std::vector<OpArg> op_args(const Program& p, const OpCall& c, std::vector<DeviceTensor>& tensors) {
  std::vector<OpArg> args;
  for (int64_t id : c.args) {
    OpArg a;
    a.value = &p.values[id];
    if (a.value->kind == ValueKind::Tensor) a.tensor = &tensors[id];
    if (a.value->kind == ValueKind::TensorList)
      for (int64_t e : a.value->ints)
        a.list.push_back(p.values[e].kind == ValueKind::Tensor ? &tensors[e] : nullptr);
    args.push_back(a);
  }
  return args;
}

}  // namespace

BufferSet::~BufferSet() { release_all(); }

WGPUBuffer BufferSet::allocate(uint64_t bytes) {
  RuntimeLock lock;
  Allocation* a = gpu_.pool().allocate(std::max<uint64_t>(round4(bytes), 4));
  held_.push_back(a);
  return a->buffer;
}

std::vector<std::pair<WGPUBuffer, uint64_t>> BufferSet::held() const {
  std::vector<std::pair<WGPUBuffer, uint64_t>> out;
  for (const Allocation* a : held_) out.emplace_back(a->buffer, a->requested);
  return out;
}

void BufferSet::release_all() {
  if (held_.empty()) return;
  RuntimeLock lock;
  for (Allocation* a : held_) gpu_.pool().release(a);
  held_.clear();
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void upload(twgpu::Context& gpu, const DeviceTensor& t, const void* data, uint64_t size) {
  if (size != t.nbytes())
    bad("tensor " + t.describe() + " holds " + std::to_string(t.nbytes()) + " bytes, got " +
        std::to_string(size));
  if (!t.is_contiguous()) bad("cannot write into the non-contiguous tensor " + t.describe());
  if (size == 0) return;
  const uint64_t byte = t.offset * static_cast<uint64_t>(element_size(t.dtype));
  RuntimeLock lock;
  if (size % 4 == 0) {
    gpu.recorder().write(t.buffer, byte, data, size);
    return;
  }
  // Writes move whole words: the tail word's other bytes are this tensor's padding.
  std::vector<uint8_t> padded(round4(size), 0);
  std::memcpy(padded.data(), data, size);
  gpu.recorder().write(t.buffer, byte, padded.data(), padded.size());
}

HostTensor download(twgpu::Context& gpu, const DeviceTensor& t) {
  if (!t.is_contiguous()) bad("cannot read the non-contiguous tensor " + t.describe());
  HostTensor h;
  h.dtype = t.dtype;
  h.shape = t.shape;
  const uint64_t size = t.nbytes();
  if (size == 0) return h;
  const uint64_t byte = t.offset * static_cast<uint64_t>(element_size(t.dtype));
  // Reads move whole words from a word boundary.
  const uint64_t start = byte & ~uint64_t(3);
  std::vector<uint8_t> words(round4(byte + size) - start);
  {
    RuntimeLock lock;
    gpu.recorder().read(t.buffer, start, words.data(), words.size());
  }
  h.data.assign(words.begin() + (byte - start), words.begin() + (byte - start) + size);
  return h;
}

void record_op(const std::string& op, std::vector<OpArg> args, std::vector<DeviceTensor*> outputs,
               BufferSet& scratch) {
  OpFactory factory = find_op(op);
  if (!factory) bad("unknown op " + op);
  RuntimeLock lock;
  OpBuilder b(op, 0, lock.ctx(), std::move(args), std::move(outputs),
              [&](uint64_t n) { return scratch.allocate(n); });
  factory(b);
  for (Launch& l : b.take()) l(lock.ctx());
}

Executable::Executable(Program program, const std::vector<uint8_t>& weights)
    : program_(std::move(program)), gpu_(Context::get()), buffers_(gpu_) {
  const Program& p = program_;
  check_program(p, weights.size());
  for (size_t i = 0; i < p.chain.size(); ++i)
    if (!find_op(p.chain[i].op))
      bad("program.json: chain[" + std::to_string(i) + "]: unknown op " + p.chain[i].op +
          " (docs/ENGINE.md lists the ops this engine runs)");
  RuntimeLock lock;
  std::vector<WGPUBuffer> pools;
  for (uint64_t size : p.pool_sizes) pools.push_back(buffers_.allocate(size));
  pool_buffers_ = pools;
  WGPUBuffer weight_buffer = nullptr;
  if (p.weights_size > 0) {
    weight_buffer = buffers_.allocate(p.weights_size);
    std::vector<uint8_t> padded(weights.begin(), weights.begin() + p.weights_size);
    padded.resize(round4(padded.size()), 0);
    gpu_.recorder().write(weight_buffer, 0, padded.data(), padded.size());
  }
  tensors_.resize(p.values.size());
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (p.values[v].kind != ValueKind::Tensor) continue;
    const TensorSpec& s = p.values[v].tensor;
    DeviceTensor& t = tensors_[v];
    t.dtype = s.dtype;
    t.shape = s.shape;
    t.strides = s.strides;
    t.offset = s.offset / static_cast<uint64_t>(element_size(s.dtype));
    if (s.storage == Storage::Pool) {
      t.buffer = pools[s.pool];
      if (s.is_state)
        states_.push_back({v, std::vector<uint8_t>(weights.begin() + s.init_offset,
                                                   weights.begin() + s.init_offset + s.nbytes())});
    } else if (s.storage == Storage::Constant) {
      // Empty constants of a program without weights still need a buffer to bind.
      if (!weight_buffer) weight_buffer = buffers_.allocate(4);
      t.buffer = weight_buffer;
      weight_buffer_ = weight_buffer;
    } else {
      t.is_view = true;
    }
  }
  reset_state();
  for (size_t i = 0; i < p.chain.size(); ++i) {
    const OpCall& c = p.chain[i];
    std::vector<DeviceTensor*> outs;
    for (int64_t o : c.outputs) outs.push_back(&tensors_[o]);
    OpBuilder b(c.op, static_cast<int64_t>(i), gpu_, op_args(p, c, tensors_), outs,
                [this](uint64_t n) { return buffers_.allocate(n); });
    find_op(c.op)(b);
    for (int64_t o : c.outputs)
      if (tensors_[o].is_view && !tensors_[o].buffer)
        bad("program.json: chain[" + std::to_string(i) + "] " + c.op + ": output value " +
            std::to_string(o) + " has no memory and the op makes no view");
    for (Launch& l : b.take()) {
      launches_.push_back(std::move(l));
      launch_ops_.push_back(static_cast<int64_t>(i));
    }
  }
  // Outputs that are strided views are read through a contiguous copy.
  for (int64_t id : p.outputs) {
    const DeviceTensor& t = tensors_[id];
    if (t.is_contiguous()) {
      readable_outputs_.push_back(t);
      continue;
    }
    DeviceTensor c = t;
    c.strides = contiguous_strides(t.shape);
    c.offset = 0;
    c.is_view = false;
    c.buffer = buffers_.allocate(c.nbytes());
    launches_.push_back(copy_launch(t, c));
    launch_ops_.push_back(-1);
    readable_outputs_.push_back(c);
  }
}

Executable::~Executable() = default;

std::unique_ptr<Executable> Executable::load(const std::string& json_text,
                                             const std::vector<uint8_t>& weights) {
  return std::make_unique<Executable>(parse_program(json_text), weights);
}

std::unique_ptr<Executable> Executable::load_dir(const std::string& dir) {
  const std::vector<uint8_t> json = read_file(dir + "/program.json");
  std::vector<uint8_t> weights;
  std::ifstream probe(dir + "/weights.bin", std::ios::binary);
  if (probe) weights = read_file(dir + "/weights.bin");
  return load(std::string(json.begin(), json.end()), weights);
}

void Executable::reset_state() {
  for (const auto& [v, bytes] : states_) upload(gpu_, tensors_[v], bytes.data(), bytes.size());
}

size_t Executable::launches_per_run() const { return launches_.size(); }

void Executable::write_inputs(const std::vector<HostTensor>& inputs) {
  if (inputs.size() != program_.inputs.size())
    bad("the program takes " + std::to_string(program_.inputs.size()) + " inputs, got " +
        std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeviceTensor& t = input(i);
    const HostTensor& h = inputs[i];
    if (h.dtype != t.dtype || h.shape != t.shape)
      bad("input " + std::to_string(i) + ": expected " + t.describe() + ", got " +
          shape_text(h.dtype, h.shape));
    if (h.data.size() != t.nbytes())
      bad("input " + std::to_string(i) + ": " + t.describe() + " needs " +
          std::to_string(t.nbytes()) + " bytes, got " + std::to_string(h.data.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) upload(gpu_, input(i), inputs[i].data.data(), inputs[i].data.size());
}

void Executable::record() {
  RuntimeLock lock;
  for (Launch& l : launches_) l(gpu_);
}

std::vector<HostTensor> Executable::read_outputs() {
  std::vector<HostTensor> out;
  for (const DeviceTensor& t : readable_outputs_) out.push_back(download(gpu_, t));
  return out;
}

std::vector<Executable::OpTime> Executable::profile(const std::vector<HostTensor>& inputs) {
  write_inputs(inputs);
  std::vector<OpTime> times;
  RuntimeLock lock;
  gpu_.recorder().synchronize();
  for (size_t k = 0; k < launches_.size();) {
    const int64_t op = launch_ops_[k];
    const auto t0 = std::chrono::steady_clock::now();
    for (; k < launches_.size() && launch_ops_[k] == op; ++k) launches_[k](gpu_);
    gpu_.recorder().synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    times.push_back({op, op < 0 ? std::string("(output copies)") : program_.chain[op].op, ms});
  }
  return times;
}

std::vector<HostTensor> Executable::run(const std::vector<HostTensor>& inputs) {
  RuntimeLock lock;  // one run at a time: inputs, launches and read-back stay together
  write_inputs(inputs);
  record();
  return read_outputs();
}

}  // namespace twgpu::engine
