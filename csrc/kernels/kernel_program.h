// The shared frame of every kernel family beyond elementwise (reductions, matmul,
// indexing, scans, sorting, random, shape ops): declared storage buffers, a block of u32
// uniforms, the WGSL header that goes with them, and a dispatch over a 1-D range of
// invocations or of workgroups. A family writes only its kernel body and its uniforms.
//
// Uniform words 0..3 are the frame's own (see kWordCount...); a family's words start at
// kFirstUserWord. WGSL reads word i as `uw(i)`.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/binding_window.h"
#include "kernels/dtype.h"
#include "runtime/pipeline_cache.h"

namespace twgpu {

class Context;

constexpr uint32_t kWordCount = 0;   // invocations (Grid::Invocations) or workgroups (Groups)
constexpr uint32_t kWordPitch = 1;   // invocations per grid row: gid.x + gid.y * pitch
constexpr uint32_t kWordGroupsX = 2; // workgroups per grid row: wid.x + wid.y * groups_x
constexpr uint32_t kWordZero = 3;    // always 0: `opaque_f32(x)` hides x from the optimizer
constexpr uint32_t kFirstUserWord = 4;

// One storage binding, named `buf<i>` in WGSL in declaration order.
struct KernelBuffer {
  WGPUBuffer buffer = nullptr;
  Access access = Access::Read;
  bool atomic = false;  // declared array<atomic<u32>> (narrow stores, atomic adds)
  // For buffers larger than one storage binding (binding_window.h): the elements the launch
  // touches, [touched.first, touched.end) of `element_bytes` bytes each. The frame binds the
  // window over them and subtracts the window's start (in elements) from uniform word
  // `offset_word`, the tensor's element offset. Undeclared (element_bytes 0): a buffer
  // larger than a binding is refused with an error naming the kernel.
  uint32_t offset_word = 0;
  uint32_t element_bytes = 0;
  ElementRange touched;

  KernelBuffer& touches(uint32_t word, DType dtype, uint64_t first, uint64_t count) {
    offset_word = word;
    element_bytes = static_cast<uint32_t>(element_size(dtype));
    touched = {first, first + count};
    return *this;
  }
};

enum class Grid : uint8_t {
  Invocations,  // `count` invocations; main() gets `idx` and returns past the end
  Groups,       // `count` workgroups; main() gets `group` (uniform) and `lid`, no early return
};

struct KernelLaunch {
  std::string key;                     // pipeline cache key: must identify the source
  std::function<std::string()> body;   // WGSL after the header (helpers + `fn main`)
  std::vector<KernelBuffer> buffers;
  std::vector<uint32_t> uniforms;      // words from 0; frame words are filled in
  Grid grid = Grid::Invocations;
  uint64_t count = 0;                  // invocations or workgroups
  uint32_t workgroup = 0;              // 0: caps().workgroup_1d()
};

// The WGSL header for `buffers` and `uniform_words` uniforms: bindings, `uw()`, the
// float, int64 and math preludes (WGSL drops what a kernel does not call), and
// `opaque_f32(x)`: x, through a uniform zero, so compilers that reassociate float math
// (NVIDIA's) cannot fold compensated sums such as ((a + b) - a) - b to zero.
std::string kernel_header(const std::vector<KernelBuffer>& buffers, size_t uniform_words);
// `@compute ... fn main(...) {` with `idx` (Invocations) or `group` and `lid` (Groups)
// defined; the caller closes the function.
std::string kernel_main(Grid grid, uint32_t workgroup);
// Load/store functions for element i of `buf<b>` as `dtype`, in compute type `compute`.
std::string kernel_load(const std::string& name, const std::vector<KernelBuffer>& buffers,
                        size_t b, DType dtype);
std::string kernel_store(const std::string& name, const std::vector<KernelBuffer>& buffers,
                         size_t b, DType dtype, Compute compute);

// Builds (once per key) and records the kernel. Nothing happens when count is 0.
void launch_kernel(Context& ctx, KernelLaunch& launch);

}  // namespace twgpu
