#include "kernels/kernel_program.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "kernels/group_reduce.h"
#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_library.h"
#include "runtime/runtime.h"

namespace twgpu {

namespace {

std::string storage_bindings(const std::vector<KernelBuffer>& buffers) {
  std::string s;
  for (size_t b = 0; b < buffers.size(); ++b) {
    s += "@group(0) @binding(" + std::to_string(b) + ") var<storage, " +
         (buffers[b].access == Access::ReadWrite ? "read_write" : "read") + "> buf" +
         std::to_string(b) + ": array<" +
         (buffers[b].atomic ? "atomic<u32>" : buffers[b].vec4 ? "vec4<u32>" : "u32") + ">;\n";
  }
  return s;
}

const char* wgsl_type(UniformType t) {
  return t == UniformType::U32 ? "u32" : t == UniformType::I32 ? "i32" : "f32";
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

std::string kernel_header(const std::vector<KernelBuffer>& buffers, const UniformLayout& layout) {
  std::string s = storage_bindings(buffers) + layout.wgsl(buffers.size());
  // The frame's words by name (see kWordCount...).
  s += "fn frame_count() -> u32 { return u.frame.x; }\n"
       "fn frame_pitch() -> u32 { return u.frame.y; }\n"
       "fn frame_groups_x() -> u32 { return u.frame.z; }\n"
       "fn opaque_f32(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ u.frame.w); }\n";
  s += wgsl::kFloatPrelude;
  s += wgsl::kInt64Prelude;
  s += wgsl::kMathPrelude;
  return s;
}

std::string kernel_source(const std::vector<KernelBuffer>& buffers, const UniformLayout& layout,
                          const std::string& body) {
  // Directives come before any declaration.
  return (uses_subgroups(body) ? "enable subgroups;\n" : "") + kernel_header(buffers, layout) + body;
}

UniformLayout::UniformLayout(const std::vector<UniformDecl>& decls) {
  uint32_t word = kFirstUserWord;
  uint64_t h = 1469598103934665603ull;
  for (const UniformDecl& d : decls) {
    std::string_view name = d.name ? d.name : "";
    bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                 name != "frame" && fields_.size() < 64 &&
                 (d.length == 0 || d.type == UniformType::U32);
    for (char c : name) valid = valid && ident_char(c);
    if (!valid || find(name) != fields_.size())
      fail(ErrorKind::Internal, "torch_webgpu: uniform '" + std::string(name) +
                                    "': not a WGSL identifier, reserved, repeated, an array "
                                    "of other than u32, or past 64 uniforms");
    if (d.length > 0) word = (word + 3) / 4 * 4;
    fields_.push_back({std::string(name), d.type, d.length, word});
    word += d.length > 0 ? (d.length + 3) / 4 * 4 : 1;
    h = fnv1a(h, name);
    const uint32_t shape[2] = {static_cast<uint32_t>(d.type), d.length};
    h = fnv1a(h, std::string_view(reinterpret_cast<const char*>(shape), sizeof shape));
  }
  words_ = (word + 3) / 4 * 4;
  hash_ = h;
}

size_t UniformLayout::find(std::string_view name) const {
  for (size_t i = 0; i < fields_.size(); ++i)
    if (fields_[i].name == name) return i;
  return fields_.size();
}

std::string UniformLayout::wgsl(size_t binding) const {
  std::string s = "struct Uniforms {\n  frame: vec4<u32>,\n";
  std::string accessors;
  for (const Field& f : fields_) {
    if (f.length == 0) {
      s += "  " + f.name + ": " + wgsl_type(f.type) + ",\n";
      continue;
    }
    s += "  " + f.name + ": array<vec4<u32>, " + std::to_string((f.length + 3) / 4) + ">,\n";
    accessors += "fn u_" + f.name + "(i: u32) -> u32 { return u." + f.name +
                 "[i >> 2u][i & 3u]; }\n";
  }
  s += "}\n@group(0) @binding(" + std::to_string(binding) + ") var<uniform> u: Uniforms;\n";
  return s + accessors;
}

void check_uniform_names(const std::string& body, const UniformLayout& layout,
                         const std::string& kernel) {
  // Functions the body defines itself as `fn u_x(` are not uniform accessors.
  std::vector<std::string> own;
  for (size_t at = body.find("fn u_"); at != std::string::npos; at = body.find("fn u_", at + 1)) {
    size_t end = at + 5;
    while (end < body.size() && ident_char(body[end])) ++end;
    own.push_back(body.substr(at + 5, end - at - 5));
  }
  for (size_t at = body.find('u'); at != std::string::npos; at = body.find('u', at + 1)) {
    if (at > 0 && (ident_char(body[at - 1]) || body[at - 1] == '.')) continue;
    if (at + 2 >= body.size() || (body[at + 1] != '.' && body[at + 1] != '_')) continue;
    size_t end = at + 2;
    while (end < body.size() && ident_char(body[end])) ++end;
    const std::string name = body.substr(at + 2, end - at - 2);
    const bool array = body[at + 1] == '_';
    if (name.empty() || (array && (end >= body.size() || body[end] != '('))) continue;
    if (array && std::find(own.begin(), own.end(), name) != own.end()) continue;
    if (!array && name == "frame") continue;
    const size_t i = layout.find(name);
    if (i < layout.fields().size() && (layout.fields()[i].length > 0) == array) continue;
    std::string declared;
    for (const auto& f : layout.fields()) declared += (declared.empty() ? "" : ", ") + f.name;
    fail(ErrorKind::Internal, "torch_webgpu: kernel '" + kernel + "' reads uniform " +
                                  body.substr(at, end - at) + " that it does not declare " +
                                  (array ? "as an array" : "as a scalar") + " (declared: " +
                                  (declared.empty() ? "none" : declared) + ")");
  }
}

KernelLaunch& KernelLaunch::declare(const UniformLayout& layout) {
  layout_ = &layout;
  next_field_ = 0;
  const size_t n = layout.fields().size();
  unset_ = n == 64 ? ~0ull : (1ull << n) - 1;
  uniforms.assign(layout.words(), 0);
  return *this;
}

size_t KernelLaunch::field(std::string_view name, UniformType type, bool array) const {
  auto refuse = [&](const std::string& why) {
    fail(ErrorKind::Internal, "torch_webgpu: kernel '" +
                                  std::string(typed.family ? typed.family : key) +
                                  "' sets uniform '" + std::string(name) + "' " + why);
  };
  if (!layout_) refuse("before declaring its uniforms");
  const auto& fields = layout_->fields();
  auto is = [&](size_t j) { return j < fields.size() && fields[j].name == name; };
  const size_t i = is(next_field_) ? next_field_
                   : next_field_ > 0 && is(next_field_ - 1) ? next_field_ - 1
                                                            : layout_->find(name);
  if (i == fields.size()) refuse("that it does not declare");
  next_field_ = i + 1;
  const auto& f = layout_->fields()[i];
  if (f.type != type || (f.length > 0) != array)
    refuse(std::string("as ") + (array ? "an array" : wgsl_type(type)) + ", declared " +
           (f.length > 0 ? "an array" : wgsl_type(f.type)));
  return i;
}

KernelLaunch& KernelLaunch::set_u32(std::string_view name, uint32_t v) {
  const size_t i = field(name, UniformType::U32, false);
  uniforms[layout_->fields()[i].word] = v;
  unset_ &= ~(1ull << i);
  return *this;
}

KernelLaunch& KernelLaunch::set_i32(std::string_view name, int32_t v) {
  const size_t i = field(name, UniformType::I32, false);
  uniforms[layout_->fields()[i].word] = static_cast<uint32_t>(v);
  unset_ &= ~(1ull << i);
  return *this;
}

KernelLaunch& KernelLaunch::set_f32(std::string_view name, float v) {
  const size_t i = field(name, UniformType::F32, false);
  std::memcpy(&uniforms[layout_->fields()[i].word], &v, 4);
  unset_ &= ~(1ull << i);
  return *this;
}

KernelLaunch& KernelLaunch::set_u32s(std::string_view name, const std::vector<uint32_t>& values) {
  return set_words(name, values.data(), values.size());
}

KernelLaunch& KernelLaunch::set_u32s(std::string_view name, std::initializer_list<uint32_t> values) {
  return set_words(name, values.begin(), values.size());
}

KernelLaunch& KernelLaunch::set_words(std::string_view name, const uint32_t* values, size_t count) {
  const size_t i = field(name, UniformType::U32, true);
  const auto& f = layout_->fields()[i];
  if (count > f.length)
    fail(ErrorKind::Internal, "torch_webgpu: uniform array '" + f.name + "' holds " +
                                  std::to_string(f.length) + " words, given " +
                                  std::to_string(count));
  std::copy(values, values + count, uniforms.begin() + f.word);
  unset_ &= ~(1ull << i);
  return *this;
}

size_t KernelLaunch::set_fields(size_t first, const uint32_t* words) {
  const uint32_t* w = words;
  const auto& fields = layout_->fields();
  for (size_t i = first; i < fields.size(); ++i) {
    const uint32_t n = fields[i].length > 0 ? fields[i].length : 1;
    std::copy(w, w + n, uniforms.begin() + fields[i].word);
    w += n;
    unset_ &= ~(1ull << i);
  }
  return static_cast<size_t>(w - words);
}

uint32_t KernelLaunch::word_of(std::string_view name) const {
  return layout_->fields()[field(name, UniformType::U32, false)].word;
}

std::string kernel_main(Grid grid, uint32_t workgroup) {
  std::string s = "@compute @workgroup_size(" + std::to_string(workgroup) + ")\n";
  s += "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
       "        @builtin(local_invocation_id) lid3: vec3<u32>,\n"
       "        @builtin(workgroup_id) wid: vec3<u32>) {\n";
  if (grid == Grid::Invocations) {
    s += "  let idx = gid.x + gid.y * frame_pitch();\n  if (idx >= frame_count()) { return; }\n";
  } else {
    // Uniform control flow: every invocation of a group sees the same `group`; kernels
    // must not return before their barriers, so the bound check is theirs to make.
    s += "  let group = wid.x + wid.y * frame_groups_x();\n  let lid = lid3.x;\n";
  }
  return s;
}

std::string kernel_load(const std::string& name, const std::vector<KernelBuffer>& buffers,
                        size_t b, DType dtype) {
  return wgsl_load_function(name, "buf" + std::to_string(b), dtype, buffers[b].atomic);
}

std::string kernel_store(const std::string& name, const std::vector<KernelBuffer>& buffers,
                         size_t b, DType dtype, Compute compute) {
  return wgsl_store_function(name, "buf" + std::to_string(b), dtype, compute, buffers[b].atomic);
}

namespace {

// Windows of the buffers larger than one binding (empty when none is), with their
// tensors' offsets rebased in `uniforms`; refuses undeclared ones.
std::vector<BufferWindow> plan_windows(Context& ctx, const KernelLaunch& l,
                                       const std::string& name, std::vector<uint32_t>& uniforms) {
  std::vector<BufferWindow> windows(l.buffers.size());
  bool any = false;
  for (size_t i = 0; i < l.buffers.size(); ++i) {
    const KernelBuffer& b = l.buffers[i];
    if (!needs_window(ctx, b.buffer)) continue;
    if (b.element_bytes == 0) fail_too_large(ctx, name, BufferPool::size_of(b.buffer));
    windows[i] = window_over(ctx, b.buffer, b.touched.first * b.element_bytes,
                             b.touched.end * b.element_bytes, name);
    uniforms[b.offset_word] -= static_cast<uint32_t>(windows[i].offset / b.element_bytes);
    any = true;
  }
  if (!any) windows.clear();
  return windows;
}

}  // namespace

namespace {

// The typed key of a family with a KernelKey: its variant, then what the frame adds,
// encoded as the cache's key bytes (the family's characters, a NUL, the words). String
// keys (KernelLaunch::key) hold no NUL, so the two kinds never meet.
const std::string& typed_key(const KernelLaunch& l, uint32_t workgroup, uint32_t words) {
  if (l.buffers.size() > 16)
    fail(ErrorKind::Internal, std::string("torch_webgpu: kernel '") + l.typed.family +
                                  "' binds more than 16 buffers");
  std::array<uint32_t, 12> k{};
  std::copy(l.typed.variant.begin(), l.typed.variant.end(), k.begin());
  uint32_t access = 0, vec4 = 0;
  for (size_t i = 0; i < l.buffers.size(); ++i) {
    const KernelBuffer& b = l.buffers[i];
    access |= (b.access == Access::ReadWrite ? (b.atomic ? 3u : 2u) : b.vec4 ? 0u : 1u) << (2 * i);
    vec4 |= (b.vec4 ? 1u : 0u) << i;  // read-write vec4 bindings share code 2 with u32 ones
  }
  const uint64_t layout = l.layout()->hash();
  k[4] = workgroup;
  k[5] = static_cast<uint32_t>(l.grid);
  k[6] = words;
  k[7] = static_cast<uint32_t>(layout);
  k[8] = static_cast<uint32_t>(layout >> 32);
  k[9] = access;
  k[10] = static_cast<uint32_t>(l.buffers.size());
  k[11] = vec4;
  // One buffer per thread, reused: no allocation per launch.
  thread_local std::string bytes;
  const size_t family = std::strlen(l.typed.family);
  bytes.assign(l.typed.family, family + 1);  // with its NUL
  bytes.append(reinterpret_cast<const char*>(k.data()), sizeof k);
  return bytes;
}

}  // namespace

KernelPlan plan_kernel(Context& ctx, KernelLaunch& l) {
  KernelPlan plan;
  if (l.count == 0) return plan;
  // Only errors, pipeline builds and windows need the name: no string per launch.
  auto kernel_name = [&l] { return l.typed.family ? std::string(l.typed.family) : l.key; };
  // A kernel without uniforms of its own reads only the frame's.
  static const UniformLayout no_uniforms(std::vector<UniformDecl>{});
  if (!l.layout()) {
    if (!l.uniforms.empty())
      fail(ErrorKind::Internal, "torch_webgpu: kernel '" + kernel_name() +
                                    "' sets uniform words without declaring a layout");
    l.declare(no_uniforms);
  }
  const UniformLayout* layout = l.layout();
  if (l.unset_mask() != 0) {
    size_t i = 0;
    while (!(l.unset_mask() >> i & 1)) ++i;
    fail(ErrorKind::Internal, "torch_webgpu: kernel '" + kernel_name() + "' launches with uniform '" +
                                  layout->fields()[i].name + "' never set");
  }
  const uint32_t workgroup = l.workgroup ? l.workgroup : ctx.caps().workgroup_1d();
  const size_t words = l.uniforms.size();

  uint64_t groups = l.grid == Grid::Invocations ? (l.count + workgroup - 1) / workgroup : l.count;
  const uint64_t max_x = ctx.caps().max_workgroups_per_dimension;
  uint64_t gy = (groups + max_x - 1) / max_x;
  if (gy > max_x || l.count > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported,
         "torch_webgpu: kernel '" + kernel_name() + "' over too many elements");
  uint64_t gx = (groups + gy - 1) / gy;
  l.uniforms[kWordCount] = static_cast<uint32_t>(l.count);
  l.uniforms[kWordPitch] = static_cast<uint32_t>(gx * workgroup);
  l.uniforms[kWordGroupsX] = static_cast<uint32_t>(gx);
  l.uniforms[kWordZero] = 0;

  auto make = [&] {
    const std::string name = kernel_name();
    ProgramDesc desc;
    desc.label = name;
    const std::string body = l.body();
    check_uniform_names(body, *layout, name);
    desc.wgsl = kernel_source(l.buffers, *layout, body);
    // The grid assumes the body's workgroup size: a mismatch would silently skip or
    // repeat invocations.
    if (desc.wgsl.find("@workgroup_size(" + std::to_string(workgroup) + ")") == std::string::npos)
      fail(ErrorKind::Internal, "torch_webgpu: kernel '" + name +
                                    "' declares another workgroup size than it launches with (" +
                                    std::to_string(workgroup) + ")");
    for (const auto& b : l.buffers) desc.storage.push_back(b.access);
    desc.uniform_bytes = static_cast<uint32_t>(words * 4);
    return desc;
  };
  if (l.typed.family) {
    plan.pipeline = &ctx.pipelines().get(typed_key(l, workgroup, static_cast<uint32_t>(words)), make);
  } else {
    std::string key = l.key + "|wg" + std::to_string(workgroup) + "|u" + std::to_string(words);
    for (const auto& b : l.buffers)
      key += b.access == Access::ReadWrite ? (b.atomic ? 'A' : b.vec4 ? 'X' : 'W') : b.vec4 ? 'V' : 'R';
    key += "|n" + std::to_string(layout->hash());
    plan.pipeline = &ctx.pipelines().get(key, make);
  }
  plan.buffers.reserve(l.buffers.size());
  for (const auto& b : l.buffers) plan.buffers.push_back(b.buffer);
  plan.uniforms = l.uniforms;  // the caller may launch `l` again
  // In Groups mode a grid with more than one row has idle groups past `count` in its last
  // row: kernels check `group < frame_count()`.
  if (ctx.pool().has_oversized()) plan.windows = plan_windows(ctx, l, kernel_name(), plan.uniforms);
  plan.groups_x = static_cast<uint32_t>(gx);
  plan.groups_y = static_cast<uint32_t>(gy);
  return plan;
}

void record(Context& ctx, const KernelPlan& plan) {
  if (!plan.pipeline) return;
  ctx.recorder().dispatch(*plan.pipeline, plan.buffers.data(), plan.uniforms.data(),
                          plan.groups_x, plan.groups_y, 1,
                          plan.windows.empty() ? nullptr : plan.windows.data());
}

void launch_kernel(Context& ctx, KernelLaunch& l) { record(ctx, plan_kernel(ctx, l)); }

}  // namespace twgpu
