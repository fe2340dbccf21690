// Reductions and softmax as WGSL kernels (no torch here).
//
// Every reduction sees its input as a contiguous [outer, reduce, inner] block (the ATen
// layer permutes or copies to get there): output element g = o * inner + i reduces
// input[offset + o * reduce * inner + j * inner + i] over j. A small reduction runs one
// invocation per output; a long one runs one workgroup per output with a shared-memory
// tree. Ops differ only in their accumulator state: init, add one element, merge two
// states, and the final store.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

enum class ReduceKind : uint8_t {
  Sum, NanSum, Prod, Mean,  // Mean: param = the divisor
  Max, Min,            // values only, NaN propagates
  ArgMax, ArgMin,      // value and first index (outputs: values if `values`, indices)
  MinMax,              // two outputs: min, max
  All, Any, CountNonzero,
  LogSumExp,           // two-pass: max, then sum of exp
  Var,                 // two-pass; param = correction; outputs var (or std) and mean
  Norm2, Norm1, NormInf, NormNegInf, Norm0, NormP,  // param = p for NormP
};

struct ReduceSpec {
  ReduceKind kind = ReduceKind::Sum;
  DType in = DType::Float32;
  DType out = DType::Float32;   // first output (values / result)
  DType out2 = DType::Int64;    // second output (indices, max of MinMax, mean of Var)
  Compute acc = Compute::F32;   // accumulator type (sum/prod) or comparison type
  bool values = true;           // ArgMax/ArgMin: write values to out, indices to out2
  bool indices = true;          // ArgMax/ArgMin: write indices (to out2, or out if !values)
  bool take_sqrt = false;       // Var: std instead of var
  bool second = false;          // Var: also write the mean to out2
  // Sum-like norms in two stages: the first writes the raw sums of terms (partial_out),
  // the second adds those sums (partial_in) and finishes (sqrt, 1/p power).
  bool partial_out = false;
  // Sum/NanSum/Prod into a half type: the CPU casts each input element to it first.
  // Float32 means no rounding.
  DType round_input = DType::Float32;
  bool partial_in = false;
};

struct ReduceShape {
  uint64_t outer = 1, reduce = 1, inner = 1;
  // Partial reductions: split `reduce` into this many chunks, one output each, laid out
  // as [outer, chunks, inner] (the first stage of a two-stage reduction).
  uint64_t chunks = 1;
};

struct ReduceBuffers {
  WGPUBuffer in = nullptr;
  uint64_t in_offset = 0;   // elements
  WGPUBuffer out = nullptr;
  uint64_t out_offset = 0;
  WGPUBuffer out2 = nullptr;
  uint64_t out2_offset = 0;
};

void launch_reduce(Context& ctx, const ReduceSpec& spec, const ReduceShape& shape,
                   const ReduceBuffers& bufs, float param = 0.f);

// Row-wise softmax family over [outer, reduce, inner] (the softmax dim in the middle).
enum class SoftmaxKind : uint8_t { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };

struct SoftmaxSpec {
  SoftmaxKind kind = SoftmaxKind::Softmax;
  DType in = DType::Float32;    // forward: x; backward: grad_output
  DType in2 = DType::Float32;   // backward: output
  DType out = DType::Float32;
};

struct SoftmaxBuffers {
  WGPUBuffer in = nullptr;
  uint64_t in_offset = 0;
  WGPUBuffer in2 = nullptr;
  uint64_t in2_offset = 0;
  WGPUBuffer out = nullptr;   // contiguous, same layout, offset 0
  uint64_t out_offset = 0;
};

void launch_softmax(Context& ctx, const SoftmaxSpec& spec, const ReduceShape& shape,
                    const SoftmaxBuffers& bufs);

}  // namespace twgpu
