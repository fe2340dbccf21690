// torch_webgpu._C._engine: the AOT engine's Python face (wrapped by torch_webgpu/engine.py).
// Only this file of the engine sees pybind11; the engine itself stays torch-free.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "engine/context.h"
#include "engine/web_bundle.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace twgpu::engine {
namespace {

// Engine errors as the Python exceptions a user expects.
template <class F>
auto translated(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    switch (e.kind()) {
      case ErrorKind::InvalidArgument: throw py::value_error(e.what());
      case ErrorKind::Unsupported: throw py::type_error(std::string("NotImplemented: ") + e.what());
      default: throw std::runtime_error(e.what());
    }
  }
}

py::tuple host_to_py(const HostTensor& h) {
  return py::make_tuple(dtype_name(h.dtype), h.shape,
                        py::bytes(reinterpret_cast<const char*>(h.data.data()), h.data.size()));
}

HostTensor host_from_py(const py::tuple& t) {
  HostTensor h;
  h.dtype = parse_dtype(t[0].cast<std::string>());
  h.shape = t[1].cast<std::vector<int64_t>>();
  py::buffer_info info = t[2].cast<py::buffer>().request();
  const auto* p = static_cast<const uint8_t*>(info.ptr);
  h.data.assign(p, p + info.size * info.itemsize);
  return h;
}

py::list specs(const std::vector<const DeviceTensor*>& ts) {
  py::list l;
  for (const DeviceTensor* t : ts) l.append(py::make_tuple(dtype_name(t->dtype), t->shape));
  return l;
}

// A Python argument of record_shader as the engine's value.
ShaderArg shader_arg(const py::handle& o) {
  Value v;
  if (py::isinstance<Tensor>(o)) return ShaderArg::of(o.cast<Tensor>());
  if (o.is_none()) return ShaderArg::of(v);
  if (py::isinstance<py::bool_>(o)) {
    v.kind = ValueKind::Bool;
    v.b = o.cast<bool>();
  } else if (py::isinstance<py::int_>(o)) {
    v.kind = ValueKind::Int;
    v.i = o.cast<int64_t>();
  } else if (py::isinstance<py::float_>(o)) {
    v.kind = ValueKind::Float;
    v.f = o.cast<double>();
  } else if (py::isinstance<py::str>(o)) {
    v.kind = ValueKind::String;
    v.s = o.cast<std::string>();
  } else if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    py::sequence seq = o.cast<py::sequence>();
    if (seq.size() > 0 && py::isinstance<Tensor>(seq[0])) return ShaderArg::of(o.cast<std::vector<Tensor>>());
    v.kind = ValueKind::IntList;
    v.ints = o.cast<std::vector<int64_t>>();
  } else {
    throw py::type_error("record_shader: unsupported argument " + py::repr(o).cast<std::string>());
  }
  return ShaderArg::of(v);
}

}  // namespace

void register_engine_bindings(py::module_& parent) {
  py::module_ m = parent.def_submodule("_engine", "the ahead-of-time engine (torch_webgpu.engine)");
  m.def("registered_ops", [] { return registered_ops(); });
  m.def("run_web_bundle", [](const std::string& dir, const std::vector<py::tuple>& inputs) {
    return translated([&] {
      std::vector<HostTensor> in;
      for (const py::tuple& t : inputs) in.push_back(host_from_py(t));
      py::list out;
      for (const HostTensor& h : run_web_bundle(dir, in)) out.append(host_to_py(h));
      return out;
    });
  });

  py::class_<Tensor>(m, "Tensor")
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("shape", [](const Tensor& t) { return t.shape(); })
      .def("set_data", [](Tensor& t, py::buffer b) {
        py::buffer_info info = b.request();
        translated([&] { t.set_data(info.ptr, static_cast<uint64_t>(info.size * info.itemsize)); });
      })
      .def("get_data", [](const Tensor& t) {
        HostTensor h = translated([&] { return t.get_data(); });
        return py::bytes(reinterpret_cast<const char*>(h.data.data()), h.data.size());
      });

  py::class_<Executable>(m, "Program")
      .def_static("load", [](const std::string& json, py::bytes weights) {
        std::string w = weights;
        return translated([&] { return Executable::load(json, std::vector<uint8_t>(w.begin(), w.end())); });
      })
      .def_static("load_dir", [](const std::string& dir) { return translated([&] { return Executable::load_dir(dir); }); })
      .def("run", [](Executable& e, const std::vector<py::tuple>& inputs) {
        return translated([&] {
          std::vector<HostTensor> in;
          for (const py::tuple& t : inputs) in.push_back(host_from_py(t));
          py::list out;
          for (const HostTensor& h : e.run(in)) out.append(host_to_py(h));
          return out;
        });
      })
      .def_property_readonly("input_specs", [](const Executable& e) {
        std::vector<const DeviceTensor*> ts;
        for (size_t i = 0; i < e.num_inputs(); ++i) ts.push_back(&e.input(i));
        return specs(ts);
      })
      .def_property_readonly("output_specs", [](const Executable& e) {
        std::vector<const DeviceTensor*> ts;
        for (size_t i = 0; i < e.num_outputs(); ++i) ts.push_back(&e.output(i));
        return specs(ts);
      })
      .def_property_readonly("launches_per_run", &Executable::launches_per_run)
      .def("reset_state", [](Executable& e) { translated([&] { e.reset_state(); }); })
      .def("emit_web", [](Executable& e, const std::string& out_dir) {
        translated([&] { write_web_bundle(e, out_dir); });
      });

  py::class_<Context>(m, "Context")
      .def(py::init([] { return translated([] { return std::make_unique<Context>(); }); }))
      .def("tensor", [](Context& c, const std::string& dtype, const std::vector<int64_t>& shape) {
        return translated([&] { return c.tensor(parse_dtype(dtype), shape); });
      })
      .def("record_shader", [](Context& c, const std::string& op, const py::list& args,
                               const std::vector<Tensor>& outputs) {
        std::vector<ShaderArg> a;
        for (const py::handle& o : args) a.push_back(shader_arg(o));
        translated([&] { c.record_shader(op, a, outputs); });
      })
      .def("record_program", [](Context& c, Executable& p, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& outputs) {
        translated([&] { c.record_program(p, inputs, outputs); });
      })
      .def("submit", [](Context& c) { translated([&] { c.submit(); }); })
      .def("sync", [](Context& c) { translated([&] { c.sync(); }); })
      .def_property_readonly("dispatches", &Context::dispatches);
}

}  // namespace twgpu::engine
