// A profiling session of the ATen layer: the runtime's DispatchProfiler plus the
// RecordFunction callback that names the running op (python_profiler.cpp). Shared by
// torch.webgpu.profiler and the Kineto plugin (kineto_profiler.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/profiler.h"

namespace twgpu::aten {

struct HostOpEvent {
  std::string name;
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t thread;
};

struct SessionStart {
  ProfilerTiming timing = ProfilerTiming::Host;
  size_t first_record = 0;      // where this session's records begin (sessions nest)
  size_t first_host_event = 0;
};

// Starts (or joins) a session; timing is "auto", "gpu" or "host". Throws
// std::invalid_argument for another string and Error for runtime failures.
SessionStart begin_session(const std::string& timing);
// Waits for the session's work and leaves it, returning its records and host op events
// (from the given indices on). The session is left even when waiting fails (then the
// failure is rethrown).
void end_session(const SessionStart& start, std::vector<DispatchRecord>* records,
                 std::vector<HostOpEvent>* host);

// True when torch.profiler's PrivateUse1 plugin was built (kineto_profiler.cpp).
bool kineto_plugin_built();

}  // namespace twgpu::aten
