#include "engine/context.h"

#include "engine/ops/pointwise.h"
#include "runtime/runtime.h"

namespace twgpu::engine {

Tensor& Tensor::set_data(const void* data, uint64_t size) {
  upload(twgpu::Context::get(), t_, data, size);
  return *this;
}

HostTensor Tensor::get_data() const { return download(twgpu::Context::get(), t_); }

ShaderArg ShaderArg::of(const Tensor& t) {
  ShaderArg a;
  a.value.kind = ValueKind::Tensor;
  a.tensors = {t};
  return a;
}

ShaderArg ShaderArg::of(const std::vector<Tensor>& ts) {
  ShaderArg a;
  a.value.kind = ValueKind::TensorList;
  a.tensors = ts;
  return a;
}

ShaderArg ShaderArg::of(Value v) {
  ShaderArg a;
  a.value = std::move(v);
  return a;
}

Context::Context()
    : tensors_(std::make_shared<BufferSet>(twgpu::Context::get())),
      scratch_(std::make_unique<BufferSet>(twgpu::Context::get())) {}

Tensor Context::tensor(DType dtype, const std::vector<int64_t>& shape) {
  DeviceTensor t;
  t.dtype = dtype;
  for (int64_t s : shape)
    if (s < 0) fail(ErrorKind::InvalidArgument, "negative size in a tensor shape");
  t.shape = shape;
  t.strides = contiguous_strides(shape);
  t.buffer = tensors_->allocate(t.nbytes());
  return Tensor(tensors_, t);
}

void Context::record_shader(const std::string& op, const std::vector<ShaderArg>& args,
                            const std::vector<Tensor>& outputs) {
  // Device views live here for the factory's duration; launches copy what they need.
  std::vector<DeviceTensor> views;
  size_t count = 0;
  for (const ShaderArg& a : args) count += a.tensors.size();
  for (const Tensor& t : outputs) (void)t, ++count;
  views.reserve(count);
  std::vector<OpArg> op_args;
  for (const ShaderArg& a : args) {
    OpArg o;
    o.value = &a.value;
    if (a.value.kind == ValueKind::Tensor) {
      if (a.tensors.size() != 1) fail(ErrorKind::InvalidArgument, op + ": a tensor argument needs one tensor");
      views.push_back(a.tensors[0].device());
      o.tensor = &views.back();
    } else if (a.value.kind == ValueKind::TensorList) {
      for (const Tensor& t : a.tensors) {
        views.push_back(t.device());
        o.list.push_back(&views.back());
      }
    }
    op_args.push_back(o);
  }
  std::vector<DeviceTensor*> outs;
  for (const Tensor& t : outputs) {
    views.push_back(t.device());
    outs.push_back(&views.back());
  }
  record_op(op, std::move(op_args), std::move(outs), *scratch_);
}

void Context::record_program(Executable& program, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs) {
  if (inputs.size() != program.num_inputs() || outputs.size() != program.num_outputs())
    fail(ErrorKind::InvalidArgument,
         "record_program: the program takes " + std::to_string(program.num_inputs()) +
             " inputs and makes " + std::to_string(program.num_outputs()) + " outputs, got " +
             std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  auto check = [](const char* what, size_t i, const DeviceTensor& want, const DeviceTensor& got) {
    if (want.dtype != got.dtype || want.shape != got.shape)
      fail(ErrorKind::InvalidArgument, std::string("record_program: ") + what + " " +
                                           std::to_string(i) + " must be " + want.describe() +
                                           ", got " + got.describe());
  };
  for (size_t i = 0; i < inputs.size(); ++i) check("input", i, program.input(i), inputs[i].device());
  for (size_t i = 0; i < outputs.size(); ++i) check("output", i, program.output(i), outputs[i].device());
  RuntimeLock lock;
  for (size_t i = 0; i < inputs.size(); ++i) copy_launch(inputs[i].device(), program.input(i))(lock.ctx());
  program.record();
  for (size_t i = 0; i < outputs.size(); ++i) copy_launch(program.output(i), outputs[i].device())(lock.ctx());
}

void Context::submit() {
  RuntimeLock lock;
  lock.ctx().recorder().flush();
}

void Context::sync() {
  RuntimeLock lock;
  lock.ctx().recorder().synchronize();
  scratch_->release_all();
}

uint64_t Context::dispatches() const {
  RuntimeLock lock;
  return lock.ctx().recorder().dispatches_recorded();
}

}  // namespace twgpu::engine
