// The shared frame of the nn kernels (normalization, pooling, upsampling, padding,
// losses): typed operands with element offsets and a body written against them.
//
// In WGSL a kernel sees, for input k, `in<k>(i)` (f32 for float dtypes, i32 for integer
// ones, int64 narrowed to i32), for output k `out<k>(i, v)` taking the same types (narrow
// outputs are bound atomically, so neighbouring invocations may store; a float output
// also reads as `get<k>(i)`), and its parameters as named uniforms (kernel_program.h):
// `u.name` for a scalar set with param/param_i32/param_f32, `u_name(i)` for a u32 array
// set with param_u32s. Indices are element indices relative to each operand's first element.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/kernel_program.h"

namespace twgpu {

class Context;

namespace nn {

struct Operand {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
  DType dtype = DType::Float32;
  // Elements the kernel reaches from `offset` (0: unknown). Lets a buffer larger than one
  // storage binding be bound through the window over them (binding_window.h).
  uint64_t count = 0;
};

// `op`, or for an absent optional operand (null buffer) a stand-in the kernel never reads:
// one element of `other`, so the binding stays valid and within one window.
inline Operand or_dummy(const Operand& op, const Operand& other) {
  return op.buffer ? op : Operand{other.buffer, other.offset, other.dtype, 1};
}

constexpr uint32_t kRowWorkgroup = 64;

struct NnKernel {
  std::string key;            // identifies `body` (dtypes are added by the frame)
  std::vector<Operand> inputs;
  std::vector<Operand> outputs;
  // The parameters' declaration (names, types, lengths) and their words in that order.
  // The frame caches one UniformLayout per declaration: setting them costs no layout.
  std::vector<UniformDecl> params;
  std::vector<uint32_t> words;
  std::string body;
  // Outputs are float32 accumulators: WGSL gets `acc<k>(i, v)`, an atomic add (backward
  // kernels that scatter into a zeroed gradient).
  bool accumulate = false;

  // `name` must be a string literal (the declaration keeps the pointer).
  NnKernel& param(const char* name, uint32_t v);
  NnKernel& param_i32(const char* name, int32_t v);
  NnKernel& param_f32(const char* name, float v);
  NnKernel& param_u32s(const char* name, std::initializer_list<uint32_t> values);

 private:
  void reserve();
};

uint32_t f32_bits(float v);

// `count` invocations; the body defines `fn run(idx: u32)`.
void launch_map(Context& ctx, NnKernel& k, uint64_t count);

// One workgroup per row, `rows` rows of `len` terms each: the body defines
//   fn terms(row: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32>
//   fn finish(row: u32, s0: vec2<f32>, s1: vec2<f32>)
// `terms` is summed over k < len for pass 0 and (when passes == 2) again for pass 1 with
// `prev` the pass-0 sums; `finish` runs once per row with the sums of each pass.
void launch_rows(Context& ctx, NnKernel& k, uint64_t rows, uint32_t len, int passes);

// `groups` workgroups of `workgroup` invocations for kernels that synchronize within a
// group (recurrences over time, row statistics): the body defines
// `fn run_group(group: u32, lid: u32)`, called in uniform control flow so it may use barriers.
void launch_groups(Context& ctx, NnKernel& k, uint64_t groups, uint32_t workgroup = kRowWorkgroup);

// Tensors larger than one storage binding: calls launch(piece, n) over pieces of `units`
// (the rows, groups or invocations `launch` runs) when an operand's buffer exceeds a
// binding, else once over all of them. Operand j (inputs, then outputs) advances
// per_unit[j] elements per unit (0: every unit reads its `count` elements); each piece's
// operands start at the piece's first unit. For kernels whose unit index addresses their
// operands only relative to each operand's start.
void launch_in_pieces(Context& ctx, const NnKernel& k, uint64_t units,
                      const std::vector<uint64_t>& per_unit,
                      const std::function<void(NnKernel&, uint64_t)>& launch);

// launch_map over `planes` independent planes of `per_plane_invocations` invocations each,
// operand j holding per_plane[j] elements of every plane (pooling, upsampling).
void launch_map_planes(Context& ctx, const NnKernel& k, uint64_t planes,
                       const std::vector<uint64_t>& per_plane, uint64_t per_plane_invocations);

}  // namespace nn
}  // namespace twgpu
