// torch.webgpu's random-number functions (manual_seed, seed, initial_seed, get_rng_state,
// set_rng_state) and its device-argument check. They are C functions rather than Python
// ones for torch.compile's sake: Dynamo graph-breaks on a C function it meets and calls it
// eagerly, which is what its trace rules make it do for torch.cuda's RNG functions. A Python
// function it would trace instead, and OpInfo's freeze_rng_state calls get/set_rng_state
// under no_dispatch(), where Dynamo cannot make fake tensors. The tensor work is done
// through torch's Python API (no Python frame for Dynamo to compile either).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <mutex>
#include <string>

#include "aten/generator.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

// The index a device argument names (None, int, str or torch.device), which must be 0.
int64_t device_index(const py::object& device) {
  if (device.is_none()) return 0;
  py::object torch_device = py::module_::import("torch").attr("device");
  py::object d = py::isinstance<py::str>(device) ? torch_device(device) : device;
  int64_t index = 0;
  if (py::isinstance<py::int_>(d)) {
    index = d.cast<int64_t>();
  } else if (py::isinstance(d, torch_device)) {
    if (d.attr("type").cast<std::string>() != "webgpu")
      throw py::value_error("Expected a webgpu device, but got: " + py::str(d).cast<std::string>());
    index = d.attr("index").is_none() ? 0 : d.attr("index").cast<int64_t>();
  } else {
    throw py::type_error("Invalid device argument " + py::repr(device).cast<std::string>());
  }
  if (index != 0)
    throw py::value_error("torch.webgpu: invalid device " + py::repr(device).cast<std::string>() +
                          "; there is one WebGPU device (index 0)");
  return index;
}

WebGPUGeneratorImpl* generator() { return default_generator().get<WebGPUGeneratorImpl>(); }

void manual_seed(const py::object& seed) {
  // int(seed) modulo 2**64, as torch.cuda.manual_seed takes negative seeds too.
  const py::int_ wrapped = py::int_(seed) & py::int_(py::int_(1) << py::int_(64)) - py::int_(1);
  std::lock_guard<std::mutex> lock(generator()->mutex_);
  generator()->set_current_seed(wrapped.cast<uint64_t>());
}

// The default generator's state: a CPU tensor of uint8, like torch.cuda.get_rng_state.
py::object get_rng_state(const py::object& device) {
  device_index(device);
  auto state = generator()->get_state();
  py::bytearray bytes(static_cast<const char*>(state->data()), state->numel());
  py::module_ torch = py::module_::import("torch");
  return torch.attr("frombuffer")(bytes, py::arg("dtype") = torch.attr("uint8"));
}

void set_rng_state(const py::object& new_state, const py::object& device) {
  device_index(device);
  py::module_ torch = py::module_::import("torch");
  py::object t =
      new_state.attr("detach")().attr("cpu")().attr("contiguous")().attr("to")(torch.attr("uint8"));
  const auto n = t.attr("numel")().cast<int64_t>();
  at::Tensor state = at::empty({n}, at::kByte);
  if (n > 0)
    std::memcpy(state.mutable_data_ptr(),
                reinterpret_cast<const void*>(t.attr("data_ptr")().cast<uintptr_t>()), n);
  std::lock_guard<std::mutex> lock(generator()->mutex_);
  generator()->set_state(*state.unsafeGetTensorImpl());
}

}  // namespace

void register_random_bindings(py::module_& m) {
  m.def("_device_index", &device_index, py::arg("device"),
        "The index a device argument names (None, int, str or torch.device); raises unless 0");
  m.def("manual_seed", &manual_seed, py::arg("seed"), "Seeds the webgpu default generator");
  m.def("seed", [] {
    std::lock_guard<std::mutex> lock(generator()->mutex_);
    generator()->seed();
  }, "Seeds the webgpu default generator with a random number");
  m.def("initial_seed", [] { return generator()->current_seed(); },
        "The seed of the webgpu default generator");
  m.def("get_rng_state", &get_rng_state, py::arg("device") = "webgpu",
        "The webgpu default generator's state, a torch.uint8 CPU tensor");
  m.def("set_rng_state", &set_rng_state, py::arg("new_state"), py::arg("device") = "webgpu",
        "Sets the webgpu default generator's state (a torch.uint8 tensor from get_rng_state)");
}

}  // namespace twgpu::aten
