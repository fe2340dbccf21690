// Native reductions (sum, mean, prod, amax/amin, max/min with indices, argmax/argmin,
// all/any, count_nonzero, nansum, aminmax, var/std, vector norms) and the softmax family.
//
// Shapes, dtypes and error messages come from ATen's own structured meta functions (run
// here against the real out tensors), so they match the CPU. The input is brought to a
// contiguous [outer, reduce, inner] block (a native copy when the reduced dims are not
// one contiguous run) and one kernel from kernels/reduce.h writes the result.
// float64 and complex go to the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/all_meta.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/amax_meta.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/amin_meta.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/aminmax_meta.h>
#include <ATen/ops/aminmax_ops.h>
#include <ATen/ops/any_meta.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/argmax_meta.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/argmin_meta.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/count_nonzero_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_vector_norm_meta.h>
#include <ATen/ops/logsumexp_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/max_meta.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_meta.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/min_meta.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/norm_meta.h>
#include <ATen/ops/norm_ops.h>
#include <ATen/ops/prod_meta.h>
#include <ATen/ops/prod_ops.h>
#include <ATen/ops/std_mean_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/renorm_meta.h>
#include <ATen/ops/renorm_ops.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/sum_meta.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/trace_ops.h>
#include <ATen/ops/var_mean_ops.h>
#include <ATen/ops/var_ops.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_meta.h>
#include <ATen/ops/_softmax_ops.h>
#include <torch/library.h>

#include <array>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "aten/cpu_fallback.h"
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>

#include "aten/structured_meta.h"
#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/reduce.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::native::DimMask;
using c10::IntArrayRef;
using c10::OptionalIntArrayRef;


bool same_buffer(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  return allocation_of(a) == allocation_of(b);
}

// The input as a contiguous [outer, reduce, inner] block for the dims in `mask`.
struct Plan {
  Tensor input;
  ReduceShape shape;
};

Plan plan_reduction(const Tensor& self, const DimMask& mask);
// The kept dims first, then the reduced ones, copied contiguous: [outer, reduce, 1].
Plan plan_reduced_last(const Tensor& self, const DimMask& mask);

// A non-contiguous input whose dims, put in memory order, are contiguous (a transpose, a
// channels-last tensor) is reduced in that order without a copy, as long as its kept dims
// keep their relative order (so the outputs come out in the same order).
std::optional<Plan> plan_in_memory_order(const Tensor& self, const DimMask& mask) {
  const int64_t nd = self.dim();
  std::vector<int64_t> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return self.stride(a) > self.stride(b);
  });
  int64_t last_kept = -1;
  DimMask permuted;
  for (int64_t k = 0; k < nd; ++k) {
    if (mask[perm[k]]) {
      permuted.set(k);
    } else if (self.size(perm[k]) != 1) {
      if (perm[k] < last_kept) return std::nullopt;
      last_kept = perm[k];
    }
  }
  Tensor view = self.permute(perm);
  if (!view.is_contiguous()) return std::nullopt;
  return plan_reduction(view, permuted);
}

Plan plan_reduction(const Tensor& self, const DimMask& mask) {
  const int64_t nd = self.dim();
  Plan p;
  if (nd == 0) {
    p.input = self;
    return p;
  }
  if (!self.is_contiguous()) {
    if (auto plan = plan_in_memory_order(self, mask)) return *plan;
  }
  // Dims of size 1 never break a run: they can count as reduced or kept.
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < nd; ++d) {
    if (mask[d] && self.size(d) != 1) {
      if (first < 0) first = d;
      last = d;
    }
  }
  if (first < 0) {  // nothing of size > 1 reduced: reduce length 1
    p.input = self.contiguous();
    p.shape.outer = static_cast<uint64_t>(self.numel());
    return p;
  }
  bool run = true;
  for (int64_t d = first; d <= last; ++d)
    if (!mask[d] && self.size(d) != 1) run = false;
  auto prod = [&](int64_t a, int64_t b) {
    uint64_t n = 1;
    for (int64_t d = a; d < b; ++d) n *= static_cast<uint64_t>(self.size(d));
    return n;
  };
  if (run) {
    p.input = self.contiguous();
    p.shape = {prod(0, first), prod(first, last + 1), prod(last + 1, nd)};
    return p;
  }
  return plan_reduced_last(self, mask);
}

Plan plan_reduced_last(const Tensor& self, const DimMask& mask) {
  const int64_t nd = self.dim();
  Plan p;
  std::vector<int64_t> perm;
  uint64_t outer = 1, reduce = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!mask[d]) { perm.push_back(d); outer *= self.size(d); }
  for (int64_t d = 0; d < nd; ++d)
    if (mask[d]) { perm.push_back(d); reduce *= self.size(d); }
  p.input = self.permute(perm).contiguous();
  p.shape = {outer, reduce, 1};
  return p;
}

// A tensor the kernel may write directly, or a temporary copied into `out` afterwards.
struct Target {
  Tensor& out;
  Tensor buffer;
  Target(Tensor& o, const Tensor& input) : out(o) {
    buffer = (o.is_contiguous() && !same_buffer(o, input)) ? o : at::empty(o.sizes(), o.options());
  }
  void finish() {
    if (!buffer.is_same(out)) out.copy_(buffer);
  }
};

// The first and second stage of a reduction split over chunks of the reduced run (a long
// reduction into few outputs would otherwise keep one workgroup busy with all of it), and
// the dtype of the partial results; nullopt for kinds that run in one stage.
struct Stages {
  ReduceSpec first, second;
  c10::ScalarType partial;
};

c10::ScalarType dtype_of_compute(Compute c) {
  switch (c) {
    case Compute::F32: return at::kFloat;
    case Compute::I64: return at::kLong;
    default: return at::kInt;
  }
}

std::optional<Stages> two_stages(const ReduceSpec& spec, const Tensor& self) {
  Stages st{spec, spec, at::kFloat};
  st.second.round_input = DType::Float32;  // partials are exact accumulator values
  switch (spec.kind) {
    case ReduceKind::Sum: case ReduceKind::Prod:
      st.partial = dtype_of_compute(spec.acc);
      break;
    case ReduceKind::NanSum:
      st.partial = dtype_of_compute(spec.acc);
      st.second.kind = ReduceKind::Sum;
      break;
    case ReduceKind::Mean:
      st.first.kind = ReduceKind::Sum;
      st.first.acc = Compute::F32;
      break;
    case ReduceKind::Max: case ReduceKind::Min:
      st.partial = self.scalar_type();
      break;
    case ReduceKind::All: case ReduceKind::Any:
      st.partial = at::kBool;
      break;
    case ReduceKind::CountNonzero:
      st.partial = at::kLong;
      st.second.kind = ReduceKind::Sum;
      st.second.acc = Compute::I64;
      break;
    case ReduceKind::Norm1: case ReduceKind::Norm2: case ReduceKind::Norm0: case ReduceKind::NormP:
      st.first.partial_out = true;
      st.second.partial_in = true;
      break;
    case ReduceKind::NormInf:
      st.second.kind = ReduceKind::Max;
      break;
    case ReduceKind::NormNegInf:
      st.second.kind = ReduceKind::Min;
      break;
    default:
      return std::nullopt;
  }
  return st;
}

void launch(ReduceSpec spec, const Tensor& input, const ReduceShape& shape, Tensor& out,
            Tensor* out2, float param) {
  spec.in = to_dtype_or_throw(input.scalar_type());
  spec.out = to_dtype_or_throw(out.scalar_type());
  if (out2) spec.out2 = to_dtype_or_throw(out2->scalar_type());
  DeviceRef in = device_ref(input), o1 = device_ref(out);
  ReduceBuffers b{in.buffer, in.offset, o1.buffer, o1.offset};
  if (out2) {
    DeviceRef o2 = device_ref(*out2);
    b.out2 = o2.buffer;
    b.out2_offset = o2.offset;
  }
  RuntimeLock lock;
  launch_reduce(lock.ctx(), spec, shape, b, param);
}

// Chunks the reduced run of `input` (laid out [outer, reduce, inner]) needs so that one
// chunk of one outer row fits a storage binding; 1 when a whole row does.
uint64_t chunks_per_binding(const Tensor& input, const ReduceShape& shape) {
  const uint64_t row = shape.reduce * shape.inner * input.element_size();
  const uint64_t budget = window_budget(Context::get());  // reads only the fixed limits
  if (row <= budget) return 1;
  const uint64_t chunk = std::max<uint64_t>(1, budget / (shape.inner * input.element_size()));
  return std::min(shape.reduce, (shape.reduce + chunk - 1) / chunk);
}

// argmax / argmin (and max / min with indices) of few long runs in three dispatches: each
// chunk's best (value, index), the best chunk of each output, and a gather of that chunk's
// index. A tie between chunks (NaNs included) goes to the first chunk, whose index is the
// smaller: the first occurrence, as in one pass. (One pass left one workgroup walking a whole
// 151936-wide vocabulary: 90 us per greedy token on an H100.)
void run_arg_reduce_in_chunks(const ReduceSpec& spec, const Tensor& input, const ReduceShape& shape,
                              uint64_t chunks, Tensor& out, Tensor* out2, float param) {
  ReduceShape first = shape;
  first.chunks = chunks;
  const auto outer = static_cast<int64_t>(shape.outer), inner = static_cast<int64_t>(shape.inner);
  const auto n = outer * static_cast<int64_t>(chunks) * inner;
  Tensor values = at::empty({n}, input.options());
  Tensor indices = at::empty({n}, input.options().dtype(at::kLong));
  ReduceSpec each = spec;
  each.values = each.indices = true;
  launch(each, input, first, values, &indices, param);
  const ReduceShape second{shape.outer, chunks, shape.inner};
  Tensor best = at::empty({outer * inner}, indices.options());
  ReduceSpec pick = spec;
  pick.values = out2 != nullptr;  // max / min: the values straight into `out`
  pick.indices = true;
  if (out2) launch(pick, values, second, out, &best, param);
  else launch(pick, values, second, best, nullptr, param);
  Tensor& result = out2 ? *out2 : out;
  const Tensor picked = indices.view({outer, static_cast<int64_t>(chunks), inner})
                            .gather(1, best.view({outer, 1, inner}));
  result.view({outer, inner}).copy_(picked.view({outer, inner}));
}

// Reduces `self` over `mask` into `out` (and `out2`), both already shaped by the meta.
void run_reduce(ReduceSpec spec, const Tensor& self, const DimMask& mask, Tensor& out,
                Tensor* out2 = nullptr, float param = 0.f) {
  if (out.numel() == 0) return;
  TWGPU_TRY
  Plan plan = plan_reduction(self, mask);
  // Outputs side by side (inner > 1) whose reduced runs together exceed one storage
  // binding, of a kind with no two-stage form: reduce rows of a transposed copy instead,
  // which split by outputs (kernels/binding_window.h).
  if (plan.shape.inner > 1 && chunks_per_binding(plan.input, plan.shape) > 1 &&
      spec.kind != ReduceKind::MinMax && (out2 || !two_stages(spec, self)))
    plan = plan_reduced_last(self, mask);
  Tensor input = plan.input;
  if (input.numel() == 0) input = at::empty({1}, self.options());  // a buffer to bind
  if (spec.kind == ReduceKind::Mean) param = static_cast<float>(plan.shape.reduce);
  const bool sum_like = spec.kind == ReduceKind::Sum || spec.kind == ReduceKind::NanSum ||
                        spec.kind == ReduceKind::Prod;
  const auto ot = out.scalar_type();
  if (sum_like && ot != self.scalar_type() && (ot == at::kHalf || ot == at::kBFloat16))
    spec.round_input = to_dtype_or_throw(ot);
  Target t1(out, input);
  std::optional<Target> t2;
  if (out2) t2.emplace(*out2, input);
  const ReduceShape& shape = plan.shape;
  TORCH_INTERNAL_ASSERT(shape.outer * shape.inner == static_cast<uint64_t>(out.numel()),
                        "webgpu reduction: output shape does not match the reduced dims");
  // Two stages when one stage would leave a GPU mostly idle: few long rows (one workgroup
  // each) are split into chunks of at least kChunk elements, aiming at ~4096 workgroups;
  // few long columns (one invocation each, inner > 1) into chunks of at least 64 rows,
  // aiming at kColumnGrid invocations. The second stage reduces the small partials.
  constexpr uint64_t kChunk = 4096, kColumnGrid = 1 << 18;
  const uint64_t outputs = shape.outer * shape.inner;
  uint64_t split = 1;
  if (shape.reduce >= 4 * kChunk && outputs <= 64)
    split = std::min<uint64_t>(1024, shape.reduce / kChunk);
  else if (shape.inner == 1 && shape.reduce >= 4 * kChunk && outputs < 1024)
    split = std::min<uint64_t>({1024, shape.reduce / kChunk, (4096 + outputs - 1) / outputs});
  else if (shape.inner > 1 && shape.reduce >= 1024 && outputs < kColumnGrid &&
           outputs * shape.reduce >= (1u << 20))
    split = std::min<uint64_t>({1024, shape.reduce / 64, (kColumnGrid + outputs - 1) / outputs});
  // A reduced run larger than one storage binding also goes in two stages, in chunks that
  // each fit one (kernels/binding_window.h).
  const uint64_t binding_chunks = chunks_per_binding(input, shape);
  const bool long_run = split > 1 || binding_chunks > 1;
  const uint64_t chunks = std::max(binding_chunks, split);
  if (split > 1 && binding_chunks == 1 &&
      (spec.kind == ReduceKind::ArgMax || spec.kind == ReduceKind::ArgMin)) {
    run_arg_reduce_in_chunks(spec, input, shape, chunks, t1.buffer, t2 ? &t2->buffer : nullptr, param);
    t1.finish();
    if (t2) t2->finish();
    return;
  }
  std::optional<Stages> stages;
  if (long_run && !out2) stages = two_stages(spec, self);
  if (long_run && spec.kind == ReduceKind::MinMax) {
    // aminmax in two stages: chunked (min, max) partials, then min of mins, max of maxes.
    ReduceShape first = shape;
    first.chunks = chunks;
    const auto n = static_cast<int64_t>(shape.outer * first.chunks * shape.inner);
    Tensor lo = at::empty({n}, self.options()), hi = at::empty({n}, self.options());
    launch(spec, input, first, lo, &hi, param);
    ReduceShape second{shape.outer, first.chunks, shape.inner};
    ReduceSpec mn = spec, mx = spec;
    mn.kind = ReduceKind::Min;
    mx.kind = ReduceKind::Max;
    launch(mn, lo, second, t1.buffer, nullptr, param);
    launch(mx, hi, second, t2->buffer, nullptr, param);
    t1.finish();
    t2->finish();
    return;
  }
  if (stages) {
    ReduceShape first = shape;
    first.chunks = chunks;
    Tensor partial = at::empty({static_cast<int64_t>(shape.outer * first.chunks * shape.inner)},
                               self.options().dtype(stages->partial));
    launch(stages->first, input, first, partial, nullptr, param);
    ReduceShape second{shape.outer, first.chunks, shape.inner};
    launch(stages->second, partial, second, t1.buffer, nullptr, param);
  } else {
    launch(spec, input, shape, t1.buffer, out2 ? &t2->buffer : nullptr, param);
  }
  t1.finish();
  if (t2) t2->finish();
  TWGPU_CATCH
}

DimMask mask_of(const Tensor& self, OptionalIntArrayRef dims) {
  return at::native::make_dim_mask(dims, self.dim());
}
DimMask mask_of_dim(const Tensor& self, int64_t dim) {
  DimMask m;
  if (self.dim() > 0) m.set(c10::maybe_wrap_dim(dim, self.dim()));
  return m;
}
DimMask mask_all() { return DimMask().flip(); }

// The accumulator of a sum / product whose result has dtype `t`.
Compute accumulator_for(c10::ScalarType t) {
  if (at::isFloatingType(t)) return Compute::F32;
  return t == at::kLong ? Compute::I64 : Compute::I32;
}

bool native_dtypes(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && !is_native_compute(t->scalar_type())) return false;
  return true;
}

// ---- sum, mean, prod, nansum --------------------------------------------------------------

// complex64 sums and means reduce the real and imaginary parts together: view_as_real's
// trailing dim of 2 is left out of the reduced dims. False for anything else.
bool complex_parts_reduce(const Tensor& self, OptionalIntArrayRef dim, bool keepdim, Tensor& out,
                          bool mean) {
  if (self.scalar_type() != at::kComplexFloat || out.scalar_type() != at::kComplexFloat ||
      self.device().type() != kDeviceType || out.device().type() != kDeviceType)
    return false;
  if (self.dim() == 0) {  // nothing to reduce (an empty dim list would reduce the parts)
    out.copy_(self);
    return true;
  }
  std::vector<int64_t> dims;
  if (dim.has_value() && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(c10::maybe_wrap_dim(d, self.dim()));
  } else {
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  }
  Tensor parts = at::view_as_real(self.resolve_conj().resolve_neg());
  Tensor r = mean ? at::mean(parts, dims, keepdim) : at::sum(parts, dims, keepdim);
  out.copy_(at::view_as_complex(r));
  return true;
}

Tensor& sum_out(const Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                std::optional<at::ScalarType> dtype, Tensor& out) {
  OutMeta<at::meta::structured_sum_dim_IntList, 1> meta({&out});
  meta.meta(self, dim, keepdim, dtype);
  if (complex_parts_reduce(self, dim, keepdim, out, /*mean=*/false)) return out;
  if (!native_dtypes({&self, &out}) || (out.scalar_type() == at::kBool && self.scalar_type() != at::kBool))
    return call_cpu_fallback<at::_ops::sum_IntList_out>(self, dim, keepdim, dtype, out);
  ReduceSpec spec;
  spec.kind = ReduceKind::Sum;
  spec.acc = accumulator_for(out.scalar_type());
  run_reduce(spec, self, mask_of(self, dim), out);
  return out;
}

Tensor& mean_out(const Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                 std::optional<at::ScalarType> dtype, Tensor& out) {
  OutMeta<at::meta::structured_mean_dim, 1> meta({&out});
  meta.meta(self, dim, keepdim, dtype);
  if (complex_parts_reduce(self, dim, keepdim, out, /*mean=*/true)) return out;
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::mean_out>(self, dim, keepdim, dtype, out);
  ReduceSpec spec;
  spec.kind = ReduceKind::Mean;
  run_reduce(spec, self, mask_of(self, dim), out);
  return out;
}

Tensor& prod_int_out(const Tensor& self, int64_t dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, Tensor& out) {
  OutMeta<at::meta::structured_prod_dim_int, 1> meta({&out});
  meta.meta(self, dim, keepdim, dtype);
  if (!native_dtypes({&self, &out}) || (out.scalar_type() == at::kBool && self.scalar_type() != at::kBool))
    return call_cpu_fallback<at::_ops::prod_int_out>(self, dim, keepdim, dtype, out);
  ReduceSpec spec;
  spec.kind = ReduceKind::Prod;
  spec.acc = accumulator_for(out.scalar_type());
  run_reduce(spec, self, mask_of_dim(self, dim), out);
  return out;
}

Tensor prod_all(const Tensor& self, std::optional<at::ScalarType> dtype) {
  auto t = at::native::get_dtype_from_self(self, dtype, true);
  if (!native_dtypes({&self}) || !is_native_compute(t) ||
      (t == at::kBool && self.scalar_type() != at::kBool))
    return call_cpu_fallback<at::_ops::prod>(self, dtype);
  Tensor out = at::empty({}, self.options().dtype(t));
  ReduceSpec spec;
  spec.kind = ReduceKind::Prod;
  spec.acc = accumulator_for(t);
  run_reduce(spec, self, mask_all(), out);
  return out;
}

// nansum: a sum that skips NaNs (integers have none).
Tensor& nansum_out(const Tensor& self, OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype, Tensor& out) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  auto t = at::native::get_dtype_from_result(out, dtype);
  if (!native_dtypes({&self, &out}) || !is_native_compute(t) ||
      (t == at::kBool && self.scalar_type() != at::kBool) ||
      t != out.scalar_type())
    return call_cpu_fallback<at::_ops::nansum_out>(self, dim, keepdim, dtype, out);
  DimMask mask = mask_of(self, dim);
  at::native::resize_output(out, at::native::shape_from_dim_mask(self, mask, keepdim));
  ReduceSpec spec;
  spec.kind = ReduceKind::NanSum;
  spec.acc = accumulator_for(t);
  run_reduce(spec, self, mask, out);
  return out;
}

Tensor nansum(const Tensor& self, OptionalIntArrayRef dim, bool keepdim,
              std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  auto t = at::native::get_dtype_from_self(self, dtype, true);
  Tensor out = at::empty({0}, self.options().dtype(t));
  return nansum_out(self, dim, keepdim, dtype, out);
}

// logsumexp: max-shifted in one kernel; integer inputs give the out dtype (floating).
Tensor& logsumexp_out(const Tensor& self, IntArrayRef dims, bool keepdim, Tensor& out) {
  TORCH_CHECK(at::isFloatingType(out.scalar_type()),
              "logsumexp(): Expected floating point type for result tensor, but got: ",
              out.scalar_type());
  if (!native_dtypes({&self, &out}) || c10::isComplexType(self.scalar_type()))
    return call_cpu_fallback<at::_ops::logsumexp_out>(self, dims, keepdim, out);
  DimMask mask = mask_of(self, dims);
  at::native::resize_output(out, at::native::shape_from_dim_mask(self, mask, keepdim));
  ReduceSpec spec;
  spec.kind = ReduceKind::LogSumExp;
  run_reduce(spec, self, mask, out);
  return out;
}

// ---- max / min family -----------------------------------------------------------------

template <class Meta, class Op>
Tensor& extreme_out(const Tensor& self, IntArrayRef dim, bool keepdim, Tensor& out, bool is_max) {
  OutMeta<Meta, 1> meta({&out});
  meta.meta(self, dim, keepdim);
  if (!native_dtypes({&self, &out})) return call_cpu_fallback<Op>(self, dim, keepdim, out);
  ReduceSpec spec;
  spec.kind = is_max ? ReduceKind::Max : ReduceKind::Min;
  run_reduce(spec, self, mask_of(self, dim), out);
  return out;
}
Tensor& amax_out(const Tensor& self, IntArrayRef dim, bool keepdim, Tensor& out) {
  return extreme_out<at::meta::structured_amax, at::_ops::amax_out>(self, dim, keepdim, out, true);
}
Tensor& amin_out(const Tensor& self, IntArrayRef dim, bool keepdim, Tensor& out) {
  return extreme_out<at::meta::structured_amin, at::_ops::amin_out>(self, dim, keepdim, out, false);
}

// max(self) / min(self): the all-reduce with the CPU's empty-input error.
Tensor extreme_all(const Tensor& self, bool is_max) {
  TORCH_CHECK(self.numel() > 0, is_max ? "max()" : "min()",
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  if (!native_dtypes({&self}))
    return is_max ? call_cpu_fallback<at::_ops::max>(self) : call_cpu_fallback<at::_ops::min>(self);
  Tensor out = at::empty({}, self.options());
  ReduceSpec spec;
  spec.kind = is_max ? ReduceKind::Max : ReduceKind::Min;
  run_reduce(spec, self, mask_all(), out);
  return out;
}
Tensor max_all(const Tensor& self) { return extreme_all(self, true); }
Tensor min_all(const Tensor& self) { return extreme_all(self, false); }
Tensor& max_unary_out(const Tensor& self, Tensor& out) {
  Tensor r = extreme_all(self, true);
  TORCH_CHECK(out.scalar_type() == r.scalar_type(), "Expected out tensor to have dtype ",
              r.dtype(), ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, {});
  return out.copy_(r);
}
Tensor& min_unary_out(const Tensor& self, Tensor& out) {
  Tensor r = extreme_all(self, false);
  TORCH_CHECK(out.scalar_type() == r.scalar_type(), "Expected out tensor to have dtype ",
              r.dtype(), ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, {});
  return out.copy_(r);
}

std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                                         Tensor& values, Tensor& indices) {
  OutMeta<at::meta::structured_max_dim, 2> meta({&values, &indices});
  meta.meta(self, dim, keepdim);
  if (!native_dtypes({&self, &values}))
    return call_cpu_fallback<at::_ops::max_dim_max>(self, dim, keepdim, values, indices);
  ReduceSpec spec;
  spec.kind = ReduceKind::ArgMax;
  run_reduce(spec, self, mask_of_dim(self, dim), values, &indices);
  return {values, indices};
}
std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                                         Tensor& values, Tensor& indices) {
  OutMeta<at::meta::structured_min_dim, 2> meta({&values, &indices});
  meta.meta(self, dim, keepdim);
  if (!native_dtypes({&self, &values}))
    return call_cpu_fallback<at::_ops::min_dim_min>(self, dim, keepdim, values, indices);
  ReduceSpec spec;
  spec.kind = ReduceKind::ArgMin;
  run_reduce(spec, self, mask_of_dim(self, dim), values, &indices);
  return {values, indices};
}

template <class Meta, class Op>
Tensor& arg_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out,
                bool is_max) {
  OutMeta<Meta, 1> meta({&out});
  meta.meta(self, dim, keepdim);
  if (!native_dtypes({&self})) return call_cpu_fallback<Op>(self, dim, keepdim, out);
  ReduceSpec spec;
  spec.kind = is_max ? ReduceKind::ArgMax : ReduceKind::ArgMin;
  spec.values = false;
  run_reduce(spec, self, dim ? mask_of_dim(self, *dim) : mask_all(), out);
  return out;
}
Tensor& argmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return arg_out<at::meta::structured_argmax, at::_ops::argmax_out>(self, dim, keepdim, out, true);
}
Tensor& argmin_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return arg_out<at::meta::structured_argmin, at::_ops::argmin_out>(self, dim, keepdim, out, false);
}

std::tuple<Tensor&, Tensor&> aminmax_out(const Tensor& self, std::optional<int64_t> dim,
                                         bool keepdim, Tensor& mn, Tensor& mx) {
  OutMeta<at::meta::structured_aminmax, 2> meta({&mn, &mx});
  meta.meta(self, dim, keepdim);
  if (!native_dtypes({&self, &mn, &mx}))
    return call_cpu_fallback<at::_ops::aminmax_out>(self, dim, keepdim, mn, mx);
  if (self.numel() == 0) {
    // The CPU's error for an empty reduction (the meta function leaves it to the kernel).
    const bool empty_run = !dim || self.size(c10::maybe_wrap_dim(*dim, self.dim())) == 0;
    TORCH_CHECK(!empty_run, "aminmax(): cannot compute aminmax over an empty dimension as the "
                            "operation has no identity.");
  }
  ReduceSpec spec;
  spec.kind = ReduceKind::MinMax;
  run_reduce(spec, self, dim ? mask_of_dim(self, *dim) : mask_all(), mn, &mx);
  return {mn, mx};
}

// ---- all / any / count_nonzero -----------------------------------------------------------

template <class Meta, class... MetaArgs>
void logical_reduce(const Tensor& self, DimMask mask, Tensor& out, bool is_all,
                    MetaArgs... args) {
  OutMeta<Meta, 1> meta({&out});
  meta.meta(self, args...);
  ReduceSpec spec;
  spec.kind = is_all ? ReduceKind::All : ReduceKind::Any;
  run_reduce(spec, self, mask, out);
}

Tensor& all_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::all_out>(self, dim, keepdim, out);
  logical_reduce<at::meta::structured_all_dim>(self, mask_of_dim(self, dim), out, true, dim, keepdim);
  return out;
}
Tensor& all_dims_out(const Tensor& self, OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::all_dims_out>(self, dim, keepdim, out);
  // all(dim=[]) reduces nothing (a bool cast), unlike sum(dim=[]).
  logical_reduce<at::meta::structured_all_dims>(self, at::native::make_dim_mask(dim, self.dim(), true),
                                                out, true, dim, keepdim);
  return out;
}
Tensor& all_all_out(const Tensor& self, Tensor& out) {
  if (!native_dtypes({&self, &out})) return call_cpu_fallback<at::_ops::all_all_out>(self, out);
  logical_reduce<at::meta::structured_all>(self, mask_all(), out, true);
  return out;
}
Tensor& any_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::any_out>(self, dim, keepdim, out);
  logical_reduce<at::meta::structured_any_dim>(self, mask_of_dim(self, dim), out, false, dim, keepdim);
  return out;
}
Tensor& any_dims_out(const Tensor& self, OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::any_dims_out>(self, dim, keepdim, out);
  logical_reduce<at::meta::structured_any_dims>(self, at::native::make_dim_mask(dim, self.dim(), true),
                                                out, false, dim, keepdim);
  return out;
}
Tensor& any_all_out(const Tensor& self, Tensor& out) {
  if (!native_dtypes({&self, &out})) return call_cpu_fallback<at::_ops::any_all_out>(self, out);
  logical_reduce<at::meta::structured_any>(self, mask_all(), out, false);
  return out;
}

Tensor count_nonzero_dims(const Tensor& self, IntArrayRef dims) {
  if (!native_dtypes({&self})) return call_cpu_fallback<at::_ops::count_nonzero_dim_IntList>(self, dims);
  DimMask mask = at::native::make_dim_mask(dims, self.dim());
  Tensor out = at::empty(at::native::shape_from_dim_mask(self, mask, false),
                         self.options().dtype(at::kLong));
  ReduceSpec spec;
  spec.kind = ReduceKind::CountNonzero;
  run_reduce(spec, self, mask, out);
  return out;
}

// ---- var / std -----------------------------------------------------------------------------

// var, std, var_mean, std_mean: results in self's dtype (floating inputs only).
std::tuple<Tensor, Tensor> var_std(const Tensor& self, OptionalIntArrayRef dim,
                                   const std::optional<c10::Scalar>& correction, bool keepdim,
                                   bool take_sqrt, bool with_mean, const char* name,
                                   const char* fname) {
  TORCH_CHECK(self.layout() == at::kStrided, name, " only supports strided layout, got: ",
              self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              name, " only support floating point and complex dtypes");
  DimMask mask = mask_of(self, dim);
  auto shape = at::native::shape_from_dim_mask(self, mask, keepdim);
  Tensor out = at::empty(shape, self.options());
  Tensor mean = with_mean ? at::empty(shape, self.options()) : Tensor();
  ReduceSpec spec;
  spec.kind = ReduceKind::Var;
  spec.take_sqrt = take_sqrt;
  spec.second = with_mean;
  const double c = correction ? correction->toDouble() : 1.0;
  const int64_t outputs = c10::multiply_integers(shape);
  const int64_t per_output = outputs == 0 ? 0 : self.numel() / outputs;
  if (per_output - c <= 0)
    TORCH_WARN(fname, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  run_reduce(spec, self, mask, out, with_mean ? &mean : nullptr, static_cast<float>(c));
  return {out, mean};
}

Tensor var_correction(const Tensor& self, OptionalIntArrayRef dim,
                      const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!native_dtypes({&self}))
    return call_cpu_fallback<at::_ops::var_correction>(self, dim, correction, keepdim);
  return std::get<0>(var_std(self, dim, correction, keepdim, false, false, "std and var", "var"));
}
Tensor std_correction(const Tensor& self, OptionalIntArrayRef dim,
                      const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!native_dtypes({&self}))
    return call_cpu_fallback<at::_ops::std_correction>(self, dim, correction, keepdim);
  return std::get<0>(var_std(self, dim, correction, keepdim, true, false, "std and var", "std"));
}
std::tuple<Tensor, Tensor> var_mean_correction(const Tensor& self, OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& correction,
                                               bool keepdim) {
  if (!native_dtypes({&self}))
    return call_cpu_fallback<at::_ops::var_mean_correction>(self, dim, correction, keepdim);
  return var_std(self, dim, correction, keepdim, false, true, "var_mean", "var_mean");
}
std::tuple<Tensor, Tensor> std_mean_correction(const Tensor& self, OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& correction,
                                               bool keepdim) {
  if (!native_dtypes({&self}))
    return call_cpu_fallback<at::_ops::std_mean_correction>(self, dim, correction, keepdim);
  return var_std(self, dim, correction, keepdim, true, true, "std_mean", "std_mean");
}
Tensor& var_correction_out(const Tensor& self, OptionalIntArrayRef dim,
                           const std::optional<c10::Scalar>& correction, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}) || out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::var_correction_out>(self, dim, correction, keepdim, out);
  Tensor r = var_correction(self, dim, correction, keepdim);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}
Tensor& std_correction_out(const Tensor& self, OptionalIntArrayRef dim,
                           const std::optional<c10::Scalar>& correction, bool keepdim, Tensor& out) {
  if (!native_dtypes({&self, &out}) || out.scalar_type() != self.scalar_type())
    return call_cpu_fallback<at::_ops::std_correction_out>(self, dim, correction, keepdim, out);
  Tensor r = std_correction(self, dim, correction, keepdim);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// ---- norms ---------------------------------------------------------------------------------

void vector_norm_kernel(const Tensor& self, double ord, DimMask mask, Tensor& out) {
  ReduceSpec spec;
  float p = 0.f;
  if (ord == 2.0) spec.kind = ReduceKind::Norm2;
  else if (ord == 1.0) spec.kind = ReduceKind::Norm1;
  else if (ord == 0.0) spec.kind = ReduceKind::Norm0;
  else if (std::isinf(ord)) spec.kind = ord > 0 ? ReduceKind::NormInf : ReduceKind::NormNegInf;
  else { spec.kind = ReduceKind::NormP; p = static_cast<float>(ord); }
  run_reduce(spec, self, mask, out, nullptr, p);
}

Tensor& linalg_vector_norm_out(const Tensor& self, const c10::Scalar& ord, OptionalIntArrayRef dim,
                               bool keepdim, std::optional<at::ScalarType> dtype, Tensor& out) {
  OutMeta<at::meta::structured_linalg_vector_norm, 1> meta({&out});
  meta.meta(self, ord, dim, keepdim, dtype);
  if (!native_dtypes({&self, &out}) || ord.isComplex())
    return call_cpu_fallback<at::_ops::linalg_vector_norm_out>(self, ord, dim, keepdim, dtype, out);
  // dim=[] reduces every dim here too.
  vector_norm_kernel(self, ord.toDouble(), mask_of(self, dim), out);
  return out;
}

Tensor& norm_out(const Tensor& self, const std::optional<c10::Scalar>& p, IntArrayRef dim,
                 bool keepdim, Tensor& out) {
  OutMeta<at::meta::structured_norm_ScalarOpt_dim, 1> meta({&out});
  meta.meta(self, p ? at::OptionalScalarRef(&*p) : at::OptionalScalarRef(), dim, keepdim);
  if (!native_dtypes({&self, &out}) || (p && p->isComplex()))
    return call_cpu_fallback<at::_ops::norm_out>(self, p, dim, keepdim, out);
  vector_norm_kernel(self, p ? p->toDouble() : 2.0, mask_of(self, dim), out);
  return out;
}

Tensor& norm_dtype_out(const Tensor& self, const std::optional<c10::Scalar>& p, IntArrayRef dim,
                       bool keepdim, at::ScalarType dtype, Tensor& out) {
  OutMeta<at::meta::structured_norm_ScalarOpt_dim_dtype, 1> meta({&out});
  meta.meta(self, p ? at::OptionalScalarRef(&*p) : at::OptionalScalarRef(), dim, keepdim, dtype);
  if (!native_dtypes({&self, &out}) || (p && p->isComplex()))
    return call_cpu_fallback<at::_ops::norm_dtype_out>(self, p, dim, keepdim, dtype, out);
  vector_norm_kernel(self, p ? p->toDouble() : 2.0, mask_of(self, dim), out);
  return out;
}

// renorm: each slice along `dim` whose p-norm exceeds maxnorm is scaled down to it (the
// CPU's factor maxnorm / (norm + 1e-7), in float for half types, rounded to self's dtype).
Tensor& renorm_out(const Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm,
                   Tensor& out) {
  OutMeta<at::meta::structured_renorm, 1> meta({&out});
  meta.meta(self, p, dim, maxnorm);
  if (!native_dtypes({&self, &out}) || p.isComplex() || maxnorm.isComplex())
    return call_cpu_fallback<at::_ops::renorm_out>(self, p, dim, maxnorm, out);
  if (self.numel() == 0) return out;
  dim = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) dims.push_back(d);
  Tensor norm = at::linalg_vector_norm(self, p, dims, true, at::kFloat);
  Tensor limit = c10::scalar_to_tensor(maxnorm);
  limit.unsafeGetTensorImpl()->set_wrapped_number(true);
  Tensor factor = at::where(at::gt(norm, maxnorm), at::div(limit, at::add(norm, 1e-7)),
                            at::ones_like(norm));
  at::mul_out(out, self, factor.to(self.scalar_type()));
  return out;
}

Tensor trace(const Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"trace\" not implemented for 'Bool'");
  if (!native_dtypes({&self})) return call_cpu_fallback<at::_ops::trace>(self);
  return at::sum(self.diagonal());
}

// ---- softmax -----------------------------------------------------------------------------

// Runs a softmax-family kernel along `dim` of `a` (and `b`) into `out` (already shaped).
void run_softmax(SoftmaxKind kind, const Tensor& a, const Tensor* b, int64_t dim, Tensor& out) {
  if (out.numel() == 0) return;
  const int64_t nd = a.dim();
  if (!at::isFloatingType(a.scalar_type())) {
    // The CPU's kernels refuse integer inputs, naming the kernel for the dim it would use.
    static const char* names[] = {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"};
    const bool lastdim = nd == 0 || c10::maybe_wrap_dim(dim, nd) == nd - 1;
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", names[static_cast<int>(kind)],
                                lastdim ? "_lastdim" : "", "_kernel_impl\" not implemented for '",
                                c10::toString(a.scalar_type()), "'");
  }
  TWGPU_TRY
  ReduceShape shape;
  if (nd > 0) {
    dim = c10::maybe_wrap_dim(dim, nd);
    for (int64_t d = 0; d < dim; ++d) shape.outer *= a.size(d);
    shape.reduce = a.size(dim);
    for (int64_t d = dim + 1; d < nd; ++d) shape.inner *= a.size(d);
  }
  Tensor x = a.contiguous();
  Tensor y = b ? b->contiguous() : Tensor();
  Tensor target = out;
  if (!out.is_contiguous() || same_buffer(out, x) || (b && same_buffer(out, y)))
    target = at::empty(out.sizes(), out.options());
  SoftmaxSpec spec;
  spec.kind = kind;
  spec.in = to_dtype_or_throw(x.scalar_type());
  spec.out = to_dtype_or_throw(out.scalar_type());
  DeviceRef rx = device_ref(x), ro = device_ref(target);
  SoftmaxBuffers bufs{rx.buffer, rx.offset, nullptr, 0, ro.buffer, ro.offset};
  if (b) {
    spec.in2 = to_dtype_or_throw(y.scalar_type());
    DeviceRef ry = device_ref(y);
    bufs.in2 = ry.buffer;
    bufs.in2_offset = ry.offset;
  }
  {
    RuntimeLock lock;
    launch_softmax(lock.ctx(), spec, shape, bufs);
  }
  if (!target.is_same(out)) out.copy_(target);
  TWGPU_CATCH
}

Tensor& softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  OutMeta<at::meta::structured__softmax, 1> meta({&out});
  meta.meta(self, dim, half_to_float);
  TORCH_CHECK(!half_to_float, "softmax with half to float conversion is not supported on CPU");
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::_softmax_out>(self, dim, half_to_float, out);
  run_softmax(SoftmaxKind::Softmax, self, nullptr, dim, out);
  return out;
}

Tensor& log_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  OutMeta<at::meta::structured__log_softmax, 1> meta({&out});
  meta.meta(self, dim, half_to_float);
  TORCH_CHECK(!half_to_float, "softmax with half to float conversion is not supported on CPU");
  if (!native_dtypes({&self, &out}))
    return call_cpu_fallback<at::_ops::_log_softmax_out>(self, dim, half_to_float, out);
  run_softmax(SoftmaxKind::LogSoftmax, self, nullptr, dim, out);
  return out;
}

Tensor& softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim,
                             at::ScalarType input_dtype, Tensor& grad_input) {
  OutMeta<at::meta::structured__softmax_backward_data, 1> meta({&grad_input});
  meta.meta(grad, output, dim, input_dtype);
  if (!native_dtypes({&grad, &output, &grad_input}))
    return call_cpu_fallback<at::_ops::_softmax_backward_data_out>(grad, output, dim, input_dtype,
                                                                   grad_input);
  run_softmax(SoftmaxKind::SoftmaxBackward, grad, &output, dim, grad_input);
  return grad_input;
}

Tensor& log_softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, Tensor& out) {
  OutMeta<at::meta::structured__log_softmax_backward_data, 1> meta({&out});
  meta.meta(grad, output, dim, input_dtype);
  if (!native_dtypes({&grad, &output, &out}))
    return call_cpu_fallback<at::_ops::_log_softmax_backward_data_out>(grad, output, dim,
                                                                       input_dtype, out);
  run_softmax(SoftmaxKind::LogSoftmaxBackward, grad, &output, dim, out);
  return out;
}

// torch.equal: same size and every element equal (NaN never is), from native eq and all;
// one bool comes back to the host, as on CUDA.
bool equal(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), "Cannot compare two tensors on different devices. Got: ",
              a.device(), " and ", b.device());
  if (!a.is_same_size(b)) return false;
  if (a.numel() == 0) return true;
  return at::eq(a, b).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("equal", TORCH_FN(equal));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("prod.int_out", TORCH_FN(prod_int_out));
  m.impl("prod", TORCH_FN(prod_all));
  m.impl("nansum", TORCH_FN(nansum));
  m.impl("nansum.out", TORCH_FN(nansum_out));
  m.impl("logsumexp.out", TORCH_FN(logsumexp_out));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("amin.out", TORCH_FN(amin_out));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("max.unary_out", TORCH_FN(max_unary_out));
  m.impl("min.unary_out", TORCH_FN(min_unary_out));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("aminmax.out", TORCH_FN(aminmax_out));
  m.impl("all.out", TORCH_FN(all_dim_out));
  m.impl("all.dims_out", TORCH_FN(all_dims_out));
  m.impl("all.all_out", TORCH_FN(all_all_out));
  m.impl("any.out", TORCH_FN(any_dim_out));
  m.impl("any.dims_out", TORCH_FN(any_dims_out));
  m.impl("any.all_out", TORCH_FN(any_all_out));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(count_nonzero_dims));
  m.impl("var.correction", TORCH_FN(var_correction));
  m.impl("std.correction", TORCH_FN(std_correction));
  m.impl("var_mean.correction", TORCH_FN(var_mean_correction));
  m.impl("std_mean.correction", TORCH_FN(std_mean_correction));
  m.impl("var.correction_out", TORCH_FN(var_correction_out));
  m.impl("std.correction_out", TORCH_FN(std_correction_out));
  m.impl("linalg_vector_norm.out", TORCH_FN(linalg_vector_norm_out));
  m.impl("norm.out", TORCH_FN(norm_out));
  m.impl("norm.dtype_out", TORCH_FN(norm_dtype_out));
  m.impl("trace", TORCH_FN(trace));
  m.impl("renorm.out", TORCH_FN(renorm_out));
  m.impl("_softmax.out", TORCH_FN(softmax_out));
  m.impl("_log_softmax.out", TORCH_FN(log_softmax_out));
  m.impl("_softmax_backward_data.out", TORCH_FN(softmax_backward_out));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(log_softmax_backward_out));
}

}  // namespace twgpu::aten
