// torch_webgpu._C functions behind torch.webgpu streams: the calling thread's current
// stream id, kept by the device guard (device_guard.cpp), so torch.webgpu.current_stream
// and torch.Stream / torch.accelerator see the same stream.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>

#include "aten/webgpu_tensor.h"

namespace py = pybind11;

namespace twgpu::aten {
namespace {

const c10::impl::DeviceGuardImplInterface& guard() {
  return *c10::impl::getDeviceGuardImpl(kDeviceType);
}

c10::Device device0() { return c10::Device(kDeviceType, 0); }

// (stream_id, device_index, device_type): the fields torch.Stream is built from.
py::tuple packed(const c10::Stream& s) {
  return py::make_tuple(s.id(), static_cast<int>(s.device_index()),
                        static_cast<int>(s.device_type()));
}

}  // namespace

void register_stream_bindings(py::module_& m) {
  m.def("current_stream", [] { return packed(guard().getStream(device0())); });
  m.def("default_stream", [] { return packed(guard().getDefaultStream(device0())); });
  // Makes `stream_id` the calling thread's current stream; returns the previous one's id.
  // Milliseconds between two webgpu events given by torch.Event.event_id (the guard's
  // event pointers; 0 for an event never recorded). torch.Event.elapsed_time refuses
  // subclasses as its argument, so torch.webgpu.Event comes here.
  m.def("event_elapsed_time", [](uintptr_t start, uintptr_t end) {
    if (!start || !end)
      throw std::runtime_error("Both events must be recorded before calculating elapsed time.");
    try {
      void* s = reinterpret_cast<void*>(start);
      void* e = reinterpret_cast<void*>(end);
      if (!guard().queryEvent(s) || !guard().queryEvent(e))
        throw std::runtime_error("Both events must be completed before calculating elapsed time.");
      return guard().elapsedTime(s, e, 0);
    } catch (const c10::Error& err) {
      throw std::runtime_error(err.what_without_backtrace());
    }
  });
  m.def("exchange_stream_id", [](int64_t stream_id) {
    return guard().exchangeStream(c10::Stream(c10::Stream::UNSAFE, device0(), stream_id)).id();
  });
}

}  // namespace twgpu::aten
