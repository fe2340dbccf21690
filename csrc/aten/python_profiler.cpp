// The profiling session of the ATen layer (profiler_session.h) and its Python functions
// (torch.webgpu.profiler). While a session runs, a RecordFunction callback (registered for
// the session only, so profiling costs nothing otherwise) keeps the per-thread stack of
// running ATen ops that dispatch records read, and logs each op's host interval.
#include <ATen/record_function.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <stdexcept>

#include "aten/profiler_session.h"
#include "aten/webgpu_tensor.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

struct OpStart : at::ObserverContext {
  uint64_t start_ns = 0;
};

// Host events come from every thread the session's callback reaches (autograd's too).
std::mutex g_host_mutex;
std::vector<HostOpEvent> g_host_events;
at::CallbackHandle g_callback = 0;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  DispatchProfiler::push_op(fn.name());
  auto ctx = std::make_unique<OpStart>();
  ctx->start_ns = DispatchProfiler::now_ns();
  return ctx;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  const uint64_t end = DispatchProfiler::now_ns();
  DispatchProfiler::pop_op();
  const uint64_t start = ctx ? static_cast<OpStart*>(ctx)->start_ns : end;
  std::lock_guard<std::mutex> lock(g_host_mutex);
  g_host_events.push_back({fn.name(), start, end, fn.threadId()});
}

}  // namespace

SessionStart begin_session(const std::string& timing) {
  if (timing != "auto" && timing != "gpu" && timing != "host")
    throw std::invalid_argument("torch.webgpu.profiler: timing must be 'auto', 'gpu' or 'host', not '" +
                                timing + "'");
  RuntimeLock lock;
  DispatchProfiler& profiler = DispatchProfiler::get();
  const bool outermost = !profiler.active();
  ProfilerTiming mode = ProfilerTiming::Host;
  if (timing == "gpu" || (timing == "auto" && lock.ctx().caps().timestamp_query))
    mode = ProfilerTiming::Gpu;
  if (outermost) lock.ctx().recorder().flush();  // work recorded before the session is not its
  profiler.begin(lock.ctx(), mode);
  std::lock_guard<std::mutex> host_lock(g_host_mutex);
  if (outermost) {
    g_host_events.clear();
    g_callback = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  }
  return {profiler.timing(), profiler.records().size(), g_host_events.size()};
}

void end_session(const SessionStart& start, std::vector<DispatchRecord>* records,
                 std::vector<HostOpEvent>* host) {
  std::string error;
  {
    RuntimeLock lock;
    DispatchProfiler& profiler = DispatchProfiler::get();
    if (!profiler.active())
      throw std::runtime_error("torch.webgpu.profiler: stop without a running session");
    try {
      lock.ctx().recorder().synchronize();
    } catch (const Error& e) {
      error = e.what();
    }
    const auto& all = profiler.records();
    for (size_t i = start.first_record; i < all.size(); ++i) records->push_back(all[i]);
    profiler.end();
    if (!profiler.active() && g_callback) {
      at::removeCallback(g_callback);
      g_callback = 0;
    }
  }
  {
    std::lock_guard<std::mutex> host_lock(g_host_mutex);
    for (size_t i = start.first_host_event; i < g_host_events.size(); ++i)
      host->push_back(g_host_events[i]);
  }
  if (!error.empty()) throw std::runtime_error(error);
}

namespace {

py::dict profiler_start(const std::string& timing) {
  SessionStart s;
  try {
    s = begin_session(timing);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  } catch (const Error& e) {
    throw std::runtime_error(e.what());
  }
  py::dict d;
  d["timing"] = s.timing == ProfilerTiming::Gpu ? "gpu" : "host";
  d["first_record"] = s.first_record;
  d["first_host_event"] = s.first_host_event;
  d["start_ns"] = DispatchProfiler::now_ns();
  return d;
}

// Returns the session's dispatch records (op, kernel, start_ns, end_ns, batch) and host
// op events (name, start_ns, end_ns, thread).
py::tuple profiler_stop(size_t first_record, size_t first_host_event) {
  std::vector<DispatchRecord> records;
  std::vector<HostOpEvent> host;
  end_session({ProfilerTiming::Host, first_record, first_host_event}, &records, &host);
  py::list rec;
  for (const auto& r : records)
    rec.append(py::make_tuple(r.op, r.kernel, r.start_ns, r.end_ns, r.submit));
  py::list ops;
  for (const auto& h : host) ops.append(py::make_tuple(h.name, h.start_ns, h.end_ns, h.thread));
  return py::make_tuple(rec, ops);
}

}  // namespace

void register_profiler_bindings(py::module_& m) {
  m.def("_profiler_start", &profiler_start, py::arg("timing"));
  m.def("_profiler_stop", &profiler_stop, py::arg("first_record"), py::arg("first_host_event"));
  m.attr("_profiler_kineto_plugin") = kineto_plugin_built();
  m.def("_profiler_active", [] {
    if (!Context::initialized()) return false;
    RuntimeLock lock;
    return DispatchProfiler::get().active();
  });
}

}  // namespace twgpu::aten
