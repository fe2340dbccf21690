#include "engine/program.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <sstream>

#include "runtime/error.h"

namespace twgpu::engine {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& msg) {
  fail(ErrorKind::InvalidArgument, "program.json: " + msg);
}

const json& field(const json& obj, const char* name, const std::string& where) {
  if (!obj.is_object()) bad(where + " must be an object");
  auto it = obj.find(name);
  if (it == obj.end()) bad(where + " has no \"" + name + "\"");
  return *it;
}

int64_t integer(const json& j, const std::string& where) {
  if (!j.is_number_integer()) bad(where + " must be an integer");
  return j.get<int64_t>();
}

uint64_t count(const json& j, const std::string& where) {
  int64_t v = integer(j, where);
  if (v < 0) bad(where + " must not be negative");
  return static_cast<uint64_t>(v);
}

std::vector<int64_t> integers(const json& j, const std::string& where) {
  if (!j.is_array()) bad(where + " must be a list of integers");
  std::vector<int64_t> v;
  for (size_t i = 0; i < j.size(); ++i) v.push_back(integer(j[i], where + "[" + std::to_string(i) + "]"));
  return v;
}

TensorSpec parse_tensor(const json& j, const std::string& where) {
  TensorSpec t;
  const json& dt = field(j, "dtype", where);
  if (!dt.is_string()) bad(where + ".dtype must be a string");
  try {
    t.dtype = parse_dtype(dt.get<std::string>());
  } catch (const Error& e) {
    bad(where + ".dtype: " + e.what());
  }
  t.shape = integers(field(j, "shape", where), where + ".shape");
  // Sizes bounded so that element counts and byte spans cannot overflow.
  constexpr uint64_t kMaxElements = uint64_t(1) << 40;
  uint64_t numel = 1;
  bool empty = false;
  for (int64_t s : t.shape) {
    if (s < 0 || static_cast<uint64_t>(s) > kMaxElements) bad(where + ".shape has a bad size " + std::to_string(s));
    if (s == 0) empty = true;
    else if (numel > kMaxElements / static_cast<uint64_t>(s)) numel = kMaxElements + 1;
    else numel *= static_cast<uint64_t>(s);
  }
  if (!empty && numel > kMaxElements) bad(where + ".shape has more than 2^40 elements");
  if (j.contains("strides")) {
    t.strides = integers(j["strides"], where + ".strides");
    if (t.strides.size() != t.shape.size()) bad(where + ".strides and .shape differ in length");
    for (int64_t s : t.strides)
      if (s < 0 || s > (int64_t(1) << 40)) bad(where + ".strides has a bad stride " + std::to_string(s));
  } else {
    t.strides = contiguous_strides(t.shape);
  }
  if (j.contains("mem") && j.contains("constant")) bad(where + " has both \"mem\" and \"constant\"");
  if (j.contains("mem")) {
    const json& m = j["mem"];
    t.storage = Storage::Pool;
    t.pool = integer(field(m, "pool", where + ".mem"), where + ".mem.pool");
    t.offset = count(field(m, "offset", where + ".mem"), where + ".mem.offset");
  } else if (j.contains("constant")) {
    t.storage = Storage::Constant;
    t.offset = count(field(j["constant"], "offset", where + ".constant"), where + ".constant.offset");
  } else {
    t.storage = Storage::View;
  }
  if (j.contains("init")) {
    if (t.storage != Storage::Pool) bad(where + ".init needs \"mem\" (a state tensor lives in a pool)");
    if (t.strides != contiguous_strides(t.shape)) bad(where + ": a state tensor must be contiguous");
    t.is_state = true;
    t.init_offset = count(field(j["init"], "offset", where + ".init"), where + ".init.offset");
    if (t.init_offset % 4 != 0) bad(where + ".init.offset is not a multiple of 4");
  }
  if (t.offset % static_cast<uint64_t>(element_size(t.dtype)) != 0 || t.offset % 4 != 0)
    bad(where + ": byte offset " + std::to_string(t.offset) + " is not a multiple of 4 and of the element size");
  return t;
}

Value parse_value(const json& j, const std::string& where) {
  Value v;
  const json& type = field(j, "type", where);
  if (!type.is_string()) bad(where + ".type must be a string");
  const std::string k = type.get<std::string>();
  if (k == "tensor") {
    v.kind = ValueKind::Tensor;
    v.tensor = parse_tensor(j, where);
  } else if (k == "int") {
    v.kind = ValueKind::Int;
    v.i = integer(field(j, "value", where), where + ".value");
  } else if (k == "float") {
    v.kind = ValueKind::Float;
    const json& x = field(j, "value", where);
    if (x.is_string()) {  // JSON has no inf/nan
      const std::string s = x.get<std::string>();
      if (s == "inf") v.f = std::numeric_limits<double>::infinity();
      else if (s == "-inf") v.f = -std::numeric_limits<double>::infinity();
      else if (s == "nan") v.f = std::numeric_limits<double>::quiet_NaN();
      else bad(where + ".value must be a number, \"inf\", \"-inf\" or \"nan\"");
    } else if (x.is_number()) {
      v.f = x.get<double>();
    } else {
      bad(where + ".value must be a number");
    }
  } else if (k == "bool") {
    v.kind = ValueKind::Bool;
    const json& x = field(j, "value", where);
    if (!x.is_boolean()) bad(where + ".value must be true or false");
    v.b = x.get<bool>();
  } else if (k == "string") {
    v.kind = ValueKind::String;
    const json& x = field(j, "value", where);
    if (!x.is_string()) bad(where + ".value must be a string");
    v.s = x.get<std::string>();
  } else if (k == "int_list") {
    v.kind = ValueKind::IntList;
    v.ints = integers(field(j, "value", where), where + ".value");
  } else if (k == "tensor_list") {
    v.kind = ValueKind::TensorList;
    v.ints = integers(field(j, "items", where), where + ".items");
  } else if (k == "none") {
    v.kind = ValueKind::None;
  } else {
    bad(where + ": unknown value type \"" + k + "\"");
  }
  return v;
}

}  // namespace

uint64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

uint64_t TensorSpec::nbytes() const {
  if (numel() == 0) return 0;
  uint64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) last += static_cast<uint64_t>((shape[d] - 1) * strides[d]);
  return (last + 1) * static_cast<uint64_t>(element_size(dtype));
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  return s;
}

DType parse_dtype(const std::string& name) {
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                  DType::Int16, DType::Int8, DType::UInt8, DType::Bool})
    if (name == dtype_name(t)) return t;
  fail(ErrorKind::InvalidArgument, "unsupported dtype \"" + name +
                                       "\" (the engine runs float32, float16, bfloat16, int64, "
                                       "int32, int16, int8, uint8 and bool)");
}

std::string shape_text(DType dtype, const std::vector<int64_t>& shape) {
  std::ostringstream o;
  o << dtype_name(dtype) << "[";
  for (size_t d = 0; d < shape.size(); ++d) o << (d ? ", " : "") << shape[d];
  o << "]";
  return o.str();
}

Program parse_program(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    bad(std::string("not valid JSON: ") + e.what());
  }
  Program p;
  p.version = static_cast<int>(integer(field(j, "version", "the program"), "version"));
  if (p.version < kOldestProgramVersion || p.version > kProgramVersion)
    bad("version " + std::to_string(p.version) + " (this engine reads versions " +
        std::to_string(kOldestProgramVersion) + " to " + std::to_string(kProgramVersion) + ")");
  const json& values = field(j, "values", "the program");
  if (!values.is_array()) bad("values must be a list");
  for (size_t i = 0; i < values.size(); ++i)
    p.values.push_back(parse_value(values[i], "values[" + std::to_string(i) + "]"));
  const json& chain = field(j, "chain", "the program");
  if (!chain.is_array()) bad("chain must be a list");
  for (size_t i = 0; i < chain.size(); ++i) {
    const std::string where = "chain[" + std::to_string(i) + "]";
    OpCall c;
    const json& op = field(chain[i], "op", where);
    if (!op.is_string()) bad(where + ".op must be a string");
    c.op = op.get<std::string>();
    c.args = integers(field(chain[i], "args", where), where + ".args");
    c.outputs = integers(field(chain[i], "outputs", where), where + ".outputs");
    p.chain.push_back(std::move(c));
  }
  p.inputs = integers(field(j, "inputIds", "the program"), "inputIds");
  p.outputs = integers(field(j, "outputIds", "the program"), "outputIds");
  const json& pools = field(field(j, "memoryPlan", "the program"), "pools", "memoryPlan");
  if (!pools.is_array()) bad("memoryPlan.pools must be a list");
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string where = "memoryPlan.pools[" + std::to_string(i) + "]";
    uint64_t id = count(field(pools[i], "id", where), where + ".id");
    if (id != i) bad(where + ".id must be " + std::to_string(i) + " (pools are listed by id)");
    uint64_t size = count(field(pools[i], "size", where), where + ".size");
    if (size > (uint64_t(1) << 40)) bad(where + ".size is too large");
    p.pool_sizes.push_back(size);
  }
  if (j.contains("weights"))
    p.weights_size = count(field(j["weights"], "size", "weights"), "weights.size");
  return p;
}

namespace {

std::string value_name(int64_t id) { return "value " + std::to_string(id); }

void check_id(const Program& p, int64_t id, const std::string& where) {
  if (id < 0 || id >= static_cast<int64_t>(p.values.size()))
    bad(where + " names value " + std::to_string(id) + ", but there are " +
        std::to_string(p.values.size()) + " values");
}

}  // namespace

void check_program(const Program& p, uint64_t weights_bytes) {
  const int64_t n = static_cast<int64_t>(p.values.size());
  const int64_t end = static_cast<int64_t>(p.chain.size());
  if (p.weights_size > weights_bytes)
    bad("weights.bin holds " + std::to_string(weights_bytes) + " bytes, the program needs " +
        std::to_string(p.weights_size) + " (truncated?)");
  std::vector<int64_t> defined(n, -2), last_use(n, -2), base(n);
  for (int64_t v = 0; v < n; ++v) {
    base[v] = v;
    const Value& val = p.values[v];
    if (val.kind == ValueKind::TensorList)
      for (int64_t id : val.ints) {
        check_id(p, id, value_name(v));
        if (p.values[id].kind != ValueKind::Tensor && p.values[id].kind != ValueKind::None)
          bad(value_name(v) + " lists a value " + std::to_string(id) + " that is neither a tensor nor none");
      }
    if (val.kind != ValueKind::Tensor) continue;
    const TensorSpec& t = val.tensor;
    if (t.storage == Storage::Constant) {
      if (t.offset + t.nbytes() > weights_bytes)
        bad(value_name(v) + " (" + describe(t) + ") reaches past the end of weights.bin (" +
            std::to_string(weights_bytes) + " bytes; truncated?)");
      defined[v] = -1;
    } else if (t.storage == Storage::Pool) {
      if (t.pool < 0 || t.pool >= static_cast<int64_t>(p.pool_sizes.size()))
        bad(value_name(v) + " names pool " + std::to_string(t.pool) + ", but the plan has " +
            std::to_string(p.pool_sizes.size()) + " pools");
      if (t.offset + ((t.nbytes() + 3) & ~uint64_t(3)) > p.pool_sizes[t.pool] && t.numel() > 0)
        bad(value_name(v) + " (" + describe(t) + " at byte " + std::to_string(t.offset) +
            ") does not fit in pool " + std::to_string(t.pool) + " of " +
            std::to_string(p.pool_sizes[t.pool]) + " bytes");
      if (t.is_state) {
        if (p.version < 2) bad(value_name(v) + ": state tensors (\"init\") need program version 2");
        if (t.init_offset + t.nbytes() > weights_bytes)
          bad(value_name(v) + " (state " + describe(t) + ") starts from bytes past the end of weights.bin (" +
              std::to_string(weights_bytes) + " bytes; truncated?)");
        defined[v] = -1;  // alive from before the first op to after the last
      }
    }
  }
  // A state tensor's pool is its own: what a run leaves there is the next run's start.
  for (int64_t v = 0; v < n; ++v) {
    if (p.values[v].kind != ValueKind::Tensor || !p.values[v].tensor.is_state) continue;
    for (int64_t w = 0; w < n; ++w)
      if (w != v && p.values[w].kind == ValueKind::Tensor && p.values[w].tensor.storage == Storage::Pool &&
          p.values[w].tensor.pool == p.values[v].tensor.pool)
        bad("values " + std::to_string(v) + " (a state tensor) and " + std::to_string(w) + " share pool " +
            std::to_string(p.values[v].tensor.pool) + ": a state tensor's pool holds nothing else");
  }
  auto use = [&](int64_t id, int64_t at) {
    if (p.values[id].kind == ValueKind::TensorList) {
      for (int64_t e : p.values[id].ints)
        if (p.values[e].kind == ValueKind::Tensor) last_use[base[e]] = std::max(last_use[base[e]], at);
    } else {
      last_use[base[id]] = std::max(last_use[base[id]], at);
    }
  };
  for (int64_t id : p.inputs) {
    check_id(p, id, "inputIds");
    const Value& v = p.values[id];
    if (v.kind != ValueKind::Tensor || v.tensor.storage != Storage::Pool)
      bad("input " + value_name(id) + " must be a tensor in a pool");
    if (v.tensor.strides != contiguous_strides(v.tensor.shape))
      bad("input " + value_name(id) + " must be contiguous (no strides)");
    if (defined[id] != -2) bad("input " + value_name(id) + " is listed twice or is a state tensor");
    defined[id] = -1;
  }
  for (int64_t i = 0; i < end; ++i) {
    const OpCall& c = p.chain[i];
    const std::string where = "chain[" + std::to_string(i) + "] (" + c.op + ")";
    for (int64_t a : c.args) {
      check_id(p, a, where + " argument");
      const Value& v = p.values[a];
      if (v.kind == ValueKind::Tensor && defined[a] == -2)
        bad(where + " reads " + value_name(a) + " before anything defines it");
      if (v.kind == ValueKind::Tensor || v.kind == ValueKind::TensorList) use(a, i);
    }
    for (int64_t o : c.outputs) {
      check_id(p, o, where + " output");
      const Value& v = p.values[o];
      if (v.kind != ValueKind::Tensor) bad(where + " output " + value_name(o) + " is not a tensor");
      if (defined[o] != -2) bad(where + " redefines " + value_name(o));
      defined[o] = i;
      if (v.tensor.storage == Storage::Constant) bad(where + " writes constant " + value_name(o));
      if (v.tensor.storage == Storage::View) {
        // A view shares the storage of the op's first tensor argument.
        if (c.args.empty() || p.values[c.args[0]].kind != ValueKind::Tensor)
          bad(where + ": view output " + value_name(o) + " has no tensor to view");
        base[o] = base[c.args[0]];
      }
      last_use[base[o]] = std::max(last_use[base[o]], i);
    }
  }
  for (int64_t id : p.outputs) {
    check_id(p, id, "outputIds");
    if (p.values[id].kind != ValueKind::Tensor || defined[id] == -2)
      bad("output " + value_name(id) + " is not a tensor the program defines");
    last_use[base[id]] = end;
  }
  for (int64_t v = 0; v < n; ++v)
    if (p.values[v].kind == ValueKind::Tensor && p.values[v].tensor.is_state) last_use[v] = end;
  for (int64_t v = 0; v < n; ++v)
    if (p.values[v].kind == ValueKind::Tensor && p.values[v].tensor.storage == Storage::View &&
        defined[v] == -2)
      bad(value_name(v) + " has no memory and no op that defines it as a view");
  // Pool tensors whose bytes overlap must not be alive at the same time.
  std::vector<int64_t> in_pools;
  for (int64_t v = 0; v < n; ++v)
    if (p.values[v].kind == ValueKind::Tensor && p.values[v].tensor.storage == Storage::Pool &&
        defined[v] != -2 && p.values[v].tensor.numel() > 0)
      in_pools.push_back(v);
  for (size_t x = 0; x < in_pools.size(); ++x)
    for (size_t y = x + 1; y < in_pools.size(); ++y) {
      const int64_t a = in_pools[x], b = in_pools[y];
      const TensorSpec &ta = p.values[a].tensor, &tb = p.values[b].tensor;
      if (ta.pool != tb.pool) continue;
      const uint64_t ea = ta.offset + ((ta.nbytes() + 3) & ~uint64_t(3));
      const uint64_t eb = tb.offset + ((tb.nbytes() + 3) & ~uint64_t(3));
      if (ta.offset >= eb || tb.offset >= ea) continue;
      const int64_t ua = std::max(last_use[a], defined[a]), ub = std::max(last_use[b], defined[b]);
      if (defined[a] > ub || defined[b] > ua) continue;
      bad("values " + std::to_string(a) + " and " + std::to_string(b) + " share bytes of pool " +
          std::to_string(ta.pool) + " while both are alive (ops " + std::to_string(defined[a]) +
          ".." + std::to_string(ua) + " and " + std::to_string(defined[b]) + ".." +
          std::to_string(ub) + ")");
    }
}

}  // namespace twgpu::engine
