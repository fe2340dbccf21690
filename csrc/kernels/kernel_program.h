// The shared frame of every kernel family beyond elementwise (reductions, matmul,
// indexing, scans, sorting, random, shape ops): declared storage buffers, a block of u32
// uniforms, the WGSL header that goes with them, and a dispatch over a 1-D range of
// invocations or of workgroups. A family writes only its kernel body and its uniforms.
//
// Uniforms are named: the kernel declares a UniformLayout (name and type of each value),
// sets values by name, and WGSL reads `u.name` (scalars) or `u_name(i)` (u32 arrays); the
// frame derives the struct, the packing and the pipeline key from the declaration. A
// kernel that declares none gets an empty layout. Words 0..3 are the frame's own (see
// kWordCount...), read in WGSL as frame_count(), frame_pitch(), frame_groups_x().
//
// A launch is planned (pipeline built or found, bindings, uniform bytes, grid) and then
// recorded; plan_kernel and record split the two so a plan can be kept and recorded again.
#pragma once
#include <webgpu/webgpu.h>

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
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

  // Declared array<vec4<u32>>: 16-byte loads (and stores, read-write). A second binding of
  // a buffer already bound as u32 words reads its aligned body this way (read only: one
  // dispatch may not bind a buffer writable twice); it must not need a window.
  bool vec4 = false;

  KernelBuffer& touches(uint32_t word, DType dtype, uint64_t first, uint64_t count) {
    offset_word = word;
    element_bytes = static_cast<uint32_t>(element_size(dtype));
    touched = {first, first + count};
    return *this;
  }
};

enum class UniformType : uint8_t { U32, I32, F32 };

struct UniformDecl {
  const char* name;  // a WGSL identifier
  UniformType type = UniformType::U32;
  uint32_t length = 0;  // 0: one scalar, read `u.name`; n: n u32 words, read `u_name(i)`
};

// Where each declared uniform sits in the uniform block, by WGSL's uniform-buffer rules:
// after the frame's vec4, scalars take 4 bytes each in declaration order; arrays start on
// 16 bytes and are stored as array<vec4<u32>> (the uniform address space gives array
// elements a 16-byte stride, so a plain array<u32> would waste three words in four).
// Build one per kernel family, once (a function-local static).
class UniformLayout {
 public:
  struct Field {
    std::string name;
    UniformType type;
    uint32_t length;
    uint32_t word;  // first word in the block
  };
  UniformLayout(std::initializer_list<UniformDecl> decls)
      : UniformLayout(std::vector<UniformDecl>(decls)) {}
  // Built at run time (a family whose uniforms depend on its variant).
  explicit UniformLayout(const std::vector<UniformDecl>& decls);

  const std::vector<Field>& fields() const { return fields_; }
  // Index of the field, or fields().size() when none has that name.
  size_t find(std::string_view name) const;
  uint32_t words() const { return words_; }  // the whole block, frame included; a multiple of 4
  uint64_t hash() const { return hash_; }    // of the names, types and lengths
  // `struct Uniforms`, its binding `u` and the array accessors.
  std::string wgsl(size_t binding) const;

 private:
  std::vector<Field> fields_;
  uint32_t words_ = 0;
  uint64_t hash_ = 0;
};

// The pipeline key of a family with named uniforms: the family (a string literal) and what
// else its WGSL depends on (dtypes, flags). The frame adds the workgroup size, the grid,
// the buffers' access and the uniform layout.
struct KernelKey {
  using Variant = std::array<uint32_t, 4>;
  const char* family = nullptr;
  Variant variant{};
};

enum class Grid : uint8_t {
  Invocations,  // `count` invocations; main() gets `idx` and returns past the end
  Groups,       // `count` workgroups; main() gets `group` (uniform) and `lid`, no early return
};

struct KernelLaunch {
  std::string key;                     // a string key (python_wgsl, the nn frame)
  KernelKey typed;                     // or the typed key's family and variant
  std::function<std::string()> body;   // WGSL after the header (helpers + `fn main`)
  std::vector<KernelBuffer> buffers;
  std::vector<uint32_t> uniforms;      // the block by `declare`; frame words are filled in
  Grid grid = Grid::Invocations;
  uint64_t count = 0;                  // invocations or workgroups
  uint32_t workgroup = 0;              // 0: caps().workgroup_1d()

  // Named uniforms: declares the layout (sizes `uniforms`), then each value is set by name
  // with its declared type. Launching with a declared uniform unset is an error.
  KernelLaunch& declare(const UniformLayout& layout);
  KernelLaunch& set_u32(std::string_view name, uint32_t v);
  KernelLaunch& set_i32(std::string_view name, int32_t v);
  KernelLaunch& set_f32(std::string_view name, float v);
  // An array's first values.size() words (the rest stay 0).
  KernelLaunch& set_u32s(std::string_view name, const std::vector<uint32_t>& values);
  KernelLaunch& set_u32s(std::string_view name, std::initializer_list<uint32_t> values);  // no allocation
  KernelLaunch& set_u32s(std::string_view name, const uint32_t* values, size_t count) {
    return set_words(name, values, count);
  }
  // Fields first.. of the layout in declaration order from `words`, packed (a scalar takes
  // one word, an array its length): a frame that builds the layout from its own
  // declaration sets them without a lookup per name. Returns the words used.
  size_t set_fields(size_t first, const uint32_t* words);
  // The layout and every uniform of `other` (a variant of one kernel over other bindings).
  void copy_uniforms(const KernelLaunch& other) {
    layout_ = other.layout_;
    unset_ = other.unset_;
    uniforms = other.uniforms;
  }
  // The word a named scalar occupies (for KernelBuffer::touches).
  uint32_t word_of(std::string_view name) const;
  const UniformLayout* layout() const { return layout_; }
  uint64_t unset_mask() const { return unset_; }  // bit i: field i not set yet

 private:
  size_t field(std::string_view name, UniformType type, bool array) const;
  KernelLaunch& set_words(std::string_view name, const uint32_t* values, size_t count);
  const UniformLayout* layout_ = nullptr;
  uint64_t unset_ = 0;
  // The field after the last one looked up: launches set uniforms mostly in declaration
  // order (and may ask for the word of the one just set), found without a scan.
  mutable size_t next_field_ = 0;
};

// One dispatch ready to record: made once by plan_kernel, recorded any number of times
// (the buffers must stay alive; the uniform bytes are copied at each record).
struct KernelPlan {
  const Pipeline* pipeline = nullptr;  // null: nothing to record (an empty launch)
  std::vector<WGPUBuffer> buffers;     // storage bindings in order
  std::vector<BufferWindow> windows;   // one per buffer (offset and size); empty: whole buffers
  std::vector<uint32_t> uniforms;      // the uniform block, frame words filled in
  uint32_t groups_x = 0, groups_y = 0;
};

// The WGSL header for `buffers` and `layout`: bindings, the uniforms (`u.name`,
// `u_name(i)`, the frame's words as frame_count() ...), the float, int64 and math preludes
// (WGSL drops what a kernel does not call), and `opaque_f32(x)`: x, through a uniform zero,
// so compilers that reassociate float math (NVIDIA's) cannot fold compensated sums such as
// ((a + b) - a) - b to zero.
std::string kernel_header(const std::vector<KernelBuffer>& buffers, const UniformLayout& layout);
// kernel_header + body, behind the directives the body needs (`enable subgroups;`).
std::string kernel_source(const std::vector<KernelBuffer>& buffers, const UniformLayout& layout,
                          const std::string& body);
// Fails naming the kernel when `body` reads `u.x` or `u_x(` for an x the layout lacks.
void check_uniform_names(const std::string& body, const UniformLayout& layout,
                         const std::string& kernel);
// `@compute ... fn main(...) {` with `idx` (Invocations) or `group` and `lid` (Groups)
// defined; the caller closes the function.
std::string kernel_main(Grid grid, uint32_t workgroup);
// Load/store functions for element i of `buf<b>` as `dtype`, in compute type `compute`.
std::string kernel_load(const std::string& name, const std::vector<KernelBuffer>& buffers,
                        size_t b, DType dtype);
std::string kernel_store(const std::string& name, const std::vector<KernelBuffer>& buffers,
                         size_t b, DType dtype, Compute compute);

// Builds the pipeline (once per key), packs the uniforms, places the buffers' windows and
// sizes the grid. A launch with count 0 gives an empty plan.
KernelPlan plan_kernel(Context& ctx, KernelLaunch& launch);
// Records the plan through the context's CommandRecorder.
void record(Context& ctx, const KernelPlan& plan);
// plan_kernel + record. Nothing happens when count is 0.
void launch_kernel(Context& ctx, KernelLaunch& launch);

}  // namespace twgpu
