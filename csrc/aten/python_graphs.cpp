// torch_webgpu._C pieces behind torch.webgpu graphs (python/torch_webgpu/graphs.py): the
// captured graph object of the runtime (runtime/graph_capture.h) and, while a capture
// runs, a RecordFunction callback that keeps each thread's stack of running ATen ops so
// a refused host read-back or random op can name the op. It is registered for the
// capture only (global: autograd's threads run backward ops captured too). Also the calls
// that make an output handed out by a replay raise once the next replay overwrote it.
#include <ATen/record_function.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <memory>
#include <stdexcept>

#include "aten/webgpu_tensor.h"
#include "runtime/graph_capture.h"
#include "runtime/profiler.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

at::CallbackHandle g_op_names = 0;  // guarded by the runtime lock

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  DispatchProfiler::push_op(fn.name());
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) { DispatchProfiler::pop_op(); }

void track_op_names(bool on) {
  if (on && !g_op_names) {
    g_op_names = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .needsInputs(false)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  } else if (!on && g_op_names) {
    at::removeCallback(g_op_names);
    g_op_names = 0;
  }
}

// Runtime errors surface as RuntimeError (CUDA raises that for capture misuse).
template <class F>
auto locked(F f) -> decltype(f(std::declval<RuntimeLock&>())) {
  try {
    RuntimeLock lock;
    return f(lock);
  } catch (const Error& e) {
    throw std::runtime_error(e.what());
  }
}

class PyGraph {
 public:
  PyGraph() {
    locked([&](RuntimeLock& lock) { graph_ = std::make_unique<CapturedGraph>(lock.ctx()); });
  }
  ~PyGraph() {
    try {
      RuntimeLock lock;
      if (graph_->capturing()) track_op_names(false);
      graph_.reset();
    } catch (...) {
    }
  }
  void capture_begin(uint64_t pool_id) {
    locked([&](RuntimeLock&) {
      graph_->begin(pool_id);
      track_op_names(true);
    });
  }
  void capture_end() {
    locked([&](RuntimeLock&) {
      if (graph_->capturing()) track_op_names(false);
      graph_->end();
    });
  }
  void capture_abort() {
    locked([&](RuntimeLock&) {
      if (graph_->capturing()) track_op_names(false);
      graph_->abort();
    });
  }
  void replay() {
    py::gil_scoped_release no_gil;
    locked([&](RuntimeLock&) { graph_->replay(); });
  }
  void reset() {
    locked([&](RuntimeLock&) { graph_->reset(); });
  }
  bool rebind(const std::vector<std::pair<uint64_t, uint64_t>>& moves) {
    return locked([&](RuntimeLock&) { return graph_->rebind(moves); });
  }
  uint64_t pool() const { return graph_->pool_id(); }
  size_t num_dispatches() const { return graph_->num_dispatches(); }
  size_t num_random_dispatches() const { return graph_->num_random_dispatches(); }
  size_t num_steps() const { return graph_->num_steps(); }
  bool captured() const { return graph_->captured(); }
  // (all, in submit) host microseconds of the last replay: what the benchmark reports.
  std::pair<double, double> last_replay_us() const {
    return {graph_->last_replay_ns() / 1e3, graph_->last_submit_ns() / 1e3};
  }

 private:
  std::unique_ptr<CapturedGraph> graph_;
};

}  // namespace

void register_graph_bindings(py::module_& m) {
  py::class_<PyGraph>(m, "_Graph")
      .def(py::init<>())
      .def("capture_begin", &PyGraph::capture_begin, py::arg("pool") = 0)
      .def("capture_end", &PyGraph::capture_end)
      .def("capture_abort", &PyGraph::capture_abort)
      .def("replay", &PyGraph::replay)
      .def("reset", &PyGraph::reset)
      .def("rebind", &PyGraph::rebind, py::arg("moves"))
      .def("pool", &PyGraph::pool)
      .def("num_dispatches", &PyGraph::num_dispatches)
      .def("num_random_dispatches", &PyGraph::num_random_dispatches)
      .def("num_steps", &PyGraph::num_steps)
      .def("captured", &PyGraph::captured)
      .def("last_replay_us", &PyGraph::last_replay_us);
  m.def("_graph_pool_handle",
        [] { return locked([](RuntimeLock&) { return CapturedGraph::new_pool_id(); }); });
  m.def("_is_capturing", [] { return CapturedGraph::active() != nullptr; });
  // A replay hands out aliases of its static outputs, each with a storage of its own over
  // the same bytes (which keeps the static storage alive): the next replay makes the
  // aliases it overwrote raise on any read of their data, with `message`, as an
  // overwritten output of a CUDA graph tree does, while the static tensors stay intact.
  // (Dropping the alias's storage instead, as CUDA's trees do, crashes TensorIterator's
  // overlap check on the next op that takes it.)
  m.def("_graph_output_alias", [](py::handle tensor) {
    if (!THPVariable_Check(tensor.ptr())) throw py::type_error("expected a tensor");
    const at::Tensor& t = THPVariable_Unpack(tensor.ptr());
    const c10::Storage& base = t.storage();
    c10::DataPtr bytes(base.mutable_data(), new c10::Storage(base),
                       [](void* keep) { delete static_cast<c10::Storage*>(keep); },
                       base.device());
    c10::Storage own(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), base.nbytes(), std::move(bytes),
        /*allocator=*/nullptr, /*resizable=*/false));
    auto alias = at::detail::make_tensor<c10::TensorImpl>(std::move(own), t.key_set(),
                                                          t.dtype());
    alias.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(),
                                                       t.storage_offset());
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(alias)));
  });
  m.def("_invalidate_graph_output", [](py::handle tensor, const std::string& message) {
    if (!THPVariable_Check(tensor.ptr())) throw py::type_error("expected a tensor");
    THPVariable_Unpack(tensor.ptr())
        .storage()
        .unsafeGetStorageImpl()
        ->release_data_and_set_meta_custom_data_ptr_error_msg_(message);
  });
}

}  // namespace twgpu::aten
