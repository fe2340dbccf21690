// torch_webgpu._C._wgsl_compile / _wgsl_launch: runs a WGSL kernel written outside the kernel
// library (Inductor's generated kernels, experiments) on webgpu tensors. The kernel gets the
// library's frame (kernel_program.h): its header, float/int64/math preludes and dtype
// load/store functions, so a compiled graph computes what eager computes.
//
// A kernel declares its tensors (name, access, dtype) and its uniforms (name, i32/u32/f32).
// Its WGSL then calls `load_NAME(i)` / `store_NAME(i, v)` (i: u32 element index from the
// tensor's first element, v in the dtype's compute type: f32 for floats, i32 for the integer
// types and bool) and reads uniforms as `let`s named after them. Tensors bind at their
// storage buffer; their element offsets travel as uniform words, so views need no copy.
//
// Named uniforms (kernel_program.h's UniformLayout): `tensor_offsets` (one element offset per
// tensor), the kernel's uniforms by their names and types, then `check_codes`, the codes of
// the kernel's device checks. A kernel with checks (messages such as "index out of bounds")
// calls `check_failed(k)` for check k: the host raises that message at the next read-back
// (runtime/device_checks.h), as eager indexing kernels do.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "aten/python_errors.h"
#include "aten/webgpu_tensor.h"
#include "kernels/elementwise_ops.h"
#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_library.h"
#include "runtime/context.h"
#include "runtime/device_checks.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

// The kernel over fewer bindings for tensors that share a buffer (see launch()).
struct AliasedVariant {
  KernelLaunch launch;
  std::string source;
};

struct CompiledKernel {
  KernelLaunch launch;            // key, body and the buffers' access; filled in per call
  std::vector<DType> dtypes;      // per tensor
  std::vector<std::string> uniforms;  // names, in declaration order
  std::unique_ptr<UniformLayout> layout;
  std::string source;             // the full body after the frame's header (for body())
  std::vector<std::string> checks;     // device-check messages, reported by check_failed(k)
  std::vector<uint32_t> check_codes;   // their DeviceChecks codes (assigned at first launch)
  // What body_source() takes besides the bindings, for the aliased variants.
  std::vector<std::string> names, libraries;
  std::string declarations, body;
  std::map<std::vector<size_t>, std::unique_ptr<AliasedVariant>> variants;  // by binding map
};

// Kernels live for the process: Inductor compiles each once and calls it many times.
std::mutex g_registry_mutex;
std::vector<std::unique_ptr<CompiledKernel>> g_kernels;
std::unordered_map<std::string, size_t> g_by_declaration;

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                  DType::Int16, DType::Int8, DType::UInt8, DType::Bool}) {
    if (name == dtype_name(t)) return t;
  }
  throw py::value_error("torch_webgpu: WGSL kernels take float32, float16, bfloat16, int64, "
                        "int32, int16, int8, uint8 or bool tensors, not '" + name + "'");
}

const char* library_source(const std::string& name) {
  if (name == "elementary") return wgsl::kElementaryLib;
  if (name == "special") return wgsl::kSpecialLib;
  if (name == "random") return wgsl::kRandomLib;
  throw py::value_error("torch_webgpu: unknown WGSL library '" + name +
                        "' (known: elementary, special, random)");
}

// load_, store_ and `atomic_add_NAME(i, v)` for a float32 or int32 tensor bound
// "read_write_atomic" (scatter adds, embedding backward): float adds retry a
// compare-exchange on the word.
std::string atomic_functions(const std::string& name, size_t b, const std::string& offset,
                             DType dtype) {
  const std::string word = "&buf" + std::to_string(b) + "[i + " + offset + "]";
  const std::string t = dtype == DType::Int32 ? "i32" : "f32";
  std::string s = "fn load_" + name + "(i: u32) -> " + t + " { return bitcast<" + t +
                  ">(atomicLoad(" + word + ")); }\n";
  s += "fn store_" + name + "(i: u32, v: " + t + ") { atomicStore(" + word + ", bitcast<u32>(v)); }\n";
  if (dtype == DType::Int32)
    return s + "fn atomic_add_" + name + "(i: u32, v: i32) { atomicAdd(" + word + ", bitcast<u32>(v)); }\n";
  return s + "fn atomic_add_" + name + "(i: u32, v: f32) {\n  var old = atomicLoad(" + word + ");\n"
         "  loop {\n    let r = atomicCompareExchangeWeak(" + word + ", old, bitcast<u32>(bitcast<f32>(old) + v));\n"
         "    if (r.exchanged) { break; }\n    old = r.old_value;\n  }\n}\n";
}

// Everything after kernel_header(): libraries, the tensors' load/store functions, the
// kernel's own declarations, then main with the uniforms as lets and the kernel's body.
// `binding[b]`: the binding tensor b reads and writes (tensors sharing a buffer share one,
// see launch()), among `l.buffers`, which the error word of the checks follows.
std::string body_source(const std::vector<std::string>& names, const KernelLaunch& l,
                        const std::vector<size_t>& binding, const std::vector<DType>& dtypes,
                        const std::vector<std::string>& uniforms,
                        const std::vector<std::string>& libraries,
                        const std::string& declarations, const std::string& body,
                        size_t checks) {
  std::string s;
  for (const auto& lib : libraries) s += library_source(lib);
  for (size_t b = 0; b < names.size(); ++b) {
    const std::string offset = "u_tensor_offsets(" + std::to_string(b) + "u)";
    const std::string type = wgsl_type(compute_type_for(dtypes[b]));
    const size_t at = binding[b];
    if (l.buffers[at].atomic && !is_subword(dtypes[b])) {  // a 32-bit tensor taking atomic adds
      s += atomic_functions(names[b], at, offset, dtypes[b]);
      continue;
    }
    s += kernel_load(names[b] + "_at", l.buffers, at, dtypes[b]);
    s += "fn load_" + names[b] + "(i: u32) -> " + type + " { return " + names[b] + "_at(i + " +
         offset + "); }\n";
    if (l.buffers[at].access == Access::ReadWrite) {
      s += kernel_store(names[b] + "_put", l.buffers, at, dtypes[b], compute_type_for(dtypes[b]));
      s += "fn store_" + names[b] + "(i: u32, v: " + type + ") { " + names[b] + "_put(i + " +
           offset + ", v); }\n";
    }
  }
  if (checks) {
    // The last binding is the device error word.
    s += "fn check_failed(k: u32) { atomicMax(&buf" + std::to_string(l.buffers.size() - 1) +
         "[0], u_check_codes(k)); }\n";
  }
  s += declarations;
  s += "\n" + kernel_main(l.grid, l.workgroup);
  for (const auto& name : uniforms) s += "  let " + name + " = u." + name + ";\n";
  s += body + "\n}\n";
  return s;
}

// A workgroup reduction the kernel calls by name: (fn, type, struct fields, merge, identity,
// float_sum, symmetric), as GroupReduce (kernels/group_reduce.h) over the whole workgroup.
using GroupReduction = std::tuple<std::string, std::string, std::string, std::string, std::string, bool, bool>;
// (fn, type, fields, merge): an inclusive scan over the workgroup (group_scan_fn).
using GroupScan = std::tuple<std::string, std::string, std::string, std::string>;

// Returns a handle; the same declaration and source give the same handle (and pipeline).
size_t compile_kernel(const std::string& body, const std::vector<std::string>& names,
                      const std::vector<std::string>& access,
                      const std::vector<std::string>& dtypes,
                      const std::vector<std::pair<std::string, std::string>>& uniforms,
                      const std::string& grid, uint32_t workgroup,
                      const std::vector<std::string>& libraries, const std::string& declarations,
                      const std::vector<std::string>& checks, const std::string& name,
                      const std::vector<GroupReduction>& reductions,
                      const std::vector<GroupScan>& scans) {
  if (names.size() != access.size() || names.size() != dtypes.size())
    throw py::value_error("torch_webgpu: WGSL kernel tensors need one access and one dtype each");
  if (grid != "invocations" && grid != "groups")
    throw py::value_error("torch_webgpu: WGSL kernel grid must be 'invocations' or 'groups'");
  if (workgroup == 0 || workgroup > 1024)
    throw py::value_error("torch_webgpu: WGSL kernel workgroup size must be in 1..1024");
  auto k = std::make_unique<CompiledKernel>();
  KernelLaunch& l = k->launch;
  l.grid = grid == "groups" ? Grid::Groups : Grid::Invocations;
  l.workgroup = workgroup;
  for (size_t b = 0; b < names.size(); ++b) {
    if (access[b] != "read" && access[b] != "read_write" && access[b] != "read_write_atomic")
      throw py::value_error("torch_webgpu: WGSL kernel access must be 'read', 'read_write' or "
                            "'read_write_atomic', not '" + access[b] + "'");
    DType t = dtype_from_name(dtypes[b]);
    const bool atomic_add = access[b] == "read_write_atomic";
    if (atomic_add && t != DType::Float32 && t != DType::Int32)
      throw py::type_error("torch_webgpu: atomic adds take float32 or int32 tensors, not " +
                           dtypes[b]);
    KernelBuffer buf;
    buf.access = access[b] == "read" ? Access::Read : Access::ReadWrite;
    // Narrow stores share words; atomic adds need atomic words.
    buf.atomic = atomic_add || (buf.access == Access::ReadWrite && is_subword(t));
    l.buffers.push_back(buf);
    k->dtypes.push_back(t);
  }
  std::vector<UniformDecl> decls = {
      {"tensor_offsets", UniformType::U32, static_cast<uint32_t>(std::max<size_t>(names.size(), 1))}};
  for (const auto& [name, type] : uniforms) {
    if (type != "i32" && type != "u32" && type != "f32")
      throw py::value_error("torch_webgpu: WGSL uniform '" + name + "' must be i32, u32 or f32");
    bool ident = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    const bool reserved = name == "u" || name == "frame" || name == "tensor_offsets" || name == "check_codes";
    if (!ident || reserved || std::find(k->uniforms.begin(), k->uniforms.end(), name) != k->uniforms.end())
      throw py::value_error("torch_webgpu: WGSL uniform name '" + name +
                            "' is not an identifier, is repeated or is reserved (u, frame, "
                            "tensor_offsets, check_codes)");
    k->uniforms.push_back(name);
  }
  for (size_t u = 0; u < uniforms.size(); ++u) {  // names no longer move
    const std::string& type = uniforms[u].second;
    decls.push_back({k->uniforms[u].c_str(),
                     type == "u32" ? UniformType::U32 : type == "i32" ? UniformType::I32 : UniformType::F32});
  }
  if (!checks.empty()) decls.push_back({"check_codes", UniformType::U32, static_cast<uint32_t>(checks.size())});
  if (decls.size() > 64) throw py::value_error("torch_webgpu: a WGSL kernel takes at most 62 uniforms");
  k->layout = std::make_unique<UniformLayout>(decls);
  k->checks = checks;
  if (!checks.empty()) l.buffers.push_back({nullptr, Access::ReadWrite, true});  // error word
  std::vector<size_t> own(names.size());
  for (size_t b = 0; b < own.size(); ++b) own[b] = b;
  // Reductions over the whole workgroup, as this adapter does them best (group_reduce.h):
  // the generated code calls them by name and stays the same on every adapter.
  std::string module = declarations;
  for (const auto& [fn, type, fields, merge, identity, float_sum, symmetric] : reductions)
    module += group_reduce_fn({fn, type, fields, merge, identity, workgroup, workgroup,
                               Context::get().caps().subgroup_size, float_sum, symmetric});
  for (const auto& [fn, type, fields, merge] : scans) {
    const uint32_t subgroup = Context::get().caps().subgroup_size;
    GroupReduce r{fn, type, fields, merge, "", workgroup, workgroup, subgroup, false, false};
    // Subgroup shuffles where the subgroups tile the workgroup; else a tree in workgroup memory.
    if (subgroup == 0 || workgroup % subgroup != 0) r.subgroup = 0;
    module += r.subgroup ? group_scan_fn(r) : group_scan_tree_fn(r);
  }
  k->source = body_source(names, l, own, k->dtypes, k->uniforms, libraries, module, body,
                          checks.size());
  k->names = names;
  k->libraries = libraries;
  k->declarations = module;
  k->body = body;
  std::string declaration = grid + "|" + std::to_string(workgroup);
  for (size_t b = 0; b < names.size(); ++b) declaration += "|" + access[b] + ":" + dtypes[b];
  declaration += "|";
  for (const auto& [name, type] : uniforms) declaration += name + ":" + type + "|";
  for (const auto& c : checks) declaration += c + "|";
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto found = g_by_declaration.find(declaration + k->source);
  if (found != g_by_declaration.end()) return found->second;
  // Named kernels (Inductor's) show their name in profiles.
  l.key = (name.empty() ? std::string("wgsl_entry") : "wgsl:" + name) + "|" + std::to_string(g_kernels.size()) +
          "|" + std::to_string(std::hash<std::string>()(k->source));
  const std::string* src = &k->source;  // owned by the kernel, which lives for the process
  l.body = [src] { return *src; };
  g_by_declaration.emplace(declaration + k->source, g_kernels.size());
  g_kernels.push_back(std::move(k));
  return g_kernels.size() - 1;
}

// A 4-byte buffer bound where an empty tensor (no storage) stands: WebGPU needs a buffer in
// every binding, and a kernel never reads an empty tensor's elements.
WGPUBuffer empty_tensor_buffer(Context& ctx) {
  static Allocation* scratch = ctx.pool().allocate(4);
  return scratch->buffer;
}

// `k`'s launch with each buffer bound once. WebGPU refuses a dispatch binding one buffer
// twice when either binding is writable, and Inductor does hand a kernel several views of
// one buffer (the slices of a concatenation it writes, an input updated in place): tensors
// on one buffer then share a binding (writable, atomic if either needs it), in a variant of
// the kernel compiled for that sharing. Their element offsets stay per-tensor uniform words.
KernelLaunch& aliased(CompiledKernel& k, size_t tensors) {
  KernelLaunch& l = k.launch;
  bool shared = false;  // the common case, checked without allocating
  for (size_t b = 1; b < tensors && !shared; ++b)
    for (size_t c = 0; c < b && !shared; ++c) shared = l.buffers[c].buffer == l.buffers[b].buffer;
  if (!shared) return l;
  std::vector<size_t> binding(tensors);
  std::vector<KernelBuffer> bindings;
  for (size_t b = 0; b < tensors; ++b) {
    size_t at = bindings.size();
    for (size_t c = 0; c < b; ++c)
      if (l.buffers[c].buffer == l.buffers[b].buffer) at = binding[c];
    binding[b] = at;
    if (at == bindings.size()) {
      bindings.push_back(l.buffers[b]);
    } else {
      if (l.buffers[b].access == Access::ReadWrite) bindings[at].access = Access::ReadWrite;
      bindings[at].atomic = bindings[at].atomic || l.buffers[b].atomic;
    }
  }
  for (size_t b = tensors; b < l.buffers.size(); ++b) bindings.push_back(l.buffers[b]);  // error word
  auto& variant = k.variants[binding];
  if (!variant) {
    variant = std::make_unique<AliasedVariant>();
    KernelLaunch& v = variant->launch;
    v.grid = l.grid;
    v.workgroup = l.workgroup;
    v.buffers = bindings;
    variant->source = body_source(k.names, v, binding, k.dtypes, k.uniforms, k.libraries,
                                  k.declarations, k.body, k.checks.size());
    v.key = l.key + "|bindings";
    for (size_t at : binding) v.key += " " + std::to_string(at);
    const std::string* src = &variant->source;  // lives as long as the kernel
    v.body = [src] { return *src; };
  }
  KernelLaunch& v = variant->launch;
  for (size_t b = 0; b < v.buffers.size(); ++b) v.buffers[b].buffer = bindings[b].buffer;
  v.copy_uniforms(l);
  v.count = l.count;
  return v;
}

void launch(size_t handle, const std::vector<uint64_t>& addresses, const py::sequence& values,
            uint64_t count) {
  CompiledKernel* k;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    if (handle >= g_kernels.size()) throw py::value_error("torch_webgpu: unknown WGSL kernel handle");
    k = g_kernels[handle].get();
  }
  KernelLaunch& l = k->launch;
  const size_t tensors = k->dtypes.size();
  if (addresses.size() != tensors)
    throw py::value_error("torch_webgpu: WGSL kernel takes " + std::to_string(tensors) +
                          " tensors, got " + std::to_string(addresses.size()));
  if (static_cast<size_t>(py::len(values)) != k->uniforms.size())
    throw py::value_error("torch_webgpu: WGSL kernel takes " + std::to_string(k->uniforms.size()) +
                          " uniforms, got " + std::to_string(py::len(values)));
  guarded([&] {
    RuntimeLock lock;  // also serializes the shared KernelLaunch
    Context& ctx = lock.ctx();
    l.declare(*k->layout);
    // The uniforms after tensor_offsets in declaration order: the kernel's, then the codes.
    std::vector<uint32_t> words(k->uniforms.size());
    const auto& fields = k->layout->fields();
    for (size_t u = 0; u < k->uniforms.size(); ++u) {
      py::handle v = values[u];
      if (fields[u + 1].type == UniformType::F32) {
        float f = v.cast<float>();
        std::memcpy(&words[u], &f, 4);
      } else {
        words[u] = static_cast<uint32_t>(v.cast<int64_t>());
      }
    }
    if (!k->checks.empty()) {
      if (k->check_codes.empty())
        for (const auto& message : k->checks) k->check_codes.push_back(ctx.checks().code_for(message));
      words.insert(words.end(), k->check_codes.begin(), k->check_codes.end());
      l.buffers.back().buffer = ctx.checks().arm();
    }
    l.set_fields(1, words.data());
    std::vector<uint32_t> offsets(tensors, 0);
    for (size_t b = 0; b < addresses.size(); ++b) {
      if (addresses[b] == 0) {
        l.buffers[b].buffer = empty_tensor_buffer(ctx);
        continue;
      }
      Allocation* a = ctx.pool().find(addresses[b]);
      if (!a)
        throw py::value_error("torch_webgpu: WGSL kernel tensor " + std::to_string(b) +
                              " is not on the webgpu device");
      const uint64_t bytes = addresses[b] - a->address;
      const uint64_t size = element_size(k->dtypes[b]);
      if (bytes % size != 0)
        throw py::value_error("torch_webgpu: WGSL kernel tensor " + std::to_string(b) +
                              " starts inside an element of its dtype");
      l.buffers[b].buffer = a->buffer;
      offsets[b] = static_cast<uint32_t>(bytes / size);
    }
    l.set_u32s("tensor_offsets", offsets);
    l.count = count;
    launch_kernel(ctx, aliased(*k, tensors));
  });
}

// The eager pointwise table's WGSL for `name` (inputs a, b, c; parameters p0, p1), so
// generated kernels compute with the expressions eager kernels use: (f32 expression or
// None, i32 expression or None, the libraries it calls), or None for an unknown op.
py::object pointwise_expression(const std::string& name) {
  const ElementwiseOpDef* op = find_elementwise_op(name);
  if (!op) return py::none();
  auto expr = [](const char* e) { return e ? py::object(py::str(e)) : py::object(py::none()); };
  std::vector<std::string> libraries;
  for (const char* const* lib = op->library; lib && *lib; ++lib)
    libraries.push_back(*lib == wgsl::kSpecialLib ? "special" : "elementary");
  return py::make_tuple(expr(op->f32), expr(op->i32), libraries);
}

}  // namespace

void register_wgsl_bindings(py::module_& m) {
  m.def("_wgsl_compile", &compile_kernel, py::arg("body"), py::arg("names"), py::arg("access"),
        py::arg("dtypes"), py::arg("uniforms"), py::arg("grid"), py::arg("workgroup"),
        py::arg("libraries"), py::arg("declarations"), py::arg("checks"), py::arg("name") = "",
        py::arg("reductions") = std::vector<GroupReduction>{},
        py::arg("scans") = std::vector<GroupScan>{},
        "Registers a WGSL kernel (see csrc/aten/python_wgsl.cpp); returns its handle");
  m.def("_wgsl_launch", &launch, py::arg("handle"), py::arg("addresses"), py::arg("uniforms"),
        py::arg("count"),
        "Records a dispatch of a registered WGSL kernel: tensors by data_ptr(), uniforms in "
        "declaration order, count invocations or workgroups");
  m.def("_wgsl_pointwise_expression", &pointwise_expression, py::arg("name"),
        "The eager pointwise table's WGSL for an op: (f32, i32, libraries) or None");
  m.def("_wgsl_source", [](size_t handle) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    if (handle >= g_kernels.size()) throw py::value_error("torch_webgpu: unknown WGSL kernel handle");
    const CompiledKernel& k = *g_kernels[handle];
    return kernel_source(k.launch.buffers, *k.layout, k.source);
  }, "The full WGSL a registered kernel compiles to");
}

}  // namespace twgpu::aten
