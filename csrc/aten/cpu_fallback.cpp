#include "aten/cpu_fallback.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "aten/generator.h"

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

}  // namespace

void webgpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string op_name = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(
      !env_flag("TORCH_WEBGPU_DISABLE_CPU_FALLBACK", false), "The operator '", op_name,
      "' is not implemented natively for the WebGPU device, and the CPU fallback is "
      "disabled (TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1).");
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

}  // namespace twgpu::aten
