// The pointwise op table: for each op, its arity and one WGSL expression per compute
// type, over inputs `a`, `b`, `c` and parameters `p0`, `p1` (all in the compute type).
// Adding an op is one line in elementwise_ops.cpp (complex64: in its complex table) plus
// its registration in csrc/aten.
#pragma once
#include <string>

#include "kernels/dtype.h"

namespace twgpu {

struct ElementwiseOpDef {
  const char* name;
  int arity;         // number of tensor inputs
  const char* f32;   // nullptr: no kernel for this compute type
  const char* i32;
  const char* i64;
  const char* raw;   // bit-moving ops only (copy)
  // False when a bool common dtype is refused even though i32 computes it (as the CPU
  // refuses abs, pow, remainder, shifts, ... on bool).
  bool accepts_bool = true;
  // Extra WGSL the expression calls (special-function libraries, in dependency order), as a
  // nullptr-terminated list, or nullptr.
  const char* const* library = nullptr;
  // Data-dependent loops of up to ~1e5 iterations (zeta's direct sum): on adapters that cut
  // an invocation's loops after a fixed count (llvmpipe), such an op runs one element per
  // invocation, not four (whose loops would share that count).
  bool long_loops = false;
  // complex64 (vec2<f32>, kComplexLib's functions), from the op table's complex section.
  const char* c64 = nullptr;

  const char* expression(Compute c) const {
    switch (c) {
      case Compute::F32: return f32;
      case Compute::I32: return i32;
      case Compute::I64: return i64;
      case Compute::C64: return c64;
      default: return raw;
    }
  }
};

const ElementwiseOpDef* find_elementwise_op(const std::string& name);

}  // namespace twgpu
