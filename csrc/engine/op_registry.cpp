#include "engine/op_registry.h"

#include <map>

#include "engine/ops/pointwise.h"
#include "runtime/error.h"

namespace twgpu::engine {

namespace {
std::map<std::string, OpFactory>& registry() {
  static std::map<std::string, OpFactory> r;
  return r;
}

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Tensor: return "tensor";
    case ValueKind::Int: return "int";
    case ValueKind::Float: return "float";
    case ValueKind::Bool: return "bool";
    case ValueKind::String: return "string";
    case ValueKind::IntList: return "int_list";
    case ValueKind::TensorList: return "tensor_list";
    case ValueKind::None: return "none";
  }
  return "?";
}
}  // namespace

void register_op(const char* name, OpFactory factory) { registry()[name] = factory; }

OpFactory find_op(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

void OpBuilder::fail(const std::string& msg) const {
  twgpu::fail(ErrorKind::InvalidArgument,
              "chain[" + std::to_string(index_) + "] " + op_ + ": " + msg);
}

const OpArg& OpBuilder::arg(size_t i) const {
  if (i >= args_.size())
    fail("expects at least " + std::to_string(i + 1) + " arguments, got " +
         std::to_string(args_.size()));
  return args_[i];
}

const Value& OpBuilder::value(size_t i) const { return *arg(i).value; }

bool OpBuilder::is_none(size_t i) const {
  return i >= args_.size() || args_[i].value->kind == ValueKind::None;
}

const DeviceTensor& OpBuilder::tensor(size_t i) const {
  const OpArg& a = arg(i);
  if (!a.tensor)
    fail("argument " + std::to_string(i) + " must be a tensor, got " + kind_name(a.value->kind));
  return *a.tensor;
}

const DeviceTensor* OpBuilder::optional_tensor(size_t i) const {
  return is_none(i) ? nullptr : &tensor(i);
}

int64_t OpBuilder::integer(size_t i) const {
  const Value& v = value(i);
  if (v.kind == ValueKind::Int) return v.i;
  if (v.kind == ValueKind::Bool) return v.b ? 1 : 0;
  fail("argument " + std::to_string(i) + " must be an int, got " + kind_name(v.kind));
}

int64_t OpBuilder::integer_or(size_t i, int64_t dflt) const {
  return is_none(i) ? dflt : integer(i);
}

double OpBuilder::real(size_t i) const {
  const Value& v = value(i);
  if (v.kind == ValueKind::Float) return v.f;
  if (v.kind == ValueKind::Int) return static_cast<double>(v.i);
  if (v.kind == ValueKind::Bool) return v.b ? 1.0 : 0.0;
  fail("argument " + std::to_string(i) + " must be a number, got " + kind_name(v.kind));
}

double OpBuilder::real_or(size_t i, double dflt) const { return is_none(i) ? dflt : real(i); }

bool OpBuilder::boolean_or(size_t i, bool dflt) const {
  if (is_none(i)) return dflt;
  const Value& v = value(i);
  if (v.kind == ValueKind::Bool) return v.b;
  if (v.kind == ValueKind::Int) return v.i != 0;
  fail("argument " + std::to_string(i) + " must be a bool, got " + kind_name(v.kind));
}

std::string OpBuilder::string_or(size_t i, const std::string& dflt) const {
  if (is_none(i)) return dflt;
  const Value& v = value(i);
  if (v.kind != ValueKind::String)
    fail("argument " + std::to_string(i) + " must be a string, got " + kind_name(v.kind));
  return v.s;
}

std::vector<int64_t> OpBuilder::ints(size_t i) const {
  const Value& v = value(i);
  if (v.kind == ValueKind::IntList) return v.ints;
  if (v.kind == ValueKind::Int) return {v.i};
  fail("argument " + std::to_string(i) + " must be a list of ints, got " + kind_name(v.kind));
}

std::vector<const DeviceTensor*> OpBuilder::optional_tensors(size_t i) const {
  const OpArg& a = arg(i);
  if (a.value->kind != ValueKind::TensorList)
    fail("argument " + std::to_string(i) + " must be a list of tensors, got " +
         kind_name(a.value->kind));
  return std::vector<const DeviceTensor*>(a.list.begin(), a.list.end());
}

std::vector<const DeviceTensor*> OpBuilder::tensors(size_t i) const {
  std::vector<const DeviceTensor*> ts = optional_tensors(i);
  for (const DeviceTensor* t : ts)
    if (!t) fail("argument " + std::to_string(i) + " lists none where a tensor is needed");
  return ts;
}

DeviceTensor& OpBuilder::output(size_t i) {
  if (i >= outputs_.size())
    fail("expects " + std::to_string(i + 1) + " outputs, got " + std::to_string(outputs_.size()));
  return *outputs_[i];
}

DeviceTensor& OpBuilder::checked_output(size_t i, const std::vector<int64_t>& shape, DType dtype) {
  DeviceTensor& out = output(i);
  if (out.shape != shape || out.dtype != dtype)
    fail("output " + std::to_string(i) + " is " + out.describe() + ", the op makes " +
         shape_text(dtype, shape));
  if (out.is_view || !out.is_contiguous())
    fail("output " + std::to_string(i) + " must be contiguous memory of its own");
  return out;
}

const DeviceTensor& OpBuilder::written_in_place() {
  const DeviceTensor& self = tensor(0);
  check(value(0).tensor.storage == Storage::Pool && self.is_contiguous(),
        "writes in place only into a tensor with memory of its own, got " + self.describe());
  DeviceTensor& out = output(0);
  check(out.is_view && out.shape == self.shape && out.dtype == self.dtype,
        "the output must be a view of the written tensor");
  out.buffer = self.buffer;
  out.offset = self.offset;
  out.strides = self.strides;
  return self;
}

DeviceTensor OpBuilder::scratch(DType dtype, const std::vector<int64_t>& shape) {
  DeviceTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = contiguous_strides(shape);
  t.buffer = allocate_(std::max<uint64_t>(t.nbytes(), 4));
  return t;
}

DeviceTensor OpBuilder::contiguous(const DeviceTensor& t) {
  if (t.is_contiguous()) return t;
  DeviceTensor c = scratch(t.dtype, t.shape);
  record(copy_launch(t, c));
  return c;
}

}  // namespace twgpu::engine
