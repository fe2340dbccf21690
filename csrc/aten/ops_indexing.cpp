// Native indexing ops: gather/scatter (all reductions), index_select/add/copy/fill/reduce,
// take/put, advanced indexing (index.Tensor, index_put with accumulate), masked_fill,
// masked_select, masked_scatter, nonzero, embedding_dense_backward.
//
// PyTorch's own shape/dtype checks run first on meta tensors (same messages as on CPU).
// Index values are checked on the CPU when the index tensor is there (PyTorch's message,
// raised at once), and otherwise on the device: kernels skip out-of-range elements and
// set the device error word, which raises at the next synchronization
// (runtime/device_checks.h), or at once with TORCH_WEBGPU_SYNC_CHECKS=1.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/segment_reduce.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/take.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/embedding_renorm_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_copy_ops.h>
#include <ATen/ops/index_fill_ops.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/index_reduce.h>
#include <ATen/ops/index_reduce_ops.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/masked_scatter_ops.h>
#include <ATen/ops/masked_select_ops.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/nonzero_ops.h>
#include <ATen/ops/nonzero_static_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/put_ops.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/scatter_reduce_ops.h>
#include <ATen/ops/take_ops.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cstring>
#include <limits>

#include "aten/sync_debug.h"
#include "aten/cpu_fallback.h"
#include "aten/structured_meta.h"
#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/indexing.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using Dims = std::vector<int64_t>;

Dims vec(c10::IntArrayRef a) { return Dims(a.begin(), a.end()); }

Tensor meta(const Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}
// An empty meta tensor for out= checks (dtype only; shape is ours to set).
Tensor meta_out(const Tensor& out) { return at::empty({0}, out.options().device(at::kMeta)); }

// The meta functions of several indexing ops are PyTorch's Python ones (torch._meta_
// registrations): tens of microseconds per call. Arguments these predicates accept pass
// them for sure, so only the others run them (to raise PyTorch's errors).
bool dim_ok(const Tensor& t, int64_t dim) {
  const int64_t n = std::max<int64_t>(t.dim(), 1);
  return dim >= -n && dim < n;
}
bool index_vector(const Tensor& index, bool allow_int) {
  return index.dim() <= 1 &&
         (index.scalar_type() == at::kLong || (allow_int && index.scalar_type() == at::kInt));
}
// source has self's dtype and shape, but index.numel() entries along dim.
bool source_fits(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  if (source.scalar_type() != self.scalar_type() || self.dim() == 0 || source.dim() != self.dim())
    return false;
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  for (int64_t k = 0; k < self.dim(); ++k)
    if (source.size(k) != (k == d ? index.numel() : self.size(k))) return false;
  return true;
}

// Kernels walk at most kIndexMaxDims dims; more go to the CPU fallback.
bool fits(const Tensor& t) { return t.dim() <= kIndexMaxDims; }
bool holdable(const Tensor& t) { return to_dtype(t.scalar_type()).has_value() && fits(t); }
bool computable(const Tensor& t) { return is_native_compute(t.scalar_type()); }

StridedArg strided(const Tensor& t, Dims strides) {
  DeviceRef r = device_ref(t);
  return StridedArg{r.buffer, r.offset, r.dtype, std::move(strides)};
}

int64_t size_or_1(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
int64_t stride_or_1(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.stride(d); }

// How an op words a bad index (matching the CPU).
enum class BadIndex { Select, Bounds, BoundsIndexError, Copy, Take };

[[noreturn]] void raise_bad_index(BadIndex style, int64_t v, int64_t dim, int64_t size) {
  switch (style) {
    case BadIndex::Select: TORCH_CHECK_INDEX(false, "index out of range in self");
    case BadIndex::Bounds:
      TORCH_CHECK(false, "index ", v, " is out of bounds for dimension ", dim, " with size ", size);
    case BadIndex::BoundsIndexError:
      TORCH_CHECK_INDEX(false, "index ", v, " is out of bounds for dimension ", dim, " with size ", size);
    case BadIndex::Copy:
      TORCH_CHECK_INDEX(false, "index_copy_(): index ", v, " is out of bounds for dimension ", dim,
                        " with size ", size);
    case BadIndex::Take:
      TORCH_CHECK_INDEX(false, "out of range: tried to access index ", v, " on a tensor of ", size,
                        " elements.");
  }
  TORCH_CHECK(false, "bad index");
}

// The index on the device. A CPU index (cheap to inspect) is checked here with PyTorch's
// message; a device index is checked by the kernel.
Tensor device_index(const Tensor& index, const Tensor& self, int64_t bound, bool wrap, BadIndex style,
                    int64_t dim) {
  if (index.device() == self.device()) return index;
  if (index.numel() > 0) {
    auto [mn, mx] = at::aminmax(index);
    int64_t lo = mn.item<int64_t>(), hi = mx.item<int64_t>();
    if (hi >= bound) raise_bad_index(style, hi, dim, bound);
    if (lo < (wrap ? -bound : 0)) raise_bad_index(style, lo, dim, bound);
  }
  return index.to(self.device());
}

// Operands other than indices must live with self (CUDA's rule for these ops).
void check_same_device(const Tensor& self, const Tensor& t, const char* arg, const char* op) {
  TORCH_CHECK(t.device() == self.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", t.device(), "! (when checking argument for argument ", arg, " in method ", op, ")");
}

uint32_t check_code(Context& ctx, const char* op) {
  return ctx.checks().code_for(std::string("index out of bounds in ") + op);
}

void scalar_words(const c10::Scalar& v, at::ScalarType st, uint32_t out[4]) {
  Tensor t = at::scalar_tensor(v, at::TensorOptions().dtype(st));
  std::memset(out, 0, 16);
  std::memcpy(out, t.const_data_ptr(), t.element_size());
}

bool same_buffer(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.numel() && b.numel() && allocation_of(a) == allocation_of(b);
}

// Where a gather writes: `out` itself when it is contiguous and shares no buffer with the
// inputs, else a fresh tensor copied into out afterwards.
Tensor gather_destination(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  bool direct = out.is_contiguous();
  for (const Tensor* t : inputs) direct = direct && !same_buffer(out, *t);
  return direct ? out : at::empty(out.sizes(), out.options());
}

Dims contiguous_strides(const Tensor& t) {
  Dims s(t.dim());
  int64_t acc = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= t.size(d);
  }
  return s;
}

// ---- gather / index_select / take ----------------------------------------------------

// values[i] = self[... index[i] along dim ...] over `shape` (= the output's shape).
// `index_strides` place the index over the output dims.
void run_gather(const char* op, const Tensor& self, int64_t dim, const Tensor& idx, Dims index_strides,
                bool wrap, Tensor& out) {
  Tensor dst = gather_destination(out, {&self, &idx});
  Dims shape = vec(out.sizes());
  Dims tstrides(shape.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int64_t>(d) != dim && static_cast<int64_t>(d) < self.dim()) tstrides[d] = self.stride(d);
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  l.shape = shape;
  l.target = strided(self, tstrides);
  l.indices.push_back({strided(idx, std::move(index_strides)), size_or_1(self, dim), stride_or_1(self, dim)});
  l.values = strided(dst, contiguous_strides(dst));
  l.wrap_negative = wrap;
  l.check_code = check_code(lock.ctx(), op);
  indexed_gather(lock.ctx(), l);
  TWGPU_CATCH
  if (!dst.is_same(out)) out.copy_(dst);
}

Tensor& gather_out(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::gather_out(mo, meta(self), dim, meta(index), sparse_grad);
  }
  if (!holdable(self)) return call_cpu_fallback<at::_ops::gather_out>(self, dim, index, sparse_grad, out);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  if (self.numel() == 0) raise_bad_index(BadIndex::Bounds, 0, d, 0);
  Tensor idx = device_index(index, self, size_or_1(self, d), false, BadIndex::Bounds, d);
  Dims is(index.dim());
  for (int64_t k = 0; k < index.dim(); ++k) is[k] = idx.stride(k);
  run_gather("aten::gather", self, d, idx, is, false, out);
  return out;
}

Tensor& index_select_out(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  if (!(index_vector(index, true) && dim_ok(self, dim) && out.scalar_type() == self.scalar_type() &&
        (self.dim() > 0 || index.numel() == 1))) {
    Tensor mo = meta_out(out);
    at::index_select_out(mo, meta(self), dim, meta(index));
  }
  if (!holdable(self)) return call_cpu_fallback<at::_ops::index_select_out>(self, dim, index, out);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Dims shape = vec(self.sizes());
  if (self.dim() > 0) shape[d] = index.numel();
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  if (self.numel() == 0) raise_bad_index(BadIndex::Select, 0, d, 0);
  Tensor idx = device_index(index, self, size_or_1(self, d), false, BadIndex::Select, d);
  Dims is(out.dim(), 0);
  if (out.dim() > 0) is[d] = idx.dim() ? idx.stride(0) : 0;
  run_gather("aten::index_select", self, d, idx, is, false, out);
  return out;
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

Tensor& take_out(const Tensor& self, const Tensor& index, Tensor& out) {
  if (!(index.scalar_type() == at::kLong && out.scalar_type() == self.scalar_type() &&
        (self.numel() > 0 || index.numel() == 0))) {
    Tensor mo = meta_out(out);
    at::_ops::take_out::call(meta(self), meta(index), mo);
  }
  if (!holdable(self) || !fits(index)) return call_cpu_fallback<at::_ops::take_out>(self, index, out);
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  Tensor flat = self.contiguous().view({-1});
  if (flat.numel() == 0) raise_bad_index(BadIndex::Take, 0, 0, 0);
  Tensor idx = device_index(index, self, flat.numel(), true, BadIndex::Take, 0);
  Tensor dst = gather_destination(out, {&flat, &idx});
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  l.shape = vec(index.sizes());
  l.target = strided(flat, Dims(l.shape.size(), 0));
  l.indices.push_back({strided(idx, vec(idx.strides())), flat.numel(), 1});
  l.values = strided(dst, contiguous_strides(dst));
  l.check_code = check_code(lock.ctx(), "aten::take");
  indexed_gather(lock.ctx(), l);
  TWGPU_CATCH
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

Tensor take(const Tensor& self, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return take_out(self, index, out);
}

// ---- scatter family ------------------------------------------------------------------

struct ScatterSpec {
  const char* op;
  Dims shape;          // iteration shape
  int64_t dim;         // target dim the index replaces (-1: none, flat target)
  Tensor index;        // on the device
  Dims index_strides;  // over the iteration dims
  const Tensor* src = nullptr;  // same dtype as the target, or a scalar:
  c10::Scalar value;
  Dims src_strides;
  bool wrap = false;
};

// target[...] = combine(target[...], value) in place (target on the device, any layout).
void run_scatter(Tensor& target, const ScatterSpec& s, IndexCombine combine) {
  uint64_t n = 1;
  for (int64_t v : s.shape) n *= static_cast<uint64_t>(v);
  if (n == 0) return;
  Tensor src = s.src ? *s.src : Tensor();
  if (src.defined() && same_buffer(src, target)) src = src.clone();
  Tensor idx = s.index;
  if (idx.defined() && same_buffer(idx, target)) idx = idx.clone();
  Dims tstrides(s.shape.size(), 0);
  int64_t bound = 0, tstride = 0;
  if (s.dim >= 0) {
    for (size_t d = 0; d < s.shape.size(); ++d)
      if (static_cast<int64_t>(d) != s.dim && static_cast<int64_t>(d) < target.dim()) tstrides[d] = target.stride(d);
    bound = size_or_1(target, s.dim);
    tstride = stride_or_1(target, s.dim);
  } else {
    bound = target.numel();
    tstride = 1;
  }
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  l.shape = s.shape;
  l.target = strided(target, tstrides);
  l.indices.push_back({strided(idx, s.index_strides), bound, tstride});
  if (src.defined()) {
    l.values = strided(src, s.src_strides);
  } else {
    l.use_scalar = true;
    scalar_words(s.value, target.scalar_type(), l.scalar_words);
  }
  l.wrap_negative = s.wrap;
  l.check_code = check_code(lock.ctx(), s.op);
  if (target.scalar_type() == at::kLong && (combine == IndexCombine::Max || combine == IndexCombine::Min)) {
    // Needs a contiguous target; the element offset of `to` is then the row-major index.
    Tensor work = target.is_contiguous() ? target : target.contiguous();
    if (!work.is_same(target)) {
      Dims ts(s.shape.size(), 0);
      for (size_t d = 0; d < s.shape.size(); ++d)
        if (static_cast<int64_t>(d) != s.dim && static_cast<int64_t>(d) < work.dim()) ts[d] = work.stride(d);
      l.target = strided(work, ts);
      l.indices[0].target_stride = s.dim >= 0 ? stride_or_1(work, s.dim) : 1;
    }
    indexed_scatter_extreme_i64(lock.ctx(), l, combine == IndexCombine::Max, static_cast<uint64_t>(work.numel()));
    if (!work.is_same(target)) target.copy_(work);
  } else {
    indexed_scatter(lock.ctx(), l, combine);
  }
  TWGPU_CATCH
}

// The identity of a reduction in `st` (used when include_self is false).
c10::Scalar reduction_identity(IndexCombine c, at::ScalarType st) {
  if (c == IndexCombine::Add) return 0;
  if (c == IndexCombine::Mul) return 1;
  bool hi = c == IndexCombine::Min;
  switch (st) {
    case at::kFloat: case at::kHalf: case at::kBFloat16:
      return hi ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    case at::kInt: return hi ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    case at::kShort: return hi ? std::numeric_limits<int16_t>::max() : std::numeric_limits<int16_t>::min();
    case at::kChar: return hi ? std::numeric_limits<int8_t>::max() : std::numeric_limits<int8_t>::min();
    case at::kByte: return hi ? 255 : 0;
    case at::kBool: return hi ? 1 : 0;
    default: return hi ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
}

enum class Reduce { None, Sum, Prod, Mean, Max, Min };

Reduce parse_reduce(c10::string_view r) {
  if (r == "sum" || r == "add") return Reduce::Sum;
  if (r == "prod" || r == "multiply") return Reduce::Prod;
  if (r == "mean") return Reduce::Mean;
  if (r == "amax") return Reduce::Max;
  if (r == "amin") return Reduce::Min;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
}

IndexCombine combine_of(Reduce r) {
  switch (r) {
    case Reduce::None: return IndexCombine::Assign;
    case Reduce::Sum: case Reduce::Mean: return IndexCombine::Add;
    case Reduce::Prod: return IndexCombine::Mul;
    case Reduce::Max: return IndexCombine::Max;
    case Reduce::Min: return IndexCombine::Min;
  }
  return IndexCombine::Assign;
}

bool scatter_native(const Tensor& out, Reduce r) {
  auto dt = to_dtype(out.scalar_type());
  return dt && fits(out) && indexed_scatter_supports(*dt, combine_of(r));
}

// out = self, then the reduction into out. `spec` describes the scatter; `add_counts`
// scatters ones into a count tensor the same way (mean divides by the counts).
template <class CountFn>
void scatter_reduce_into(const Tensor& self, Tensor& out, ScatterSpec spec, Reduce r, bool include_self,
                         CountFn add_counts) {
  if (!out.is_same(self)) out.copy_(self);
  IndexCombine c = combine_of(r);
  if (!include_self && r != Reduce::None) {
    ScatterSpec id = spec;
    id.src = nullptr;
    id.value = reduction_identity(c, out.scalar_type());
    run_scatter(out, id, IndexCombine::Assign);
  }
  run_scatter(out, spec, c);
  if (r == Reduce::Mean) {
    Tensor count = include_self ? at::ones_like(out, at::MemoryFormat::Contiguous)
                                : at::zeros_like(out, at::MemoryFormat::Contiguous);
    add_counts(count);
    count.masked_fill_(count.eq(0), 1);
    if (out.is_floating_point()) out.div_(count);
    else out.div_(count, "floor");
  }
}

ScatterSpec scatter_spec(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                         const Tensor* src) {
  ScatterSpec s;
  s.op = op;
  s.dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  s.shape = vec(index.sizes());
  s.index = device_index(index, self, size_or_1(self, s.dim), false, BadIndex::Bounds, s.dim);
  s.index_strides = vec(s.index.strides());
  s.src = src;
  if (src) {
    s.src_strides.assign(s.shape.size(), 0);
    for (size_t d = 0; d < s.shape.size() && static_cast<int64_t>(d) < src->dim(); ++d)
      s.src_strides[d] = src->stride(d);
  }
  return s;
}

void scatter_common(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                    const c10::Scalar* value, Reduce r, bool include_self, Tensor& out, const char* op) {
  if (src) check_same_device(self, *src, "src", op);
  at::native::resize_output(out, self.sizes());
  if (index.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  if (self.numel() == 0) raise_bad_index(BadIndex::Bounds, 0, 0, 0);
  ScatterSpec s = scatter_spec(op, self, dim, index, src);
  if (value) s.value = *value;
  scatter_reduce_into(self, out, s, r, include_self, [&](Tensor& count) {
    Tensor ones = at::ones_like(index, out.options());
    ScatterSpec cs = scatter_spec(op, count, dim, s.index, &ones);
    run_scatter(count, cs, IndexCombine::Add);
  });
}

Tensor& scatter_src_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_out(mo, meta(self), dim, meta(index), meta(src));
  }
  if (!holdable(self)) return call_cpu_fallback<at::_ops::scatter_src_out>(self, dim, index, src, out);
  scatter_common(self, dim, index, &src, nullptr, Reduce::None, true, out, "aten::scatter");
  return out;
}

Tensor& scatter_value_out(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value,
                          Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_out(mo, meta(self), dim, meta(index), value);
  }
  if (!holdable(self)) return call_cpu_fallback<at::_ops::scatter_value_out>(self, dim, index, value, out);
  scatter_common(self, dim, index, nullptr, &value, Reduce::None, true, out, "aten::scatter");
  return out;
}

Tensor& scatter_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           c10::string_view reduce, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_out(mo, meta(self), dim, meta(index), meta(src), reduce);
  }
  Reduce r = parse_reduce(reduce);
  if (!scatter_native(self, r))
    return call_cpu_fallback<at::_ops::scatter_reduce_out>(self, dim, index, src, reduce, out);
  scatter_common(self, dim, index, &src, nullptr, r, true, out, "aten::scatter");
  return out;
}

Tensor& scatter_value_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value,
                                 c10::string_view reduce, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_out(mo, meta(self), dim, meta(index), value, reduce);
  }
  Reduce r = parse_reduce(reduce);
  if (!scatter_native(self, r))
    return call_cpu_fallback<at::_ops::scatter_value_reduce_out>(self, dim, index, value, reduce, out);
  scatter_common(self, dim, index, nullptr, &value, r, true, out, "aten::scatter");
  return out;
}

Tensor& scatter_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_add_out(mo, meta(self), dim, meta(index), meta(src));
  }
  if (!scatter_native(self, Reduce::Sum))
    return call_cpu_fallback<at::_ops::scatter_add_out>(self, dim, index, src, out);
  scatter_common(self, dim, index, &src, nullptr, Reduce::Sum, true, out, "aten::scatter_add");
  return out;
}

Tensor& scatter_reduce_two_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::scatter_reduce_out(mo, meta(self), dim, meta(index), meta(src), reduce, include_self);
  }
  Reduce r = parse_reduce(reduce);
  if (!scatter_native(self, r))
    return call_cpu_fallback<at::_ops::scatter_reduce_two_out>(self, dim, index, src, reduce, include_self, out);
  scatter_common(self, dim, index, &src, nullptr, r, include_self, out, "aten::scatter_reduce");
  return out;
}

// ---- index_add / index_copy / index_fill / index_reduce --------------------------------

// Scatter along `dim` with a 1-D index over `source`'s shape (index_add and friends).
ScatterSpec index_dim_spec(const char* op, const Tensor& self, int64_t d, const Tensor& idx, const Tensor* source,
                           Dims shape) {
  ScatterSpec s;
  s.op = op;
  s.dim = d;
  s.shape = std::move(shape);
  s.index = idx;
  s.index_strides.assign(s.shape.size(), 0);
  if (!s.shape.empty()) s.index_strides[d] = idx.dim() ? idx.stride(0) : 0;
  s.src = source;
  if (source) {
    s.src_strides.assign(s.shape.size(), 0);
    for (int64_t k = 0; k < source->dim(); ++k) s.src_strides[k] = source->stride(k);
  }
  return s;
}

Dims source_shape(const Tensor& self, const Tensor& source) {
  // A 0-dim source goes with a 0-dim self (or a 1-element index).
  Dims shape = vec(source.sizes());
  if (shape.empty() && self.dim() > 0) shape.assign(self.dim(), 1);
  return shape;
}

Tensor& index_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const c10::Scalar& alpha, Tensor& out) {
  if (!(index_vector(index, true) && dim_ok(self, dim) && source_fits(self, dim, index, source) &&
        out.scalar_type() == self.scalar_type() && !alpha.isComplex())) {
    Tensor mo = meta_out(out);
    at::index_add_out(mo, meta(self), dim, meta(index), meta(source), alpha);
  }
  if (!scatter_native(self, Reduce::Sum))
    return call_cpu_fallback<at::_ops::index_add_out>(self, dim, index, source, alpha, out);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0 || source.numel() == 0) return out;
  Tensor idx = device_index(index, self, size_or_1(self, d), false, BadIndex::Bounds, d);
  Tensor src = source.dim() == 0 && self.dim() > 0 ? source.reshape(Dims(self.dim(), 1)) : source;
  bool unit = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0;
  if (!unit) src = src.mul(alpha);
  ScatterSpec s = index_dim_spec("aten::index_add", out, d, idx, &src, vec(src.sizes()));
  run_scatter(out, s, IndexCombine::Add);
  return out;
}

Tensor& index_copy_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Tensor& out) {
  if (!(index_vector(index, false) && dim_ok(self, dim) && source_fits(self, dim, index, source) &&
        out.scalar_type() == self.scalar_type())) {
    Tensor mo = meta_out(out);
    at::index_copy_out(mo, meta(self), dim, meta(index), meta(source));
  }
  if (!holdable(self)) return call_cpu_fallback<at::_ops::index_copy_out>(self, dim, index, source, out);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0 || source.numel() == 0) return out;
  Tensor idx = device_index(index, self, size_or_1(self, d), false, BadIndex::Copy, d);
  Tensor src = source.dim() == 0 && self.dim() > 0 ? source.reshape(Dims(self.dim(), 1)) : source;
  ScatterSpec s = index_dim_spec("aten::index_copy", out, d, idx, &src, vec(src.sizes()));
  run_scatter(out, s, IndexCombine::Assign);
  return out;
}

Tensor& index_fill_scalar_(Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value) {
  if (!(index_vector(index, false) && dim_ok(self, dim) && !value.isComplex())) {
    Tensor m = meta(self);
    at::_ops::index_fill__int_Scalar::call(m, dim, meta(index), value);
  }
  if (!holdable(self) || (value.isComplex() && !self.is_complex()))
    return call_cpu_fallback<at::_ops::index_fill__int_Scalar>(self, dim, index, value);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (index.numel() == 0 || self.numel() == 0) return self;
  Tensor idx = device_index(index, self, size_or_1(self, d), true, BadIndex::BoundsIndexError, d);
  Dims shape = vec(self.sizes());
  if (!shape.empty()) shape[d] = idx.numel();
  ScatterSpec s = index_dim_spec("aten::index_fill_", self, d, idx.reshape({-1}), nullptr, shape);
  s.value = value;
  s.wrap = true;
  run_scatter(self, s, IndexCombine::Assign);
  return self;
}

Tensor& index_fill_tensor_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
              " dimension(s).");
  return index_fill_scalar_(self, dim, index, value.item());
}

Tensor& index_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                         c10::string_view reduce, bool include_self, Tensor& out) {
  {
    Tensor mo = meta_out(out);
    at::index_reduce_out(mo, meta(self), dim, meta(index), meta(source), reduce, include_self);
  }
  Reduce r = parse_reduce(reduce);
  if (!scatter_native(self, r))
    return call_cpu_fallback<at::_ops::index_reduce_out>(self, dim, index, source, reduce, include_self, out);
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  at::native::resize_output(out, self.sizes());
  if (index.numel() == 0 || source.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return out;
  }
  Tensor idx = device_index(index, self, size_or_1(self, d), false, BadIndex::Select, d);
  Tensor src = source.dim() == 0 && self.dim() > 0 ? source.reshape(Dims(self.dim(), 1)) : source;
  ScatterSpec s = index_dim_spec("aten::index_reduce", out, d, idx, &src, vec(src.sizes()));
  scatter_reduce_into(self, out, s, r, include_self, [&](Tensor& count) {
    Tensor ones = at::ones_like(src, count.options());
    ScatterSpec cs = index_dim_spec("aten::index_reduce", count, d, idx, &ones, vec(ones.sizes()));
    run_scatter(count, cs, IndexCombine::Add);
  });
  return out;
}

// Accumulating into a half type, the CPU adds the values bound for one element one after
// another in index order, rounding every sum to the half type; atomics would add them in
// whatever order the GPU runs, a different answer from run to run (a few ulps apart, past
// float16's tolerance when many indices repeat). So for half types: sort the destinations
// stably, put each element's old value before its values, and let segment_reduce (which
// rounds every step, as the CPU does) sum each run in order. `dest` holds flat element
// numbers of `target` (contiguous), checked and wrapped; `values` one value per entry.
void accumulate_in_index_order(Tensor& target, const Tensor& dest, const Tensor& values) {
  Tensor flat = target.view({-1});
  auto [sorted, perm] = at::sort(dest.reshape({-1}), /*stable=*/true, /*dim=*/0, /*descending=*/false);
  auto [elements, group, counts] = at::unique_consecutive(sorted, /*return_inverse=*/true, /*return_counts=*/true);
  const int64_t n = sorted.numel(), groups = elements.numel();
  Tensor offsets = at::cat({at::zeros({1}, counts.options()), at::cumsum(counts.add(1), 0)});
  Tensor runs = at::empty({n + groups}, target.options());
  runs.index_copy_(0, offsets.slice(0, 0, groups), flat.index_select(0, elements));
  runs.index_copy_(0, at::arange(n, counts.options()).add(group).add(1), values.reshape({-1}).index_select(0, perm));
  Tensor sums = at::segment_reduce(runs, "sum", std::nullopt, std::nullopt, offsets, 0, /*unsafe=*/true);
  flat.index_copy_(0, elements, sums);
}

bool half_type(const Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

// Flat element numbers of `self` as an index tensor of its shape, to map indices to elements.
Tensor element_numbers(const Tensor& self) {
  return at::arange(self.numel(), self.options().dtype(at::kLong)).view(self.sizes());
}

Tensor& put_(Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  {
    Tensor m = meta(self);
    at::_ops::put_::call(m, meta(index), meta(source), accumulate);
  }
  if (!scatter_native(self, accumulate ? Reduce::Sum : Reduce::None) || !fits(index))
    return call_cpu_fallback<at::_ops::put_>(self, index, source, accumulate);
  check_same_device(self, source, "source", "put_");
  if (index.numel() == 0) return self;
  if (self.numel() == 0) raise_bad_index(BadIndex::Take, 0, 0, 0);
  Tensor target = self.is_contiguous() ? self : self.contiguous();
  if (accumulate && half_type(self)) {
    accumulate_in_index_order(target, at::take(element_numbers(self), index), source);
    if (!target.is_same(self)) self.copy_(target);
    return self;
  }
  Tensor idx = device_index(index, self, self.numel(), true, BadIndex::Take, 0);
  Tensor src = source.reshape(index.sizes());
  ScatterSpec s;
  s.op = "aten::put_";
  s.shape = vec(idx.sizes());
  s.dim = -1;
  s.index = idx;
  s.index_strides = vec(idx.strides());
  s.src = &src;
  s.src_strides = vec(src.strides());
  s.wrap = true;
  Tensor flat = target.view({-1});
  run_scatter(flat, s, accumulate ? IndexCombine::Add : IndexCombine::Assign);
  if (!target.is_same(self)) self.copy_(target);
  return self;
}

// ---- advanced indexing -----------------------------------------------------------------

// self[indices] described for the kernels: iteration (= result) shape, target strides,
// and each index tensor placed over the result dims.
struct Advanced {
  Tensor self;  // possibly permuted so indexed dims are adjacent
  Dims shape, target_strides;
  std::vector<Tensor> indices;
  std::vector<Dims> index_strides;
  std::vector<int64_t> bounds, dims;
};

Advanced advanced(const Tensor& self_in, const c10::List<std::optional<Tensor>>& orig) {
  at::native::checkIndexTensorTypes(orig, /*allow_int*/ true);
  auto indices = at::native::expandTensors(self_in, orig, /*ensure_same_device=*/false);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      at::native::shapes_as_str(indices));
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self_in.dim(), "too many indices for tensor of dimension ",
                    self_in.dim(), " (got ", indices.size(), ")");
  while (indices.size() < static_cast<size_t>(self_in.dim())) indices.emplace_back();
  Tensor self = self_in;
  if (!at::native::hasContiguousSubspace(indices)) std::tie(self, indices) = at::native::transposeToFront(self, indices);
  Advanced a;
  a.self = self;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(indices.size()); ++d)
    if (indices[d].defined()) {
      if (first < 0) first = d;
      last = d;
    }
  Dims rep = vec(indices[first].sizes());
  const int64_t before = first, nrep = static_cast<int64_t>(rep.size());
  for (int64_t d = 0; d < before; ++d) a.shape.push_back(self.size(d)), a.target_strides.push_back(self.stride(d));
  for (int64_t k = 0; k < nrep; ++k) a.shape.push_back(rep[k]), a.target_strides.push_back(0);
  for (int64_t d = last + 1; d < self.dim(); ++d) a.shape.push_back(self.size(d)), a.target_strides.push_back(self.stride(d));
  for (int64_t d = first; d <= last; ++d) {
    const Tensor& ix = indices[d];
    Dims st(a.shape.size(), 0);
    for (int64_t k = 0; k < nrep; ++k) st[before + k] = ix.stride(k);
    a.indices.push_back(ix);
    a.index_strides.push_back(st);
    a.bounds.push_back(self.size(d));
    a.dims.push_back(d);
  }
  return a;
}

// Index tensors on the device (CPU ones checked here, like the CPU does).
void place_indices(Advanced& a, const Tensor& like) {
  for (size_t k = 0; k < a.indices.size(); ++k)
    a.indices[k] = device_index(a.indices[k], like, a.bounds[k], true, BadIndex::BoundsIndexError, a.dims[k]);
}

bool advanced_native(const Advanced& a) {
  return a.shape.size() <= static_cast<size_t>(kIndexMaxDims) &&
         a.indices.size() <= static_cast<size_t>(kIndexMaxTensors);
}

void fill_advanced(IndexedLaunch& l, const Advanced& a, const Tensor& target) {
  l.shape = a.shape;
  l.target = strided(target, a.target_strides);
  for (size_t k = 0; k < a.indices.size(); ++k)
    l.indices.push_back({strided(a.indices[k], a.index_strides[k]), a.bounds[k], target.stride(a.dims[k])});
  l.wrap_negative = true;
}

Tensor& index_out(const Tensor& self, const c10::List<std::optional<Tensor>>& indices, Tensor& out) {
  if (!holdable(self)) return call_cpu_fallback<at::_ops::index_Tensor_out>(self, indices, out);
  Advanced a = advanced(self, indices);
  if (!advanced_native(a)) return call_cpu_fallback<at::_ops::index_Tensor_out>(self, indices, out);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
              out.scalar_type(), ") must have the same scalar type");
  at::native::resize_output(out, a.shape);
  if (out.numel() == 0) return out;
  if (a.self.numel() == 0) raise_bad_index(BadIndex::BoundsIndexError, 0, a.dims[0], 0);
  place_indices(a, self);
  std::vector<const Tensor*> ins = {&a.self};
  Tensor dst = out.is_contiguous() && !same_buffer(out, a.self) ? out : at::empty(out.sizes(), out.options());
  for (const Tensor& ix : a.indices)
    if (same_buffer(dst, ix)) dst = at::empty(out.sizes(), out.options());
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  fill_advanced(l, a, a.self);
  l.values = strided(dst, contiguous_strides(dst));
  l.check_code = check_code(lock.ctx(), "aten::index");
  indexed_gather(lock.ctx(), l);
  TWGPU_CATCH
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

Tensor& index_put_impl_(Tensor& self, const c10::List<std::optional<Tensor>>& indices, const Tensor& values,
                        bool accumulate, bool unsafe) {
  auto fallback = [&]() -> Tensor& {
    return call_cpu_fallback<at::_ops::_index_put_impl_>(self, indices, values, accumulate, unsafe);
  };
  if (!scatter_native(self, accumulate ? Reduce::Sum : Reduce::None)) return fallback();
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, values);
  for (size_t k = 0; k < indices.size(); ++k) {
    std::optional<Tensor> ix = indices.get(k);
    if (ix.has_value() && ix->defined()) at::assert_no_overlap(self, *ix);
  }
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes match, ",
              "got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  Advanced a = advanced(self, indices);
  if (!advanced_native(a)) return fallback();
  Tensor vals = values.device() == self.device() ? values : values.to(self.device());
  Tensor expanded;
  try {
    expanded = vals.expand(a.shape);
  } catch (std::exception&) {
    TORCH_CHECK(false, "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(a.shape));
  }
  uint64_t n = 1;
  for (int64_t v : a.shape) n *= static_cast<uint64_t>(v);
  if (n == 0) return self;
  if (a.self.numel() == 0) raise_bad_index(BadIndex::BoundsIndexError, 0, a.dims[0], 0);
  if (accumulate && half_type(self)) {
    Tensor dest = at::index(element_numbers(self), indices);
    Tensor target = self.is_contiguous() ? self : self.contiguous();
    accumulate_in_index_order(target, dest, vals.expand(dest.sizes()));
    if (!target.is_same(self)) self.copy_(target);
    return self;
  }
  place_indices(a, self);
  if (same_buffer(expanded, self)) expanded = expanded.clone();
  for (auto& ix : a.indices)
    if (same_buffer(ix, self)) ix = ix.clone();
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  fill_advanced(l, a, a.self);
  l.values = strided(expanded, vec(expanded.strides()));
  l.check_code = check_code(lock.ctx(), "aten::index_put_");
  indexed_scatter(lock.ctx(), l, accumulate ? IndexCombine::Add : IndexCombine::Assign);
  TWGPU_CATCH
  return self;
}

// ---- masks and compaction --------------------------------------------------------------

Tensor& masked_fill_scalar_(Tensor& self, const Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  // A mask that broadcasts to self's own shape passes the meta function.
  bool mask_fits = mask.dim() <= self.dim();
  for (int64_t k = 1; mask_fits && k <= mask.dim(); ++k)
    mask_fits = mask.size(-k) == 1 || mask.size(-k) == self.size(-k);
  if (!(mask_fits && !value.isComplex())) {
    Tensor m = meta(self);
    at::_ops::masked_fill__Scalar::call(m, meta(mask), value);
  }
  if (!holdable(self) || (value.isComplex() && !self.is_complex()) || mask.device() != self.device())
    return call_cpu_fallback<at::_ops::masked_fill__Scalar>(self, mask, value);
  if (self.numel() == 0) return self;
  Tensor m = mask.expand(self.sizes());
  if (same_buffer(m, self)) m = m.clone();  // one buffer cannot be bound for reading and writing
  TWGPU_TRY
  RuntimeLock lock;
  IndexedLaunch l;
  l.shape = vec(self.sizes());
  l.target = strided(self, vec(self.strides()));
  l.use_scalar = true;
  scalar_words(value, self.scalar_type(), l.scalar_words);
  l.has_mask = true;
  l.mask = strided(m, vec(m.strides()));
  indexed_scatter(lock.ctx(), l, IndexCombine::Assign);
  TWGPU_CATCH
  return self;
}

Tensor& masked_fill_tensor_(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(),
              " dimension(s).");
  return masked_fill_scalar_(self, mask, value.item());
}

// Rows of dim 0 of `t` per piece so that a piece's elements, at `bytes_per_element` each
// (the largest buffer an op makes per element), fit one storage binding; all when they do.
int64_t rows_per_piece(const Tensor& t, int64_t bytes_per_element) {
  const int64_t rows = t.size(0), per_row = t.numel() / std::max<int64_t>(rows, 1);
  const uint64_t budget = window_budget(Context::get());
  if (static_cast<uint64_t>(t.numel() * bytes_per_element) <= budget) return rows;
  return std::max<int64_t>(1, static_cast<int64_t>(budget / static_cast<uint64_t>(std::max<int64_t>(per_row * bytes_per_element, 1))));
}

Tensor nonzero_fn(const Tensor& self);
Tensor masked_select(const Tensor& self, const Tensor& mask);

// Exclusive positions of the nonzero flags of `flags` (viewed through `shape`), and their
// count (one read-back, as CUDA does to size the output).
std::pair<Tensor, int64_t> positions_of(const Tensor& flags) {
  const int64_t n = flags.numel();
  Tensor pos = at::empty({n + 1}, flags.options().dtype(at::kInt));
  uint32_t count = 0;
  warn_or_error_on_sync();
  TWGPU_TRY
  RuntimeLock lock;
  exclusive_scan_nonzero(lock.ctx(), vec(flags.sizes()), strided(flags, vec(flags.strides())), device_ref(pos).buffer);
  lock.ctx().recorder().read(device_ref(pos).buffer, static_cast<uint64_t>(n) * 4, &count, 4);
  TWGPU_CATCH
  return {pos, static_cast<int64_t>(count)};
}

bool flags_native(const Tensor& t) {
  auto dt = to_dtype(t.scalar_type());
  return dt && element_size(*dt) <= 8;
}

Tensor& nonzero_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(self.numel() < std::numeric_limits<int32_t>::max(), "nonzero is not supported for tensors with more than INT_MAX elements");
  if (!flags_native(self) || self.dim() > kIndexMaxDims) return call_cpu_fallback<at::_ops::nonzero_out>(self, out);
  if (self.numel() == 0) {
    at::native::resize_output(out, {0, self.dim()});
    return out;
  }
  if (self.dim() > 0) {
    // Tensors whose flags, positions or coordinates exceed one binding: pieces of dim 0,
    // each in a buffer of its own, their coordinates shifted and joined.
    const int64_t per = rows_per_piece(self, std::max<int64_t>(8 * self.dim(), self.element_size()));
    if (per < self.size(0)) {
      std::vector<Tensor> parts;
      for (int64_t lo = 0; lo < self.size(0); lo += per) {
        Tensor c = nonzero_fn(self.narrow(0, lo, std::min(per, self.size(0) - lo)).clone());
        c.select(1, 0).add_(lo);
        parts.push_back(c);
      }
      Tensor all = at::cat(parts);
      at::native::resize_output(out, all.sizes());
      out.copy_(all);
      return out;
    }
  }
  auto [pos, count] = positions_of(self);
  at::native::resize_output(out, {count, self.dim()});
  if (count == 0 || self.dim() == 0) return out;
  // The coordinates kernel writes from element 0 of its buffer.
  Tensor dst = out.is_contiguous() && out.storage_offset() == 0 && !same_buffer(out, self)
                   ? out
                   : at::empty(out.sizes(), out.options());
  TWGPU_TRY
  RuntimeLock lock;
  nonzero_coordinates(lock.ctx(), vec(self.sizes()), strided(self, vec(self.strides())), device_ref(pos).buffer,
                      device_ref(dst).buffer);
  TWGPU_CATCH
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

Tensor nonzero_fn(const Tensor& self) {
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return column_major(nonzero_out(self, out));  // the CPU's layout: (1, count) strides
}

// Without a read-back: rows past `size` are dropped, missing rows keep fill_value.
Tensor nonzero_static(const Tensor& self, int64_t size, int64_t fill_value) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer, but got ", size);
  if (!flags_native(self) || self.dim() > kIndexMaxDims || size > std::numeric_limits<int32_t>::max())
    return column_major(call_cpu_fallback<at::_ops::nonzero_static>(self, size, fill_value));
  if (size == 0)  // the meta function's strides, (1, size), exactly
    return at::empty_strided({0, self.dim()}, {1, 0}, self.options().dtype(at::kLong));
  Tensor out = at::full({size, self.dim()}, fill_value, self.options().dtype(at::kLong));
  if (self.numel() == 0 || self.dim() == 0) return column_major(out);
  Tensor pos = at::empty({self.numel() + 1}, self.options().dtype(at::kInt));
  TWGPU_TRY
  RuntimeLock lock;
  StridedArg flags = strided(self, vec(self.strides()));
  exclusive_scan_nonzero(lock.ctx(), vec(self.sizes()), flags, device_ref(pos).buffer);
  nonzero_coordinates(lock.ctx(), vec(self.sizes()), flags, device_ref(pos).buffer, device_ref(out).buffer,
                      static_cast<uint32_t>(size));
  TWGPU_CATCH
  // The meta function's (and CUDA's) layout, which torch.compile checks; the CPU's is row-major.
  return column_major(out);
}

Tensor& masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "masked_select(): self and result must have the same scalar type");
  if (!holdable(self) || mask.device() != self.device()) return call_cpu_fallback<at::_ops::masked_select_out>(self, mask, out);
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  if (shape.size() > static_cast<size_t>(kIndexMaxDims)) return call_cpu_fallback<at::_ops::masked_select_out>(self, mask, out);
  Tensor m = mask.expand(shape), v = self.expand(shape);
  if (m.numel() == 0) {
    at::native::resize_output(out, {0});
    return out;
  }
  if (!shape.empty()) {
    // Pieces of dim 0 when values or positions exceed one binding (see nonzero_out).
    const int64_t per = rows_per_piece(v, std::max<int64_t>(8, v.element_size()));
    if (per < shape[0]) {
      std::vector<Tensor> parts;
      for (int64_t lo = 0; lo < shape[0]; lo += per) {
        const int64_t n = std::min(per, shape[0] - lo);
        parts.push_back(twgpu::aten::masked_select(v.narrow(0, lo, n).clone(), m.narrow(0, lo, n).clone()));
      }
      Tensor all = at::cat(parts);
      at::native::resize_output(out, all.sizes());
      out.copy_(all);
      return out;
    }
  }
  auto [pos, count] = positions_of(m);
  at::native::resize_output(out, {count});
  if (count == 0) return out;
  Tensor dst = out.is_contiguous() && !same_buffer(out, self) ? out : at::empty({count}, out.options());
  TWGPU_TRY
  RuntimeLock lock;
  DeviceRef o = device_ref(dst);
  compact_values(lock.ctx(), vec(shape), strided(m, vec(m.strides())), device_ref(pos).buffer,
                 strided(v, vec(v.strides())), o.buffer, o.offset, false);
  TWGPU_CATCH
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  if (!holdable(self) || mask.device() != self.device() || source.device() != self.device() ||
      self.dim() > kIndexMaxDims)
    return call_cpu_fallback<at::_ops::masked_scatter_>(self, mask, source);
  Tensor m = mask.expand(self.sizes());
  if (self.numel() == 0) return self;
  if (uint64_t(std::max(self.numel(), source.numel())) * 8 > window_budget(Context::get())) {
    // Larger than the compaction kernels bind: the mask's coordinates (nonzero splits its
    // work), then index_put_ of the source's first elements (one pass per segment).
    Tensor where = at::nonzero(m);
    const int64_t count = where.size(0);
    TORCH_CHECK(count <= source.numel(), "Number of elements of source < number of ones in mask");
    if (count == 0) return self;
    c10::List<std::optional<Tensor>> coordinates;
    for (const Tensor& c : where.unbind(1)) coordinates.push_back(c);
    return self.index_put_(coordinates, source.reshape({-1}).narrow(0, 0, count));
  }
  if (same_buffer(m, self)) m = m.clone();
  auto [pos, count] = positions_of(m);
  if (count == 0) return self;
  TORCH_CHECK(count <= source.numel(), "Number of elements of source < number of ones in mask");
  Tensor src = source.contiguous();
  if (same_buffer(src, self)) src = src.clone();
  TWGPU_TRY
  RuntimeLock lock;
  DeviceRef s = device_ref(src);
  compact_values(lock.ctx(), vec(self.sizes()), strided(m, vec(m.strides())), device_ref(pos).buffer,
                 strided(self, vec(self.strides())), s.buffer, s.offset, true);
  TWGPU_CATCH
  return self;
}

// ---- embedding backward ----------------------------------------------------------------

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t nw, int64_t pad,
                                bool scale_grad_by_freq) {
  if (!scatter_native(grad, Reduce::Sum) || !grad.is_floating_point())
    return call_cpu_fallback<at::_ops::embedding_dense_backward>(grad, indices, nw, pad, scale_grad_by_freq);
  Tensor flat_idx = indices.reshape({-1});
  Tensor g = grad.reshape({flat_idx.numel(), grad.size(-1)});
  if (pad >= 0) {
    // Rows whose index is the padding index get no gradient.
    g = g.masked_fill(flat_idx.eq(pad).unsqueeze(1), 0);
  }
  if (scale_grad_by_freq) {
    // Each occurrence's gradient divided by how often its index occurs.
    Tensor counts = at::zeros({nw}, grad.options()).index_add_(0, flat_idx, at::ones_like(flat_idx, grad.options()));
    g = g.div(counts.index_select(0, flat_idx).unsqueeze(1));
  }
  Tensor out = at::zeros({nw, grad.size(-1)}, grad.options());
  return at::index_add(out, 0, flat_idx, g);
}

// Rows named by `indices` whose norm exceeds max_norm are scaled down to it. Composite
// over native ops (the norm belongs to the reduction family); each row once, however many
// times it is named.
Tensor& embedding_renorm_(Tensor& self, const Tensor& indices, double max_norm, double norm_type) {
  at::checkDim("embedding_renorm_", at::TensorArg(self, "self", 1), 2);
  at::checkScalarTypes("embedding_renorm_", at::TensorArg(indices, "indices", 2), {at::kLong, at::kInt});
  if (!self.is_floating_point() || !holdable(self) || !computable(self))
    return call_cpu_fallback<at::_ops::embedding_renorm_>(self, indices, max_norm, norm_type);
  if (indices.numel() == 0 || self.numel() == 0) return self;
  Tensor named = at::zeros({self.size(0)}, self.options().dtype(at::kBool));
  named.index_fill_(0, indices.reshape({-1}), true);
  Tensor norms = self.norm(norm_type, 1);
  Tensor scale = at::where(named.logical_and(norms.gt(max_norm)), norms.add(1e-7).reciprocal().mul(max_norm),
                           at::ones_like(norms));
  self.mul_(scale.unsqueeze(1));
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather.out", gather_out);
  m.impl("index_select", index_select);
  m.impl("index_select.out", index_select_out);
  m.impl("take", take);
  m.impl("take.out", take_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("index_fill_.int_Scalar", index_fill_scalar_);
  m.impl("index_fill_.int_Tensor", index_fill_tensor_);
  m.impl("index_reduce.out", index_reduce_out);
  m.impl("put_", put_);
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("masked_fill_.Scalar", masked_fill_scalar_);
  m.impl("masked_fill_.Tensor", masked_fill_tensor_);
  m.impl("nonzero", nonzero_fn);
  m.impl("nonzero.out", nonzero_out);
  m.impl("nonzero_static", nonzero_static);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("masked_scatter_", masked_scatter_);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("embedding_renorm_", embedding_renorm_);
}

}  // namespace twgpu::aten
