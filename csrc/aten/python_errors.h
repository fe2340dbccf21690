// Runtime errors leaving a pybind11 function of torch_webgpu._C: each becomes the Python
// exception PyTorch raises for CUDA (see rethrow() for the ATen side).
#pragma once
#include <pybind11/pybind11.h>

#include <stdexcept>

#include "runtime/error.h"

namespace twgpu::aten {

template <class F>
auto guarded(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::OutOfMemory) {
      static pybind11::object oom = pybind11::module_::import("torch").attr("OutOfMemoryError");
      PyErr_SetString(oom.ptr(), e.what());
      throw pybind11::error_already_set();
    }
    if (e.kind() == ErrorKind::Unsupported) throw pybind11::type_error(e.what());
    throw std::runtime_error(e.what());
  }
}

}  // namespace twgpu::aten
