// The engine's programmatic API (ExecuTorch-style): device tensors, one op recorded by
// name (record_shader), whole programs recorded over the caller's tensors, then submit
// and sync. Nothing is submitted before submit() or a read-back.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace twgpu::engine {

class Tensor {
 public:
  Tensor(std::shared_ptr<BufferSet> owner, DeviceTensor t) : owner_(std::move(owner)), t_(std::move(t)) {}
  DType dtype() const { return t_.dtype; }
  const std::vector<int64_t>& shape() const { return t_.shape; }
  // Uploads contiguous bytes (size must be numel * element size).
  Tensor& set_data(const void* data, uint64_t size);
  HostTensor get_data() const;  // waits for the work recorded so far
  const DeviceTensor& device() const { return t_; }

 private:
  std::shared_ptr<BufferSet> owner_;
  DeviceTensor t_;
};

// One argument of record_shader: a tensor, a list of tensors, or a scalar/list/none value.
struct ShaderArg {
  Value value;                 // kind Tensor / TensorList when tensor(s) are given
  std::vector<Tensor> tensors;
  static ShaderArg of(const Tensor& t);
  static ShaderArg of(const std::vector<Tensor>& ts);
  static ShaderArg of(Value v);
};

class Context {
 public:
  Context();
  Tensor tensor(DType dtype, const std::vector<int64_t>& shape);
  // Records one op ("aten::add.Tensor", ...) with every schema argument in order; the
  // outputs are tensors of this context of the op's result shape and dtype.
  void record_shader(const std::string& op, const std::vector<ShaderArg>& args,
                     const std::vector<Tensor>& outputs);
  // Copies `inputs` into the program's inputs, records it, copies its outputs to `outputs`.
  void record_program(Executable& program, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs);
  void submit();  // sends what was recorded
  void sync();    // submit() and wait; frees scratch of recorded ops
  uint64_t dispatches() const;

 private:
  std::shared_ptr<BufferSet> tensors_;
  std::unique_ptr<BufferSet> scratch_;
};

}  // namespace twgpu::engine
