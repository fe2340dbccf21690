// How ops join the engine: a factory per ATen op name, registered by TWGPU_ENGINE_OP in
// the op's own file under ops/. At load time a factory checks its arguments, resolves
// view outputs, allocates scratch and returns the launches that each run records.
//
// The kernel library records immediately (launch_* = make + record), so a launch here is
// a closure holding the kernel's descriptor, made once at load and called on every run.
// When kernels split into plan + record (KernelPlan), the closure becomes a stored plan.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/device_tensor.h"
#include "engine/program.h"

namespace twgpu {
class Context;
}

namespace twgpu::engine {

using Launch = std::function<void(twgpu::Context&)>;

// One argument of an op call: the program value and, for tensors, their device views.
struct OpArg {
  const Value* value = nullptr;
  DeviceTensor* tensor = nullptr;
  std::vector<DeviceTensor*> list;
};

class OpBuilder {
 public:
  using Allocate = std::function<WGPUBuffer(uint64_t bytes)>;
  OpBuilder(std::string op, int64_t index, twgpu::Context& gpu, std::vector<OpArg> args,
            std::vector<DeviceTensor*> outputs, Allocate allocate)
      : op_(std::move(op)), index_(index), gpu_(gpu), args_(std::move(args)),
        outputs_(std::move(outputs)), allocate_(std::move(allocate)) {}

  size_t num_args() const { return args_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const DeviceTensor& tensor(size_t i) const;
  const DeviceTensor* optional_tensor(size_t i) const;  // null for none or a missing arg
  int64_t integer(size_t i) const;
  int64_t integer_or(size_t i, int64_t dflt) const;  // dflt for none or a missing arg
  double real(size_t i) const;                       // a float, int or bool value
  double real_or(size_t i, double dflt) const;
  bool boolean_or(size_t i, bool dflt) const;
  std::string string_or(size_t i, const std::string& dflt) const;
  std::vector<int64_t> ints(size_t i) const;
  std::vector<const DeviceTensor*> tensors(size_t i) const;           // every item a tensor
  std::vector<const DeviceTensor*> optional_tensors(size_t i) const;  // null for none items
  bool is_none(size_t i) const;
  const Value& value(size_t i) const;
  DeviceTensor& output(size_t i);

  // A contiguous tensor of the engine's own, allocated once at load.
  DeviceTensor scratch(DType dtype, const std::vector<int64_t>& shape);
  // `t` itself when contiguous, else a scratch copy (the copy is recorded first).
  DeviceTensor contiguous(const DeviceTensor& t);
  void record(Launch l) { launches_.push_back(std::move(l)); }
  std::vector<Launch> take() { return std::move(launches_); }

  twgpu::Context& gpu() { return gpu_; }
  const std::string& op() const { return op_; }
  [[noreturn]] void fail(const std::string& msg) const;
  void check(bool ok, const std::string& msg) const {
    if (!ok) fail(msg);
  }
  // Outputs must be the engine's contiguous memory of the expected shape and dtype.
  DeviceTensor& checked_output(size_t i, const std::vector<int64_t>& shape, DType dtype);
  // In-place ops (index_put_, copy_) on a state tensor: argument 0 must have memory of its
  // own (contiguous) and output 0 be a view of it, which this points at it. Returns arg 0.
  const DeviceTensor& written_in_place();

 private:
  const OpArg& arg(size_t i) const;
  std::string op_;
  int64_t index_;
  twgpu::Context& gpu_;
  std::vector<OpArg> args_;
  std::vector<DeviceTensor*> outputs_;
  Allocate allocate_;
  std::vector<Launch> launches_;
};

using OpFactory = void (*)(OpBuilder&);

void register_op(const char* name, OpFactory factory);
OpFactory find_op(const std::string& name);  // null when unknown
std::vector<std::string> registered_ops();

#define TWGPU_ENGINE_CONCAT_(a, b) a##b
#define TWGPU_ENGINE_CONCAT(a, b) TWGPU_ENGINE_CONCAT_(a, b)
// Registers `factory` for the ATen op `name` ("aten::add.Tensor") at static init.
#define TWGPU_ENGINE_OP(name, factory)                                            \
  static const bool TWGPU_ENGINE_CONCAT(twgpu_engine_op_, __COUNTER__) =          \
      (::twgpu::engine::register_op(name, factory), true)

}  // namespace twgpu::engine
