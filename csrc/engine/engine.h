// The ahead-of-time engine: loads an exported program (program.json + weights.bin) onto
// the device once -- pools of the static memory plan, weights uploaded, every op's
// launches made -- and runs it: write inputs, record every launch, one submit, read
// outputs. No torch: it links only the runtime and the kernel library.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device_tensor.h"
#include "engine/op_registry.h"
#include "engine/program.h"

namespace twgpu {
class Context;
struct Allocation;
}  // namespace twgpu

namespace twgpu::engine {

// Tensor bytes on the host, row-major contiguous.
struct HostTensor {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  uint64_t numel() const { return numel_of(shape); }
};

// Device buffers the engine owns (pools, weights, scratch), returned to the runtime's
// buffer pool when it goes.
class BufferSet {
 public:
  explicit BufferSet(twgpu::Context& gpu) : gpu_(gpu) {}
  ~BufferSet();
  BufferSet(const BufferSet&) = delete;
  BufferSet& operator=(const BufferSet&) = delete;
  WGPUBuffer allocate(uint64_t bytes);
  void release_all();
  // Every buffer held, in allocation order, with the bytes asked for.
  std::vector<std::pair<WGPUBuffer, uint64_t>> held() const;

 private:
  twgpu::Context& gpu_;
  std::vector<twgpu::Allocation*> held_;
};

class Executable {
 public:
  // Validates and loads. Throws Error(InvalidArgument) naming what is wrong (unknown op
  // and its chain index, bad value ids, shapes, truncated weights, overlapping lifetimes).
  Executable(Program program, const std::vector<uint8_t>& weights);
  static std::unique_ptr<Executable> load(const std::string& json_text,
                                          const std::vector<uint8_t>& weights);
  static std::unique_ptr<Executable> load_dir(const std::string& dir);
  ~Executable();

  // write_inputs + record + read_outputs.
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs);
  void write_inputs(const std::vector<HostTensor>& inputs);
  void record();  // every launch of the chain, in order (not submitted yet)
  std::vector<HostTensor> read_outputs();
  // State tensors (mutated buffers) back to their initial bytes from weights.bin; runs
  // otherwise carry them over (a KV cache fills token by token).
  void reset_state();

  const Program& program() const { return program_; }
  size_t num_inputs() const { return program_.inputs.size(); }
  size_t num_outputs() const { return program_.outputs.size(); }
  const DeviceTensor& input(size_t i) const { return tensors_[program_.inputs.at(i)]; }
  const DeviceTensor& output(size_t i) const { return readable_outputs_.at(i); }
  size_t launches_per_run() const;
  // The buffers behind the program's memory-plan pools (by pool id), and every buffer the
  // engine holds (pools, weights, scratch): what a web bundle (web_bundle.h) describes.
  const std::vector<WGPUBuffer>& pool_buffers() const { return pool_buffers_; }
  WGPUBuffer weight_buffer() const { return weight_buffer_; }  // null: no constants
  std::vector<std::pair<WGPUBuffer, uint64_t>> held_buffers() const { return buffers_.held(); }

  // Runs once with a wait after every op: (chain index, op name, milliseconds) per op that
  // records anything (-1: the copies of strided outputs). For finding slow ops, not speed.
  struct OpTime {
    int64_t index;
    std::string op;
    double ms;
  };
  std::vector<OpTime> profile(const std::vector<HostTensor>& inputs);

 private:
  Program program_;
  twgpu::Context& gpu_;
  BufferSet buffers_;
  std::vector<WGPUBuffer> pool_buffers_;
  WGPUBuffer weight_buffer_ = nullptr;
  std::vector<DeviceTensor> tensors_;   // by value id (non-tensors: unused)
  std::vector<Launch> launches_;
  std::vector<int64_t> launch_ops_;  // chain index of each launch (-1: output copies)
  std::vector<DeviceTensor> readable_outputs_;  // contiguous copies where outputs are views
  std::vector<std::pair<size_t, std::vector<uint8_t>>> states_;  // value id, initial bytes
};

// Reads a whole file (Error naming the path when it cannot).
std::vector<uint8_t> read_file(const std::string& path);

// Runs one op's launches now over the given device tensors (the Context API's
// record_shader; scratch goes to `scratch`).
void record_op(const std::string& op, std::vector<OpArg> args, std::vector<DeviceTensor*> outputs,
               BufferSet& scratch);

// Downloads / uploads a tensor's bytes (contiguous tensors; the size must match).
void upload(twgpu::Context& gpu, const DeviceTensor& t, const void* data, uint64_t size);
HostTensor download(twgpu::Context& gpu, const DeviceTensor& t);

}  // namespace twgpu::engine
