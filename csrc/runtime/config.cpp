#include "runtime/config.h"

#include <cstdlib>

namespace twgpu {
namespace {

std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_flag(const char* name) {
  std::string v = env_string(name);
  return !v.empty() && v != "0" && v != "false" && v != "no";
}

// A count in 1..65536 (dispatches); `value` keeps its default when unset or out of range.
void env_count(const char* name, uint32_t& value) {
  std::string v = env_string(name);
  if (v.empty()) return;
  long n = std::strtol(v.c_str(), nullptr, 10);
  if (n >= 1 && n <= 65536) value = static_cast<uint32_t>(n);
}

// The same for settings where 0 means off (values up to 10^7).
void env_number(const char* name, uint32_t& value) {
  std::string v = env_string(name);
  if (v.empty()) return;
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (end != v.c_str() && *end == '\0' && n >= 0 && n <= 10000000) value = static_cast<uint32_t>(n);
}

Config read_config() {
  Config c;
  c.backend = env_string("TORCH_WEBGPU_BACKEND");
  c.compat = env_flag("TORCH_WEBGPU_COMPAT");
  c.default_limits = env_string("TORCH_WEBGPU_LIMITS") == "default";
  c.force_fallback = env_flag("TORCH_WEBGPU_FORCE_FALLBACK_ADAPTER");
  c.debug = env_flag("TORCH_WEBGPU_DEBUG");
  c.subgroups = env_string("TORCH_WEBGPU_SUBGROUPS") != "0";
  c.dump_shaders_dir = env_string("TORCH_WEBGPU_DUMP_SHADERS");
  env_count("TORCH_WEBGPU_MAX_BATCH", c.max_batch);
  env_count("TORCH_WEBGPU_REPLAY_FIRST_BATCH", c.replay_first_batch);
  env_count("TORCH_WEBGPU_EAGER_FIRST_BATCH", c.eager_first_batch);
  env_number("TORCH_WEBGPU_EAGER_FLUSH_US", c.eager_flush_us);
  c.async_replay = env_flag("TORCH_WEBGPU_ASYNC_REPLAY");
  c.gemm_autotune = env_flag("TORCH_WEBGPU_GEMM_AUTOTUNE");
  env_number("TORCH_WEBGPU_ALLOC_GROWTH", c.alloc_growth_percent);
  uint32_t spin = UINT32_MAX;  // (kept where unset or not a number)
  env_number("TORCH_WEBGPU_SPIN_WAIT_US", spin);
  if (spin != UINT32_MAX) c.spin_wait_us = spin;
  std::string binding = env_string("TORCH_WEBGPU_MAX_BINDING_BYTES");
  if (!binding.empty()) {
    long long n = std::strtoll(binding.c_str(), nullptr, 10);
    // Windows start at 256-byte multiples: a binding must hold a few of them.
    if (n >= 4096) c.max_binding_bytes = static_cast<uint64_t>(n) / 256 * 256;
  }
  std::string toggles = env_string("TORCH_WEBGPU_DAWN_TOGGLES");
  for (size_t start = 0; start < toggles.size();) {
    size_t end = toggles.find(',', start);
    if (end == std::string::npos) end = toggles.size();
    std::string name = toggles.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (name[0] == '-')
      c.dawn_toggles_off.push_back(name.substr(1));
    else
      c.dawn_toggles_on.push_back(name);
  }
  return c;
}

}  // namespace

const Config& Config::get() {
  static const Config config = read_config();
  return config;
}

}  // namespace twgpu
