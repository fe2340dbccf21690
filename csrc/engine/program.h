// The exported program (docs/ENGINE.md): values, a chain of ATen ops over them, and a
// static memory plan. Parsing and validation only; nothing here touches the device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu::engine {

// Version 2 added state tensors (mutated buffers, "init"); version 1 programs still load.
constexpr int kProgramVersion = 2;
constexpr int kOldestProgramVersion = 1;

enum class ValueKind : uint8_t { Tensor, Int, Float, Bool, String, IntList, TensorList, None };

uint64_t numel_of(const std::vector<int64_t>& shape);

// Where a tensor's bytes live: a pool of the memory plan, the weights file, or (neither)
// the storage of the tensor it is a view of, decided by the view op that defines it.
enum class Storage : uint8_t { Pool, Constant, View };

struct TensorSpec {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; contiguous when the program gives none
  Storage storage = Storage::Pool;
  int64_t pool = -1;
  uint64_t offset = 0;  // bytes into the pool or into weights.bin
  // A state tensor (a mutated buffer): a pool tensor whose first bytes come from weights.bin
  // at `init_offset` at load and that keeps what the runs write into it between runs.
  bool is_state = false;
  uint64_t init_offset = 0;
  uint64_t numel() const { return numel_of(shape); }
  uint64_t nbytes() const;  // bytes spanned by the elements (strides respected)
};

struct Value {
  ValueKind kind = ValueKind::None;
  TensorSpec tensor;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<int64_t> ints;   // IntList values, TensorList value ids (a none value's id: an absent optional tensor)
};

struct OpCall {
  std::string op;              // ATen name, e.g. "aten::add.Tensor"
  std::vector<int64_t> args;   // value ids, every schema argument in order
  std::vector<int64_t> outputs;
};

struct Program {
  int version = kProgramVersion;
  std::vector<Value> values;
  std::vector<OpCall> chain;
  std::vector<int64_t> inputs, outputs;
  std::vector<uint64_t> pool_sizes;  // by pool id
  uint64_t weights_size = 0;         // bytes weights.bin must hold
};

// Parses program.json text. Throws Error(InvalidArgument) naming the field at fault.
Program parse_program(const std::string& json_text);

// Checks what needs no op knowledge: value ids in range, tensors inside their pool or the
// weights, pool tensors overlapping in bytes with disjoint lifetimes (a view keeps its
// base alive), inputs and outputs in pools. `weights_bytes`: the size of weights.bin.
void check_program(const Program& p, uint64_t weights_bytes);

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
DType parse_dtype(const std::string& name);  // "float32", ... (Error on others)
std::string shape_text(DType dtype, const std::vector<int64_t>& shape);  // "float32[2, 2]"
inline std::string describe(const TensorSpec& t) { return shape_text(t.dtype, t.shape); }

}  // namespace twgpu::engine
