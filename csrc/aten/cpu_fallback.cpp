#include "aten/cpu_fallback.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include "aten/generator.h"
#include "runtime/graph_capture.h"

namespace twgpu::aten {
namespace {

bool env_flag(const char* name, bool fallback_value) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback_value;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "no");
}

std::mutex g_seen_mutex;
std::set<std::string> g_seen;

// CPU kernels accept only CPU generators: hand them the webgpu generator's CPU twin, and
// the default one where the caller passed none, so torch.webgpu.manual_seed applies.
void substitute_generators(const c10::FunctionSchema& schema, torch::jit::Stack* stack) {
  const auto& args = schema.arguments();
  size_t first = stack->size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    const auto& type = args[i].type();
    bool is_generator = type->kind() == c10::TypeKind::OptionalType
                            ? type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                                  c10::TypeKind::GeneratorType
                            : type->kind() == c10::TypeKind::GeneratorType;
    if (!is_generator) continue;
    if (v.isNone()) {
      v = c10::IValue(default_generator_cpu_twin());
    } else if (v.isGenerator()) {
      at::Generator g = v.toGenerator();
      if (g.device().type() == c10::DeviceType::PrivateUse1)
        v = c10::IValue(g.get<WebGPUGeneratorImpl>()->cpu_generator());
    }
  }
}

// Ops that take index tensors from any device (device_check: NoCheck, as on CUDA).
bool mixes_devices_by_design(const std::string& name) {
  static const std::set<std::string> ops = {
      "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put", "aten::_unsafe_masked_index",
      "aten::_unsafe_masked_index_put_accumulate"};
  return ops.count(name) > 0;
}

// The fallback would move every argument to the CPU and run, hiding a tensor left on
// another device: raise PyTorch's error instead (0-dim CPU tensors pass, like scalars).
void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  if (mixes_devices_by_design(schema.operator_name().name)) return;
  const auto& args = schema.arguments();
  size_t first = stack->size() - args.size();
  std::optional<c10::Device> device;
  std::optional<c10::Device> other;
  std::string other_arg;
  auto visit = [&](const at::Tensor& t, const std::string& arg) {
    if (!t.defined()) return;
    if (t.device().type() == c10::DeviceType::PrivateUse1) {
      if (!device) device = t.device();
    } else if (!(t.device().is_cpu() && t.dim() == 0) && !other) {
      other = t.device();
      other_arg = arg;
    }
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      visit(v.toTensor(), args[i].name());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t, args[i].name());
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor(), args[i].name());
    }
  }
  TORCH_CHECK(!(device && other), "Expected all tensors to be on the same device, but found "
              "at least two devices, ", *device, " and ", *other, "! (when checking argument '",
              other_arg, "' of ", schema.operator_name(), ")");
}

// "float[5, 5] webgpu, double[] webgpu": what reached the fallback, for its error message
// (which dtype or device made the call non-native).
std::string describe_tensor_args(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
  size_t n = op.schema().arguments().size();
  std::ostringstream os;
  const char* sep = "";
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    os << sep << t.scalar_type() << t.sizes() << " " << t.device().type();
    sep = ", ";
  };
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor()) add(v.toTensor());
    else if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector()) add(t);
  }
  return os.str();
}

}  // namespace

void webgpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string op_name = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  check_same_device(op, stack);
  // The fallback computes on the host: nothing a graph could replay.
  TORCH_CHECK(!CapturedGraph::active(), "torch.webgpu graphs: op '", op_name,
              "' has no native webgpu kernel and cannot be captured (it would run on the CPU "
              "through the fallback); keep it out of the captured region");
  TORCH_CHECK_NOT_IMPLEMENTED(
      !env_flag("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", false), "The operator '", op_name,
      "' is not implemented natively for the WebGPU device, and the CPU fallback is "
      "disabled (TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1); tensor arguments: ",
      describe_tensor_args(op, stack), ".");
  bool first;
  {
    std::lock_guard<std::mutex> lock(g_seen_mutex);
    first = g_seen.insert(op_name).second;
  }
  if (first && env_flag("TORCH_WEBGPU_FALLBACK_WARN", true)) {
    TORCH_WARN("The operator '", op_name,
               "' is not implemented natively for the WebGPU device; it runs on the CPU and "
               "copies its results back (slow). Set TORCH_WEBGPU_FALLBACK_WARN=0 to silence "
               "this warning.");
  }
  substitute_generators(op.schema(), stack);
  at::native::cpu_fallback(op, stack);
}

std::vector<std::string> fallback_ops_seen() {
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  return {g_seen.begin(), g_seen.end()};
}

void reset_fallback_ops_seen() {
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  g_seen.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&webgpu_cpu_fallback>());
}

namespace {
// Quantized tensors on the device (QuantizedPrivateUse1) are not supported: say so
// plainly instead of PyTorch's generic "Could not run ... 'Quantizedwebgpu' backend".
void quantized_unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_webgpu: quantized dtypes (qint8, quint8, qint32, "
                              "...) are not supported on the WebGPU device (operator '",
                              op.schema().operator_name(), "'); dequantize on the CPU first");
}
}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_unsupported>());
}

}  // namespace twgpu::aten
